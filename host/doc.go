// Package host runs Kairo above the kernel, and is the one place its
// parts are put together. [Daemon] is the whole of `kairo up` as a type a
// Go program can hold. [New] takes a [Config]: the data folder and the
// manifests.Config that kairo.toml decodes into. [Daemon.Start] locks the
// folder, opens the event store, starts the sandbox launcher, the kernel
// and its Unix socket, the LLM provider, the plugins, the tools and MCP
// servers, memory and the agent, and returns once the socket serves;
// [Daemon.Ready] waits for that from another goroutine, [Daemon.Failed]
// reports a socket server that stopped serving, and [Daemon.Stop] ends the
// parts in reverse order. [Daemon.Run] is Start, then Stop when its context
// is done or the socket server fails. [Daemon.Connect] gives the program
// that embeds Kairo a client of it without a socket.
//
// A command that needs a smaller kernel asks for a [Mode] instead of
// assembling one: [Private] is the kernel `kairo run` starts when no daemon
// runs, [Replaying] opens a data folder's log for [Daemon.Replay] (`kairo
// replay`). No other package builds a kernel, a bus or the plugin engine
// (internal/layercheck fails on one that does). See
// docs/RATIONALE.md#one-composition-root.
//
// The parts above the kernel are the subpackages of host:
//
//   - host/wasm: the WebAssembly plugin engine, on wazero; its Manager
//     runs the plugins of folders.
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
// and the sandbox; host starts them and never the other way round. The
// agent and the tools declare what they need of the plugin engine
// (agent.PolicyPlugins, tools.ToolPlugins) rather than import it: imports point down
// the floors internal/layercheck lists.
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
