package kernel

import (
	"strings"
	"testing"

	"github.com/kairo-os/kairo/abi"
)

// An actionId that ends in a suffix the kernel adds to approvals' ids, or
// is too long for the decision's id to fit, is refused: "act1-decided"
// would make a request whose id is act1's decision's. The control: the
// longest actionId that fits is decided, and its decision stored.
func TestApprovalActionIDsCannotCollide(t *testing.T) {
	k := newTestKernel(t)
	a := request(t, k, "act1")
	for _, id := range []string{"act1-decided", "act1-rerun", "act1-rerun-decided", strings.Repeat("a", maxActionIDLen+1)} {
		aerr := call(t, k, theAgent, abi.MethodApprovalRequest, abi.ApprovalRequest{
			ActionID: id, Tool: "skill.fetch", Mode: abi.ApprovalAlways,
		}, nil)
		wantDenied(t, "actionId "+id[:min(len(id), 20)], aerr, "actionId")
	}
	var d abi.Approval
	if aerr := call(t, k, operator, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: a.ID, Approved: true}, &d); aerr != nil || d.Already {
		t.Fatalf("act1's approval: %+v, %v", d, aerr)
	}

	long := strings.Repeat("a", maxActionIDLen)
	var r abi.Approval
	if aerr := call(t, k, theAgent, abi.MethodApprovalRequest, abi.ApprovalRequest{
		ActionID: long, Tool: "skill.x", Mode: abi.ApprovalOnDeny, Skill: "x", Grants: abi.Grants{Write: []string{"/srv/out"}},
	}, &r); aerr != nil {
		t.Fatal(aerr)
	}
	if aerr := call(t, k, operator, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: r.ID, Approved: false}, &d); aerr != nil || d.State != abi.ApprovalDenied {
		t.Fatalf("the longest actionId's decision: %+v, %v", d, aerr)
	}
	if evs := eventsOf(t, k, abi.SubjectApprovalDecided); len(evs) != 2 || len(evs[1].ID) != abi.MaxIDLen {
		t.Fatalf("decided events: %d, want 2, the last's id %d bytes", len(evs), abi.MaxIDLen)
	}
}
