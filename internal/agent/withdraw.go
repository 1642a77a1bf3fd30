package agent

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// A canceled task withdraws what it asked for. An approval outlives the
// run loop that asked for it otherwise: the task ends canceled, yet the
// request stays pending until its timeout, and a person who approves it
// later is told it was approved — of an action nobody will run, or, for
// the re-run of a refused skill, of a run that would start after the task
// was stopped. So when a run loop ends, and when a cancel ends a call that
// waits for a person, the agent — the requester — withdraws each pending
// request with approval.decide (withdrawn): the kernel records
// kairo.approval.decided with that outcome, and a later decision is told
// it was withdrawn.

// withdrawApprovals withdraws the pending approvals of run loop loop that
// nothing will act on: those of its calls no longer in progress (canceled)
// and, when the loop ended (ended), every one, the re-runs' included.
func (r *Runtime) withdrawApprovals(loop, reason string, ended bool) {
	r.mu.Lock()
	var ids []string
	if l := r.st.loops[loop]; l != nil {
		ids = pendingOf(l, ended)
	}
	r.mu.Unlock()
	r.withdraw(ids, reason)
}

// pendingOf lists what withdrawApprovals takes back of l. Called under
// r.mu.
func pendingOf(l *runLoop, ended bool) []string {
	var ids []string
	for _, a := range l.actions {
		if a.approvalState == abi.ApprovalPending && (ended || a.status != abi.StatusInProgress) {
			ids = append(ids, a.approval)
		}
		if ended && a.rerunState == abi.ApprovalPending && a.rerun != asking {
			ids = append(ids, a.rerun)
		}
	}
	return ids
}

// withdraw asks the kernel to withdraw each approval of ids, for reason.
// One decided meanwhile stays as decided: the kernel answers with the
// first decision.
func (r *Runtime) withdraw(ids []string, reason string) {
	for _, id := range ids {
		if _, aerr := r.invoke(abi.MethodApprovalDecide, abi.ApprovalDecision{ID: id, Withdrawn: true, Reason: reason}); aerr != nil && r.ctx.Err() == nil {
			r.log.Warn("withdraw an approval", "approval", id, "err", aerr.Message)
		}
	}
}

// withdrawStale, after the state is rebuilt, withdraws what a run loop
// that ended (or a call canceled) while the daemon stopped left pending.
func (r *Runtime) withdrawStale() {
	type stale struct {
		ids    []string
		reason string
	}
	var xs []stale
	r.mu.Lock()
	for _, l := range r.st.loops {
		if ids := pendingOf(l, withdrawsReruns(l.status)); len(ids) > 0 {
			xs = append(xs, stale{ids, withdrawReason(l.status, "")})
		}
	}
	r.mu.Unlock()
	for _, x := range xs {
		r.withdraw(x.ids, x.reason)
	}
}

// withdrawsReruns reports whether a run loop that ended with status takes
// back its pending re-run requests too. A loop that was canceled or stopped
// at its limit does; one that finished does not: an on-deny re-run is asked
// for once its call has ended, so its loop is often done by then, and the
// operator may still approve it (it runs in that task again).
func withdrawsReruns(status string) bool {
	return status == abi.StatusCanceled || status == "max_iterations"
}

// withdrawReason says why a run loop's approvals were withdrawn: it ended
// with status ("" while it stays open: its call was canceled), for why.
func withdrawReason(status, why string) string {
	s := "the call was canceled"
	switch status {
	case "":
	case "canceled":
		s = "its task was canceled"
	default:
		s = "its task ended (" + status + ")"
	}
	if why != "" {
		s += ": " + why
	}
	return s
}

// asked records the approval the kernel answered a call's request with,
// unless its event was applied first, so a cancel that comes before that
// event finds it; a call canceled while it asked withdraws it at once.
func (r *Runtime) asked(actionID string, out msgpack.RawMessage) {
	var ap abi.Approval
	if msgpack.Unmarshal(out, &ap) != nil || ap.ID == "" {
		return
	}
	r.mu.Lock()
	a := r.st.actions[actionID]
	if a == nil {
		r.mu.Unlock()
		return
	}
	if a.approval == "" && ap.State == abi.ApprovalPending {
		a.approval, a.approvalState = ap.ID, abi.ApprovalPending
		a.progress = "waiting for approval: kairo approve " + ap.ID
	}
	stale := a.approval == ap.ID && a.approvalState == abi.ApprovalPending && a.status != abi.StatusInProgress
	status := ""
	if a.loop != nil {
		status = a.loop.status
	}
	r.mu.Unlock()
	if stale {
		r.withdraw([]string{ap.ID}, withdrawReason(status, ""))
	}
}
