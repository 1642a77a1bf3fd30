package abi

// KernelSubjects are the subjects only the kernel and the host publish:
// events.publish refuses them to every caller, the operator included, and
// no plugin or skill grant can cover them. A consumer may therefore trust
// what such an event says happened — a process exited, a run loop was
// canceled — by its subject, because the kernel checked who asked.
//
// A user's request to cancel a run loop reaches the bus as
// kairo.intent.cancel only through the intent.cancel method, which the
// kernel checks against the caller's grants and stamps with its principal.
var KernelSubjects = []string{
	SubjectProcessAll,
	SubjectIntentAll,
	SubjectToolAll,
	SubjectAgentAll,
	SubjectPluginAll,
	SubjectSandboxAll,
	SubjectApprovalAll,
	SubjectSystemAll,
	SubjectLLMAll,    // recorded model exchanges: what a replay answers from
	SubjectMCPAll,    // tool servers' state, as the host saw it
	SubjectMemoryAll, // what the agent's memory indexed
}

// Principal kinds, the prefix of an event's source: who published it.
const (
	PrincipalOperator = "operator" // a local client of the socket: "operator/UID"
	PrincipalSkill    = "skill"    // a sandboxed binary skill: "skill/NAME"
	PrincipalPlugin   = "plugin"   // a wasm plugin: "plugin/NAME"
	PrincipalAgent    = "agent"    // the agent for its run loops: "agent/ID"
	PrincipalHost     = "host"     // the daemon's own components: "host/PART"
	PrincipalKernel   = "kernel"   // the kernel itself: "kernel", "kernel/proc"
)
