package kernel

import (
	"strings"
	"testing"

	"github.com/kairo-os/kairo/abi"
)

// Ids the kernel derives cannot be claimed: a skill once published an
// event with the id of a decision to come ("ap-X-decided"), and the
// operator's approval was then dropped as its duplicate.

// publishAs publishes an app event with id as caller, through
// events.publish.
func publishAs(t *testing.T, k *Kernel, caller Caller, id string) abi.PublishResult {
	t.Helper()
	var res abi.PublishResult
	if aerr := call(t, k, caller, abi.MethodEventsPublish, abi.PublishParams{Event: abi.Event{ID: id, Type: "app.note"}}, &res); aerr != nil {
		t.Fatalf("%s publishes %q: %v", caller, id, aerr)
	}
	return res
}

// A skill that publishes the ids of an approval's request and decision
// first stores events of its own: the request and the operator's decision
// are stored, and the decision is the first. The control: the skill's
// retry with its own id, as chosen or as answered, is a duplicate.
func TestDerivedApprovalIDsCannotBeClaimed(t *testing.T) {
	k := newTestKernel(t)
	skill := Caller{Kind: KindSkill, Name: "fetch"}
	claims := map[string]abi.PublishResult{}
	for _, id := range []string{"ap-act1", "ap-act1-decided", "ap-act2-rerun", "ap-act2-rerun-decided"} {
		res := publishAs(t, k, skill, id)
		if res.Duplicate || res.ID != "skill/fetch:"+id {
			t.Fatalf("the skill's %q: %+v, want a fresh event in its scope", id, res)
		}
		claims[id] = res
	}
	// The operator and a plugin choose the same id: each its own event.
	for _, c := range []Caller{operator, {Kind: KindPlugin, Name: "rules"}} {
		if res := publishAs(t, k, c, "ap-act1-decided"); res.Duplicate || res.ID != c.Source()+":ap-act1-decided" {
			t.Fatalf("%s's ap-act1-decided: %+v", c, res)
		}
	}

	a := request(t, k, "act1")
	if got := eventsOf(t, k, abi.SubjectApprovalRequested); len(got) != 1 || got[0].ID != "ap-act1" {
		t.Fatalf("requested events: %+v", got)
	}
	var d abi.Approval
	if aerr := call(t, k, operator, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: a.ID, Approved: true}, &d); aerr != nil {
		t.Fatal(aerr)
	}
	if d.State != abi.ApprovalApproved || d.Already || d.Decided == nil || d.Decided.By != "operator/0" {
		t.Fatalf("the operator's approval: %+v, want approved now, not before", d)
	}
	evs := eventsOf(t, k, abi.SubjectApprovalDecided)
	if len(evs) != 1 || evs[0].ID != "ap-act1-decided" || evs[0].Source != approvalSource {
		t.Fatalf("decided events: %+v", evs)
	}

	// The same for an on-deny re-run's request and decision.
	var r abi.Approval
	if aerr := call(t, k, theAgent, abi.MethodApprovalRequest, abi.ApprovalRequest{
		ActionID: "act2", Tool: "skill.x", Mode: abi.ApprovalOnDeny, Skill: "x", Grants: abi.Grants{Write: []string{"/srv/out"}},
	}, &r); aerr != nil {
		t.Fatal(aerr)
	}
	if aerr := call(t, k, operator, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: r.ID, Approved: true}, &d); aerr != nil || d.Already {
		t.Fatalf("the re-run's approval: %+v, %v", d, aerr)
	}
	if evs := eventsOf(t, k, abi.SubjectApprovalDecided); len(evs) != 2 || evs[1].ID != "ap-act2-rerun-decided" {
		t.Fatalf("decided events: %+v", evs)
	}

	// The control: the skill's own ids are its own, and a retry is a
	// duplicate at the seq it was stored.
	for id, first := range claims {
		for _, again := range []string{id, first.ID} {
			if res := publishAs(t, k, skill, again); !res.Duplicate || res.Seq != first.Seq || res.ID != first.ID {
				t.Fatalf("the skill's retry of %q as %q: %+v, want the duplicate of %+v", id, again, res, first)
			}
		}
	}
}

// No principal claims another's id, nor an id the bus chooses: a skill
// naming another skill's scoped id, the operator's, a report's of the
// store, or a UUIDv7 of the bus stores its own event. The control: the
// owner's retry is a duplicate.
func TestClientIDsAreScopedByPrincipal(t *testing.T) {
	k := newTestKernel(t)
	fetch := Caller{Kind: KindSkill, Name: "fetch"}
	other := Caller{Kind: KindSkill, Name: "other"}
	mine := publishAs(t, k, fetch, "order-42")
	ops := publishAs(t, k, operator, "deploy-1")
	for _, id := range []string{mine.ID, ops.ID, "order-42", "store-skipped-7", "store-gap-3-9", abi.NewID()} {
		res := publishAs(t, k, other, id)
		if res.Duplicate || res.ID != "skill/other:"+id {
			t.Fatalf("skill other publishing %q: %+v, want its own event", id, res)
		}
	}
	if res := publishAs(t, k, fetch, "order-42"); !res.Duplicate || res.Seq != mine.Seq {
		t.Fatalf("the owner's retry: %+v, want the duplicate of %+v", res, mine)
	}
	if res := publishAs(t, k, operator, "deploy-1"); !res.Duplicate || res.Seq != ops.Seq {
		t.Fatalf("the operator's retry: %+v, want the duplicate of %+v", res, ops)
	}
	// An id left empty is the bus's, as before.
	if res := publishAs(t, k, fetch, ""); res.Duplicate || strings.Contains(res.ID, ":") || len(res.ID) != 36 {
		t.Fatalf("an id the bus chose: %+v", res)
	}
}
