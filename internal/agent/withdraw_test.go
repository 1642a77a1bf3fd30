package agent

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
)

// A stop while an approval is pending withdraws it: the task ends
// canceled, kairo.approval.decided says withdrawn, the kernel no longer
// lists it as pending, and a later approval is told it was withdrawn and
// runs nothing. The control: an approval of a task still running is
// approved and runs once.
func TestCancelWithdrawsApprovals(t *testing.T) {
	e := newEnv(t)
	marker := filepath.Join(t.TempDir(), "ran")
	e.start(Config{Policy: onceSpawn("echo ran >> " + marker), Approval: alwaysFor(abi.MethodProcessSpawn)})
	e.say("run it", "")
	req := decodeAs[abi.ApprovalRequest](t, e.events.until(t, "approval.requested", typed(abi.SubjectApprovalRequested)))

	raw, _ := msgpack.Marshal(abi.CancelParams{CorrelationID: req.CorrelationID, Reason: "stop"})
	if _, aerr := e.kernel.Invoke(context.Background(), abi.MethodIntentCancel, &kernel.Call{Session: operatorSession{}, Params: raw}); aerr != nil {
		t.Fatal(aerr)
	}
	d := decodeAs[abi.ApprovalDecision](t, e.events.until(t, "approval.decided", typed(abi.SubjectApprovalDecided)))
	if !d.Withdrawn || d.Approved || d.ID != req.ID || d.By != "agent/default" || !strings.Contains(d.Reason, "canceled") {
		t.Fatalf("decided %+v", d)
	}
	ended := decodeAs[abi.IntentEnded](t, e.events.until(t, "intent.ended", typed(abi.SubjectIntentEnded)))
	if ended.Status != "canceled" {
		t.Fatalf("ended %+v", ended)
	}
	if p := e.kernel.Approvals(false); len(p) != 0 {
		t.Fatalf("pending after the cancel: %+v", p)
	}
	a := decide(t, e.kernel, req.ID, true)
	if !a.Already || a.State != abi.ApprovalWithdrawn {
		t.Fatalf("an approval after the cancel: %+v", a)
	}
	if lines(t, marker) != 0 || len(e.events.all(typed(abi.SubjectToolInvoke))) != 0 {
		t.Fatal("a withdrawn approval ran the call")
	}
	if n := len(e.events.all(typed(abi.SubjectApprovalDecided))); n != 1 {
		t.Fatalf("%d decided events, want the withdrawal alone", n)
	}

	// The control: the task still runs, so the approval stands and the
	// call runs once.
	e2 := newEnv(t)
	marker2 := filepath.Join(t.TempDir(), "ran")
	e2.start(Config{Policy: onceSpawn("echo ran >> " + marker2), Approval: alwaysFor(abi.MethodProcessSpawn)})
	e2.say("run it", "")
	req2 := decodeAs[abi.ApprovalRequest](t, e2.events.until(t, "approval.requested", typed(abi.SubjectApprovalRequested)))
	if a := decide(t, e2.kernel, req2.ID, true); a.Already || a.State != abi.ApprovalApproved {
		t.Fatalf("the running task's approval: %+v", a)
	}
	e2.events.until(t, "the process's exit", typed(abi.SubjectProcessExited))
	if n := lines(t, marker2); n != 1 {
		t.Fatalf("ran %d times", n)
	}
}

// A request left pending by a task that ended while the daemon was down
// is withdrawn at the next start (the control, one of a task still open
// that stays pending across a restart: TestApprovalPendingAcrossRestart).
func TestWithdrawnAtStart(t *testing.T) {
	e := newEnv(t)
	r, err := New(Config{Kernel: e.kernel, Policy: onceSpawn("true"), Approval: alwaysFor(abi.MethodProcessSpawn), Logger: quiet, Hz: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	e.say("run it", "")
	req := decodeAs[abi.ApprovalRequest](t, e.events.until(t, "approval.requested", typed(abi.SubjectApprovalRequested)))
	r.Stop()
	// The task ends while no agent runs (as a crash between the end and
	// the withdrawal would leave it).
	raw, _ := msgpack.Marshal(abi.IntentEnded{RunLoopID: req.CorrelationID, Status: "canceled"})
	if _, err := e.bus.Publish(context.Background(), &abi.Event{Type: abi.SubjectIntentEnded, Source: "agent/default", CorrelationID: req.CorrelationID, Data: raw}); err != nil {
		t.Fatal(err)
	}
	if p := e.kernel.Approvals(false); len(p) != 1 {
		t.Fatalf("pending before the start: %+v", p)
	}
	e.start(Config{Policy: onceSpawn("true"), Approval: alwaysFor(abi.MethodProcessSpawn)})
	d := decodeAs[abi.ApprovalDecision](t, e.events.until(t, "approval.decided", typed(abi.SubjectApprovalDecided)))
	if !d.Withdrawn || d.ID != req.ID {
		t.Fatalf("decided %+v", d)
	}
}
