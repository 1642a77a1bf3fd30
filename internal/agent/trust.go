package agent

import (
	"strings"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
)

// trusted reports whether the agent may believe what ev says happened, by
// who published it — never by its subject alone. The kernel refuses kernel
// subjects to every caller of events.publish and stamps each event's
// source from its principal; the checks here hold the agent to that even
// over a log written by something else: a process event must come from
// the process manager, the agent's own records from an agent, a cancel
// from a principal the kernel let call intent.cancel.
func trusted(ev *abi.Event) bool {
	src := ev.Source
	if ev.Type == abi.SubjectUserMessage {
		// A skill speaks for itself, never as the user: what it could
		// make the agent do would exceed its own grants. Nor does it
		// through a plugin: what a plugin made of an event the operator
		// does not vouch for names that event's writer first
		// (abi.RelayedSource), and is the writer's.
		if _, _, relayed := abi.Relayed(src); relayed {
			return false
		}
		return !strings.HasPrefix(src, abi.PrincipalSkill+"/")
	}
	if !bus.KernelOwned(ev.Type) {
		return true
	}
	switch {
	case abi.SubjectIn(ev.Type, abi.SubjectProcessAll):
		// The agent records kairo.process.interrupted itself.
		return src == procSource || strings.HasPrefix(src, abi.PrincipalAgent+"/")
	case abi.SubjectIn(ev.Type, abi.SubjectApprovalAll):
		return src == approvalSource
	case abi.SubjectIn(ev.Type, abi.SubjectSandboxAll):
		return src == procSource
	case ev.Type == abi.SubjectIntentCancel:
		return src != "" && !strings.HasPrefix(src, abi.PrincipalKernel)
	case abi.SubjectIn(ev.Type, abi.SubjectAgentAll), abi.SubjectIn(ev.Type, abi.SubjectIntentAll), abi.SubjectIn(ev.Type, abi.SubjectToolAll):
		return strings.HasPrefix(src, abi.PrincipalAgent+"/")
	}
	return true
}

// procSource is the source of the process manager's events, and
// approvalSource of the kernel's approvals.
const (
	procSource     = "kernel/proc"
	approvalSource = "kernel/approval"
)
