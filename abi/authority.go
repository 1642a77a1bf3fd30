package abi

import "strings"

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
	SubjectSecretAll, // which process was given which secret
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

// ViaSeparator joins the writer of an event a plugin relayed to the
// plugin: "skill/fetch via plugin/terminal".
const ViaSeparator = " via "

// RelayedSource is the source of an event that plugin (its own source,
// "plugin/NAME") made from an event written by writer, a principal the
// operator does not vouch for: the writer comes first, so whoever tells a
// principal by the prefix of a source sees the writer, never the relay.
// A writer that relayed itself is named by its first writer only.
func RelayedSource(writer, plugin string) string {
	if w, _, ok := Relayed(writer); ok {
		writer = w
	}
	if writer == "" {
		writer = "unknown"
	}
	return writer + ViaSeparator + plugin
}

// Relayed splits a source made by [RelayedSource] into the writer and the
// plugin that relayed its event; ok is false for a source of one
// principal.
func Relayed(source string) (writer, plugin string, ok bool) {
	i := strings.Index(source, ViaSeparator)
	if i < 0 {
		return source, "", false
	}
	return source[:i], source[i+len(ViaSeparator):], true
}

// Vouched reports whether the operator vouches for what source writes:
// the operator itself, the kernel, the daemon's own parts, the agent, and
// the plugins the operator installed, when they speak for themselves. A
// skill, an unknown source and anything a plugin relayed for one of those
// are not: what a plugin makes from their events is theirs.
func Vouched(source string) bool {
	if _, _, relayed := Relayed(source); relayed {
		return false
	}
	kind, _, _ := strings.Cut(source, "/")
	switch kind {
	case PrincipalOperator, PrincipalKernel, PrincipalHost, PrincipalAgent, PrincipalPlugin:
		return true
	}
	// The bus's own default, for an event published in-process with no
	// source; and no source at all: the bus stamps one on every event it
	// stores, so an event without one was handed over by the host itself.
	return source == "kairo" || source == ""
}
