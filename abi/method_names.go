package abi

// The kernel's method names: every method a daemon serves, with the
// package that registers it. [MethodClockWait] and [MethodLLMChat] are with
// their params.
const (
	// kernel: the method table itself, events and processes.
	MethodKernelPing       = "kernel.ping"
	MethodKernelIntrospect = "kernel.introspect"
	MethodSystemMetrics    = "system.get_metrics"
	MethodDeviceList       = "device.list"
	MethodDebugHeap        = "debug.heap"

	MethodEventsPublish     = "events.publish"
	MethodEventsSubscribe   = "events.subscribe"
	MethodEventsUnsubscribe = "events.unsubscribe"
	MethodEventsReplay      = "events.replay"

	MethodProcessSpawn      = "process.spawn"
	MethodProcessStdinWrite = "process.stdin.write"
	MethodProcessWait       = "process.wait"
	MethodProcessStatus     = "process.status"
	MethodProcessSignal     = "process.signal"
	MethodProcessKill       = "process.kill"
	MethodProcessPause      = "process.pause"
	MethodProcessResume     = "process.resume"
	MethodProcessResize     = "process.resize"
	MethodProcessAttach     = "process.attach"
	MethodIntentCancel      = "intent.cancel"

	MethodApprovalRequest = "approval.request"
	MethodApprovalDecide  = "approval.decide"
	MethodApprovalList    = "approval.list"

	// host/wasm: the plugins.
	MethodPluginsList    = "plugins.list"
	MethodPluginsRestart = "plugins.restart"
	MethodPluginsGrant   = "plugins.grant"
	MethodPluginsRevoke  = "plugins.revoke"

	// internal/tools: the agent's tools.
	MethodToolsList   = "tools.list"
	MethodToolsResult = "tools.result"

	// internal/agent: run loops and memory; host: replay.
	MethodAgentRuns      = "agent.runs"
	MethodAgentList      = "agent.list"
	MethodAgentReplay    = "agent.replay"
	MethodMemoryRetrieve = "memory.retrieve"
	MethodMemorySearch   = "memory.search"
	MethodMemoryExpand   = "memory.expand"
	MethodMemoryForget   = "memory.forget"

	// host: the console, the daemon's web page.
	MethodConsoleURL = "console.url"
	// host: the trace export.
	MethodTracesExport = "traces.export"
)

// Methods is every method a daemon serves: the table host.Daemon's
// Methods lists, once it is up.
var Methods = []string{
	MethodKernelPing, MethodKernelIntrospect, MethodSystemMetrics, MethodDebugHeap, MethodDeviceList, MethodClockWait,
	MethodEventsPublish, MethodEventsSubscribe, MethodEventsUnsubscribe, MethodEventsReplay,
	MethodProcessSpawn, MethodProcessStdinWrite, MethodProcessWait, MethodProcessStatus, MethodProcessSignal,
	MethodProcessKill, MethodProcessPause, MethodProcessResume, MethodProcessResize, MethodProcessAttach, MethodIntentCancel,
	MethodApprovalRequest, MethodApprovalDecide, MethodApprovalList,
	MethodLLMChat,
	MethodPluginsList, MethodPluginsRestart, MethodPluginsGrant, MethodPluginsRevoke,
	MethodToolsList, MethodToolsResult,
	MethodAgentRuns, MethodAgentList, MethodAgentReplay, MethodMemoryRetrieve, MethodMemorySearch, MethodMemoryExpand, MethodMemoryForget,
	MethodConsoleURL, MethodTracesExport,
}
