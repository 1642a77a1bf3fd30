// Package host is the Kairo daemon above the kernel: the application
// lifecycle, the wazero plugin host, the agent runtime (tick loop,
// observations, memory, run loops), the LLM provider and the tool registry.
// The plugin-host and agent-runtime issues fill it; `kairo up` runs the
// kernel alone until then.
package host
