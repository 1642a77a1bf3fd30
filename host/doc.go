// Package host runs Kairo above the kernel. Daemon is the whole of
// `kairo up` as a type a Go program can hold. New takes a Config: the data
// folder and the manifests.Config that kairo.toml decodes into. Start
// locks the folder, opens the event store, starts the sandbox launcher,
// the kernel and its Unix socket, the LLM provider, the plugins, the tools
// and MCP servers, memory and the agent, and returns once the socket
// serves; Ready waits for that from another goroutine, Failed reports a
// socket server that stopped serving, and Stop ends the parts in reverse
// order. Run is Start, then Stop when its context is done or the socket
// server fails. ReadLog and ReplayEvents run a recorded run loop through
// the policy again, for `kairo replay`.
//
// The parts above the kernel are the subpackages of host:
//
//   - host/wasm: the WebAssembly plugin host, on wazero; its Manager runs
//     the plugins of folders.
//   - internal/agent: the agent runtime: the tick loop, the observations, the
//     run loops and the dispatch of what the policy decides.
//   - internal/llm: the host method llm.chat, the one way to a language model.
//   - internal/tools: the tool registry, one table of every source's tools;
//     abi/modelname names them for a model.
//   - internal/mcp: the tools of MCP servers.
//   - internal/memory: the memory of each open run loop, and of those that
//     ended.
//   - host/internal/meter: rewrites a plugin's module so that the host can
//     stop it at any time.
//
// Below host are the kernel (kernel, kernel/bus, kernel/proc, kernel/ipc)
// and the sandbox; host starts them and never the other way round.
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
