package kernel

import (
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// Only the requester withdraws its request, and only while it is pending:
// the operator, a skill and another agent are refused; the requester's
// withdrawal is recorded as kairo.approval.decided (withdrawn), drops the
// approval from the pending ones, and a later decision is told it was
// withdrawn — also after a restart of the table from the log. The control:
// the requester's own withdrawal is taken.
func TestApprovalWithdrawnByItsRequester(t *testing.T) {
	k := newTestKernel(t)
	a := request(t, k, "act1")
	withdraw := abi.ApprovalDecision{ID: a.ID, Withdrawn: true, Reason: "its task was canceled"}
	for _, c := range []Caller{operator, {Kind: KindSkill, Name: "fetch"}, {Kind: KindAgent, Name: "other"}} {
		wantDenied(t, c.String()+" withdraws", call(t, k, c, abi.MethodApprovalDecide, withdraw, nil), "only the requester withdraws")
	}
	wantDenied(t, "a withdrawal that approves", call(t, k, theAgent, abi.MethodApprovalDecide,
		abi.ApprovalDecision{ID: a.ID, Withdrawn: true, Approved: true}, nil), "neither approves")
	if p := k.Approvals(false); len(p) != 1 {
		t.Fatalf("pending after the refused withdrawals: %+v", p)
	}

	var got abi.Approval
	if aerr := call(t, k, theAgent, abi.MethodApprovalDecide, withdraw, &got); aerr != nil {
		t.Fatalf("the requester's withdrawal: %v", aerr)
	}
	if got.State != abi.ApprovalWithdrawn || got.Already || got.Decided == nil || got.Decided.By != "agent/main" {
		t.Fatalf("withdrawn: %+v", got)
	}
	evs := eventsOf(t, k, abi.SubjectApprovalDecided)
	var d abi.ApprovalDecision
	if len(evs) != 1 || msgpack.Unmarshal(evs[0].Data, &d) != nil || !d.Withdrawn || d.Approved {
		t.Fatalf("decided events %d: %+v", len(evs), d)
	}
	if p := k.Approvals(false); len(p) != 0 {
		t.Fatalf("pending after the withdrawal: %+v", p)
	}
	var late abi.Approval
	if aerr := call(t, k, operator, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: a.ID, Approved: true}, &late); aerr != nil {
		t.Fatal(aerr)
	}
	if !late.Already || late.State != abi.ApprovalWithdrawn {
		t.Fatalf("approved after the withdrawal: %+v", late)
	}

	// The table rebuilt from the log holds it withdrawn.
	k2 := New(k.Bus, Config{})
	defer k2.Close()
	if err := k2.LoadApprovals(t.Context()); err != nil {
		t.Fatal(err)
	}
	if all := k2.Approvals(true); len(all) != 1 || all[0].State != abi.ApprovalWithdrawn {
		t.Fatalf("after a reload: %+v", all)
	}
}
