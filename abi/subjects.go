package abi

import "strings"

// The subjects of the events the kernel and the host publish, by family:
// one vocabulary for whoever publishes them and whoever reads them. A
// subject is an event's type ("kairo.process.exited"); a pattern
// ("kairo.process.>") is what a subscription or a replay asks for. Method
// names ("process.spawn") are another namespace: see method_names.go.
//
// Every family but the user's, the observations and the terminal input is
// in KernelSubjects: only the kernel and the host publish there.

// SubjectAll matches every event the kernel and the host publish: what a
// client that follows or replays everything of Kairo's asks for.
const SubjectAll = "kairo.>"

// Processes (kernel/proc). Each event carries the process's run loop as its
// correlation id; the data types are in process.go.
const (
	SubjectProcessSpawned         = "kairo.process.spawned"
	SubjectProcessExited          = "kairo.process.exited"
	SubjectProcessCanceled        = "kairo.process.canceled"
	SubjectProcessProgress        = "kairo.process.progress"
	SubjectProcessInterrupted     = "kairo.process.interrupted"
	SubjectProcessOutputThrottled = "kairo.process.output.throttled"

	SubjectProcessAll = "kairo.process.>"
)

// Intents: a run loop opened, ended, or asked to be canceled (the method
// intent.cancel is the only way to that last one).
const (
	SubjectIntentStarted = "kairo.intent.started"
	SubjectIntentEnded   = "kairo.intent.ended"
	SubjectIntentCancel  = "kairo.intent.cancel"

	SubjectIntentAll = "kairo.intent.>"
)

// The daemon itself (host): its start and its clean stop — the last event
// a cleanly stopped daemon stores — the store taking events again after
// its disk was full, and a store across the network going away and coming
// back (kernel/bus). Unreachable and reachable are stored together, once
// the store is back: while it is away nothing can be.
const (
	SubjectSystemStarted          = "kairo.system.started"
	SubjectSystemStopping         = "kairo.system.stopping"
	SubjectSystemStoreWritable    = "kairo.system.store.writable"
	SubjectSystemStoreUnreachable = "kairo.system.store.unreachable"
	SubjectSystemStoreReachable   = "kairo.system.store.reachable"
	SubjectSystemStoreSkipped     = "kairo.system.store.skipped"
	SubjectSystemStoreDropped     = "kairo.system.store.dropped"

	SubjectSystemAll = "kairo.system.>"
)

// Plugins (host/wasm): their lives, their failures and refused calls, and
// the operator's grants. The data types are in plugin.go.
const (
	SubjectPluginStarted   = "kairo.plugin.started"
	SubjectPluginStopped   = "kairo.plugin.stopped"
	SubjectPluginRefused   = "kairo.plugin.refused"
	SubjectPluginUnloaded  = "kairo.plugin.unloaded"
	SubjectPluginFailed    = "kairo.plugin.failed"
	SubjectPluginDenied    = "kairo.plugin.denied"
	SubjectPluginThrottled = "kairo.plugin.throttled"
	SubjectPluginGranted   = "kairo.plugin.granted"
	SubjectPluginRevoked   = "kairo.plugin.revoked"

	SubjectPluginAll = "kairo.plugin.>"
)

// The user: a message for the agent, which anyone granted may publish; the
// runtime routes it to an agent ([AgentMessageSubject]).
const SubjectUserMessage = "kairo.user.message"

// Input sources that are not a user's message: something the agent should
// notice (a timer, a system event), and a line typed at a terminal chat
// before the terminal input plugin turns it into a user message.
const (
	SubjectObservation   = "kairo.observation"
	SubjectTerminalInput = "kairo.input.terminal"
)

// The agent and its run loops (internal/agent). The data types are in agent.go.
const (
	SubjectAgentThought = "kairo.agent.thought"
	SubjectAgentAction  = "kairo.agent.action"
	SubjectAgentNote    = "kairo.agent.note"
	// SubjectAgentTick records a tick whose batch held something or whose
	// reply did: what a replay hands the policy again.
	SubjectAgentTick = "kairo.agent.tick"
	// SubjectAgentError is a tick that failed: what the policy or the
	// runtime could not do, for the run loop it was for.
	SubjectAgentError = "kairo.agent.error"
	// SubjectAgentMessages matches the user messages routed to any agent:
	// [AgentMessageSubject] of every id.
	SubjectAgentMessages = "kairo.agent.*.message"

	SubjectAgentAll = "kairo.agent.>"
)

// AgentMessageSubject is where the runtime routes user messages for agent id.
func AgentMessageSubject(id string) string { return "kairo.agent." + id + ".message" }

// IsAgentMessageSubject reports whether subject is a user message routed
// to an agent: [AgentMessageSubject] of some id, as [SubjectAgentMessages]
// matches.
func IsAgentMessageSubject(subject string) bool {
	id, ok := strings.CutPrefix(subject, "kairo.agent.")
	if !ok {
		return false
	}
	id, ok = strings.CutSuffix(id, ".message")
	return ok && id != "" && !strings.Contains(id, ".")
}

// The agent's tools (internal/tools, internal/agent): a call and its result.
const (
	SubjectToolInvoke = "kairo.tool.invoke"
	SubjectToolResult = "kairo.tool.result"

	SubjectToolAll = "kairo.tool.>"
)

// The recording of the model's exchanges (internal/llm). Both carry the
// correlationId of the run loop the request belongs to; a response's
// causationId is its request's id. What a replay answers from.
const (
	SubjectLLMRequest  = "kairo.llm.request"
	SubjectLLMResponse = "kairo.llm.response"

	SubjectLLMAll = "kairo.llm.>"
)

// The agent's long-term memory (internal/agent, internal/memory): a run loop
// indexed, and what the operator made it forget.
const (
	SubjectMemoryIndexed   = "kairo.memory.indexed"
	SubjectMemoryForgotten = "kairo.memory.forgotten"

	SubjectMemoryAll = "kairo.memory.>"
)

// MCP tool servers (host), as the host saw them: connected, or failed.
const (
	SubjectMCPConnected = "kairo.mcp.connected"
	SubjectMCPFailed    = "kairo.mcp.failed"

	SubjectMCPAll = "kairo.mcp.>"
)

// The sandbox's refusals (kernel/proc): what a process tree tried and was
// refused, and the audit subsystem's state as Kairo found and left it.
// The data types are in consent.go.
const (
	SubjectSandboxDenied = "kairo.sandbox.denied"
	SubjectSandboxAudit  = "kairo.sandbox.audit"

	SubjectSandboxAll = "kairo.sandbox.>"
)

// Secrets (kernel): which process was given which secret, and how — never
// its value ([SecretUse]).
const (
	SubjectSecretUsed = "kairo.secret.used"
	SubjectSecretAll  = "kairo.secret.>"
)

// Approvals (kernel): an action waiting for a person, and the decision.
// The data types are in consent.go.
const (
	SubjectApprovalRequested = "kairo.approval.requested"
	SubjectApprovalDecided   = "kairo.approval.decided"

	SubjectApprovalAll = "kairo.approval.>"
)

// SubjectIn reports whether subject is in family, a pattern of the form
// "kairo.NAME.>" such as [SubjectProcessAll] (or [SubjectAll]): whether family
// matches it.
func SubjectIn(subject, family string) bool {
	prefix, ok := strings.CutSuffix(family, ">")
	return ok && len(subject) > len(prefix) && strings.HasPrefix(subject, prefix)
}
