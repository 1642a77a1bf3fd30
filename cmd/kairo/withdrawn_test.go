package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
)

// TestApproveWithdrawn: kairo approve and kairo deny of an approval its
// requester withdrew (its task was canceled) say it was withdrawn, change
// nothing and exit 1, as for one decided the other way before. The
// control: the approval of a request still pending is approved, exit 0.
func TestApproveWithdrawn(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	d := startUp(t, home)
	c := d.dial()
	defer c.Close()

	gone := requestApproval(t, c, abi.ApprovalRequest{ActionID: "act-gone", CorrelationID: "loop-w-0001", Tool: "shell", Mode: abi.ApprovalAlways, Reason: "shell needs approval"})
	kept := requestApproval(t, c, abi.ApprovalRequest{ActionID: "act-kept", CorrelationID: "loop-w-0002", Tool: "shell", Mode: abi.ApprovalAlways, Reason: "shell needs approval"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The requester (here this client, the operator) withdraws its own.
	var w abi.Approval
	if err := c.Call(ctx, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: gone.ID, Withdrawn: true, Reason: "its task was canceled: stop"}, &w); err != nil || w.State != abi.ApprovalWithdrawn {
		t.Fatalf("withdraw: %v %+v", err, w)
	}
	for _, cmd := range []string{"approve", "deny"} {
		r := kairo(t, home, cmd, gone.ID)
		if r.code != 1 || !strings.Contains(r.stderr, "ap-act-gone was withdrawn by operator/") || !strings.Contains(r.stderr, "its task was canceled") || !strings.Contains(r.stderr, "nothing changed") {
			t.Fatalf("kairo %s of a withdrawn approval:\n%s", cmd, r)
		}
	}
	if a := approvalState(t, c, gone.ID); a.State != abi.ApprovalWithdrawn {
		t.Fatalf("after kairo approve the kernel holds %+v", a)
	}

	r := kairo(t, home, "approve", kept.ID)
	if r.code != 0 || !strings.Contains(r.stdout, "approved ap-act-kept") {
		t.Fatalf("kairo approve of a pending approval:\n%s", r)
	}
}
