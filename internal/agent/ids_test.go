package agent

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
)

// Ids the kernel derives cannot be claimed: a skill published an event
// with the id of the decision to come ("ap-X-decided"); the operator's
// approval was dropped as its duplicate, nothing ran and the task stayed
// open. Now the skill's id is stored in its scope, the decision is stored
// and the action runs once.

// skillSession is a sandboxed skill's door, as its IPC descriptor is.
type skillSession struct{ name string }

func (s skillSession) Caller() kernel.Caller {
	return kernel.Caller{Kind: kernel.KindSkill, Name: s.name}
}
func (skillSession) Context() context.Context             { return context.Background() }
func (skillSession) PushEvents(uint64, []abi.Event) error { return nil }
func (skillSession) PushChunks([]abi.StreamChunk) error   { return nil }
func (skillSession) EndStream(uint64, *abi.Error) error   { return nil }

func publishAsSkill(t *testing.T, k *kernel.Kernel, id string) abi.PublishResult {
	t.Helper()
	raw, _ := msgpack.Marshal(abi.PublishParams{Event: abi.Event{ID: id, Type: "skill.note"}})
	out, aerr := k.Invoke(context.Background(), abi.MethodEventsPublish, &kernel.Call{Session: skillSession{"fetch"}, Params: raw})
	if aerr != nil {
		t.Fatal(aerr)
	}
	var res abi.PublishResult
	if err := msgpack.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestSkillCannotClaimTheDecisionID(t *testing.T) {
	e := newEnv(t)
	marker := filepath.Join(t.TempDir(), "ran")
	e.start(Config{Policy: onceSpawn("echo ran >> " + marker), Approval: alwaysFor(abi.MethodProcessSpawn)})
	e.say("run it", "")
	req := decodeAs[abi.ApprovalRequest](t, e.events.until(t, "approval.requested", typed(abi.SubjectApprovalRequested)))

	claim := publishAsSkill(t, e.kernel, req.ID+"-decided")
	if claim.Duplicate || claim.ID != "skill/fetch:"+req.ID+"-decided" {
		t.Fatalf("the skill's claim: %+v, want an event in its scope", claim)
	}
	if a := decide(t, e.kernel, req.ID, true); a.Already || a.State != abi.ApprovalApproved {
		t.Fatalf("the operator's approval: %+v, want approved now", a)
	}
	e.events.until(t, "the process's exit", typed(abi.SubjectProcessExited))
	decided := e.events.all(typed(abi.SubjectApprovalDecided))
	if len(decided) != 1 || decided[0].ID != req.ID+"-decided" {
		t.Fatalf("decided events: %+v", decided)
	}
	if n := lines(t, marker); n != 1 {
		t.Fatalf("ran %d times, want once", n)
	}

	// The control: the skill's own id again is its duplicate.
	if again := publishAsSkill(t, e.kernel, req.ID+"-decided"); !again.Duplicate || again.Seq != claim.Seq {
		t.Fatalf("the skill's retry: %+v, want the duplicate of %+v", again, claim)
	}
}

// A policy names its actions' ids, and once named the id of its own
// action's decision: "a1" and then "ap-a1-decided". Its ids are stored in
// the agent's scope, so the decision is stored and the call runs once;
// the control: its actions are stored under the ids it named, scoped.
func TestPolicyCannotClaimTheDecisionID(t *testing.T) {
	e := newEnv(t)
	marker := filepath.Join(t.TempDir(), "ran")
	var asked atomic.Bool
	policy := PolicyFunc(func(ctx context.Context, b *abi.Batch) (*abi.Reply, error) {
		if len(b.Events) == 0 || asked.Swap(true) {
			return &abi.Reply{}, nil
		}
		spawn, _ := msgpack.Marshal(abi.ActionData{Tool: abi.MethodProcessSpawn, Args: `{"command":` + quoteJSON("echo ran >> "+marker) + `}`})
		say, _ := msgpack.Marshal(abi.ActionData{Text: "asked"})
		return &abi.Reply{Actions: []abi.Action{
			{ID: "a1", Type: abi.ActionToolCall, Data: spawn},
			{ID: "ap-a1-decided", Type: abi.ActionSay, Data: say},
			{ID: "ap-agent/default:a1-decided", Type: abi.ActionSay, Data: say},
		}}, nil
	})
	e.start(Config{Policy: policy, Approval: alwaysFor(abi.MethodProcessSpawn)})
	e.say("run it", "")
	req := decodeAs[abi.ApprovalRequest](t, e.events.until(t, "approval.requested", typed(abi.SubjectApprovalRequested)))
	if req.ActionID != "agent/default:a1" {
		t.Fatalf("the request's action %q, want the policy's id in the agent's scope", req.ActionID)
	}
	if a := decide(t, e.kernel, req.ID, true); a.Already || a.State != abi.ApprovalApproved {
		t.Fatalf("the operator's approval: %+v, want approved now", a)
	}
	e.events.until(t, "the process's exit", typed(abi.SubjectProcessExited))
	if decided := e.events.all(typed(abi.SubjectApprovalDecided)); len(decided) != 1 || decided[0].ID != req.ID+"-decided" {
		t.Fatalf("decided events: %+v", decided)
	}
	if n := lines(t, marker); n != 1 {
		t.Fatalf("ran %d times, want once", n)
	}
	var says []string
	for _, ev := range e.events.all(typed(abi.SubjectAgentAction)) {
		if decodeAs[abi.ActionEvent](t, &ev).Type == abi.ActionSay {
			says = append(says, ev.ID)
		}
	}
	if len(says) != 2 || says[0] != "agent/default:ap-a1-decided" || says[1] != "agent/default:ap-agent/default:a1-decided" {
		t.Fatalf("says stored as %q, want the policy's two in the agent's scope", says)
	}
}
