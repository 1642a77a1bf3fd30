// Package host runs Kairo above the kernel. Daemon is the whole of
// `kairo up` as a type a Go program can hold: configured by the
// manifests.Config that kairo.toml decodes into, it locks a data folder,
// opens the event store, starts the sandbox launcher, the kernel and its
// Unix socket, the LLM provider, the WebAssembly plugins (host/wasm), the
// tool registry and MCP servers (host/tools, host/mcp), memory
// (host/memory) and the agent runtime (host/agent), and stops them in
// reverse order.
//
// Data flows one way: input sources and clients publish on the bus; the
// agent's tick hands what was observed to the policy; the policy's actions
// become kernel calls (processes, tools); what those do is published on
// the bus again.
//
// The sandbox confines each spawned binary through a helper binary: the
// kairo-sandbox binary beside the program when it is there, else the
// program itself, which must then start with
//
//	if sandbox.IsHelper() {
//		sandbox.HelperMain()
//	}
//
// as cmd/kairo's main does.
package host
