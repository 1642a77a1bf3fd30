// Package host is the Kairo daemon above the kernel: the application
// lifecycle, the wazero plugin host, the agent runtime (tick loop,
// observations, memory, run loops), the LLM provider and the tool registry.
//
// Today it holds the plugin host: Host loads a WebAssembly module that
// speaks the plugin ABI (abi/README.md, "Plugins"), refuses one that does
// not, and runs each instance in a wazero runtime of its own, with a memory
// limit, a deadline on every call unless the plugin is trusted, and every
// pointer the guest hands over checked against its memory. A plugin that
// fails is stopped and reports a Failure; its neighbours keep serving.
package host
