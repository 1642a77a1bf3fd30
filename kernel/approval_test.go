package kernel

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus/sqlite"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/vmihailenco/msgpack/v5"
)

var (
	operator = Caller{Kind: KindOperator, UID: 0, PID: 1}
	theAgent = Caller{Kind: KindAgent, Name: "main"}
)

// eventsOf replays the events of subject from k's log.
func eventsOf(t *testing.T, k *Kernel, subject string) []abi.Event {
	t.Helper()
	pat, err := abi.CompilePattern(subject)
	if err != nil {
		t.Fatal(err)
	}
	var out []abi.Event
	err = k.Bus.Replay(t.Context(), bus.Query{Pattern: pat}, func(ev *abi.Event) error {
		c := *ev
		c.Data = append([]byte(nil), ev.Data...)
		out = append(out, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func request(t *testing.T, k *Kernel, action string) abi.Approval {
	t.Helper()
	var a abi.Approval
	if aerr := call(t, k, theAgent, abi.MethodApprovalRequest, abi.ApprovalRequest{
		ActionID: action, CorrelationID: "run1", Tool: "skill.fetch", Args: `{"url":"x"}`, Mode: abi.ApprovalAlways,
		Reason: "skill.fetch needs approval before it runs",
	}, &a); aerr != nil {
		t.Fatal(aerr)
	}
	return a
}

func TestApprovalDecidedOnce(t *testing.T) {
	k := newTestKernel(t)
	a := request(t, k, "act1")
	if a.ID != "ap-act1" || a.State != abi.ApprovalPending || a.Requester != "agent/main" || a.Expires.IsZero() {
		t.Fatalf("request answered %+v", a)
	}
	// Asked again, it is the same approval, stored once.
	if again := request(t, k, "act1"); again.ID != a.ID {
		t.Fatalf("asked again: %+v", again)
	}
	if n := len(eventsOf(t, k, abi.SubjectApprovalRequested)); n != 1 {
		t.Fatalf("%d requested events, want 1", n)
	}
	var list abi.ApprovalListResult
	if aerr := call(t, k, operator, abi.MethodApprovalList, abi.ApprovalListParams{}, &list); aerr != nil || len(list.Approvals) != 1 {
		t.Fatalf("list: %v %+v", aerr, list)
	}

	// Only the operator decides: not a skill, a plugin, or the agent on
	// its own word.
	for _, c := range []Caller{{Kind: KindSkill, Name: "fetch"}, {Kind: KindPlugin, Name: "rules"}} {
		wantDenied(t, string(c.Kind), call(t, k, c, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: a.ID, Approved: true}, nil), "permission denied")
	}
	wantDenied(t, "agent without a message", call(t, k, theAgent, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: a.ID, Approved: true}, nil), "only from the user's message")

	// The operator's decision, delivered twice: one decided event, and
	// the second answer says the first stands.
	var first, second abi.Approval
	if aerr := call(t, k, operator, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: a.ID, Approved: true}, &first); aerr != nil {
		t.Fatal(aerr)
	}
	if first.State != abi.ApprovalApproved || first.Already || first.Decided.By != "operator/0" {
		t.Fatalf("first decision: %+v", first)
	}
	if aerr := call(t, k, operator, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: a.ID, Approved: false}, &second); aerr != nil {
		t.Fatal(aerr)
	}
	if second.State != abi.ApprovalApproved || !second.Already {
		t.Fatalf("second decision changed it: %+v", second)
	}
	evs := eventsOf(t, k, abi.SubjectApprovalDecided)
	if len(evs) != 1 || evs[0].Source != approvalSource || evs[0].CausationID != a.ID {
		t.Fatalf("decided events: %+v", evs)
	}
	if aerr := call(t, k, operator, abi.MethodApprovalList, abi.ApprovalListParams{}, &list); aerr != nil || len(list.Approvals) != 0 {
		t.Fatalf("pending after the decision: %v %+v", aerr, list)
	}
	wantDenied(t, "unknown id", call(t, k, operator, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: "ap-nope"}, nil), "no approval")
}

func TestApprovalRequestChecked(t *testing.T) {
	k := newTestKernel(t)
	ok := abi.ApprovalRequest{ActionID: "a", Tool: "skill.x", Mode: abi.ApprovalOnDeny, Skill: "x", Grants: abi.Grants{Write: []string{"/srv/out"}}}
	for _, c := range []struct {
		name string
		edit func(*abi.ApprovalRequest)
		want string
	}{
		{"no action", func(r *abi.ApprovalRequest) { r.ActionID = "" }, "actionId"},
		{"bad mode", func(r *abi.ApprovalRequest) { r.Mode = "sometimes" }, `mode "sometimes"`},
		{"relative path", func(r *abi.ApprovalRequest) { r.Grants.Write = []string{"out"} }, `grant path "out"`},
		{"unclean path", func(r *abi.ApprovalRequest) { r.Grants.Write = []string{"/srv/../etc"} }, "clean absolute"},
		{"grants without a skill", func(r *abi.ApprovalRequest) { r.Skill = "" }, "re-run of a refused skill"},
		{"grants for always", func(r *abi.ApprovalRequest) { r.Mode = abi.ApprovalAlways }, "re-run of a refused skill"},
		{"huge args", func(r *abi.ApprovalRequest) { r.Args = strings.Repeat("x", maxApprovalArgs+1) }, "args are"},
	} {
		r := ok
		r.Grants.Write = append([]string(nil), ok.Grants.Write...)
		c.edit(&r)
		wantDenied(t, c.name, call(t, k, theAgent, abi.MethodApprovalRequest, r, nil), c.want)
	}
	// A skill or a plugin may not ask.
	wantDenied(t, "skill asks", call(t, k, Caller{Kind: KindSkill, Name: "x"}, abi.MethodApprovalRequest, ok, nil), "permission denied")
	// The control: the request as it should be.
	var a abi.Approval
	if aerr := call(t, k, theAgent, abi.MethodApprovalRequest, ok, &a); aerr != nil || a.ID != "ap-a-rerun" {
		t.Fatalf("good request: %v %+v", aerr, a)
	}
}

func TestApprovalFromChat(t *testing.T) {
	k := newTestKernel(t)
	a := request(t, k, "act2")
	say := func(src, id, text string) {
		raw, _ := msgpack.Marshal(abi.UserMessage{MessageID: id, Text: text})
		if _, err := k.Bus.Publish(t.Context(), &abi.Event{Type: abi.SubjectUserMessage, Source: src, Data: raw}); err != nil {
			t.Fatal(err)
		}
	}
	say("skill/evil", "m-skill", "yes")
	say("operator/0", "m-no", "no")
	say("operator/0", "m-yes", "Yes!")
	wantDenied(t, "a skill's yes", call(t, k, theAgent, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: a.ID, Approved: true, MessageID: "m-skill"}, nil), "not the user")
	wantDenied(t, "a no read as yes", call(t, k, theAgent, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: a.ID, Approved: true, MessageID: "m-no"}, nil), "does not say yes")
	wantDenied(t, "no such message", call(t, k, theAgent, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: a.ID, Approved: true, MessageID: "m-none"}, nil), "no user message")
	var got abi.Approval
	if aerr := call(t, k, theAgent, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: a.ID, Approved: true, MessageID: "m-yes"}, &got); aerr != nil {
		t.Fatal(aerr)
	}
	if got.State != abi.ApprovalApproved || got.Decided.By != "agent/main" || !strings.Contains(got.Decided.Reason, "Yes!") {
		t.Fatalf("chat decision: %+v", got.Decided)
	}
}

// A pending approval survives a restart of the kernel over the same log;
// one whose time ran out while it was down is denied at the start, by
// "timeout".
func TestApprovalSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	open := func(timeout time.Duration) (*Kernel, func()) {
		st, err := sqlite.Open(path, sqlite.Config{})
		if err != nil {
			t.Fatal(err)
		}
		b := bus.New(st, bus.Config{})
		k := New(b, Config{ApprovalTimeout: timeout})
		if err := k.LoadApprovals(t.Context()); err != nil {
			t.Fatal(err)
		}
		return k, func() { k.Close(); b.Close() }
	}
	k, stop := open(time.Hour)
	long := request(t, k, "long")
	stop()

	k, stop = open(time.Hour)
	if got := k.Approvals(false); len(got) != 1 || got[0].ID != long.ID || !got[0].Expires.Equal(long.Expires) {
		t.Fatalf("after a restart: %+v", got)
	}
	// A short timeout: this one is denied while the kernel runs.
	k2short := request(t, k, "short")
	stop()

	k, stop = open(50 * time.Millisecond)
	defer stop()
	short := request(t, k, "short2")
	deadline := time.Now().Add(5 * time.Second)
	for {
		all := map[string]abi.Approval{}
		for _, a := range k.Approvals(true) {
			all[a.ID] = a
		}
		if all[short.ID].State == abi.ApprovalDenied {
			if d := all[short.ID].Decided; d.By != "timeout" {
				t.Fatalf("timed out by %q", d.By)
			}
			if all[long.ID].State != abi.ApprovalPending || all[k2short.ID].State != abi.ApprovalPending {
				t.Fatalf("the hour-long ones: %+v %+v", all[long.ID], all[k2short.ID])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not timed out: %+v", all[short.ID])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestApprovalSpentOnce(t *testing.T) {
	k := newTestKernel(t)
	var a abi.Approval
	if aerr := call(t, k, theAgent, abi.MethodApprovalRequest, abi.ApprovalRequest{
		ActionID: "r1", Tool: "skill.x", Mode: abi.ApprovalOnDeny, Skill: "x", Grants: abi.Grants{Write: []string{"/srv/out"}},
	}, &a); aerr != nil {
		t.Fatal(aerr)
	}
	if _, _, _, err := k.spendApproval(theAgent, a.ID, "x"); err == nil || !strings.Contains(err.Error(), "pending, not approved") {
		t.Fatalf("spent while pending: %v", err)
	}
	if _, err := k.decideApproval(context.Background(), abi.ApprovalDecision{ID: a.ID, Approved: true, By: "operator/0"}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := k.spendApproval(Caller{Kind: KindAgent, Name: "other"}, a.ID, "x"); err == nil {
		t.Fatal("another agent spent it")
	}
	if _, _, _, err := k.spendApproval(theAgent, a.ID, "y"); err == nil {
		t.Fatal("spent on another skill")
	}
	g, used, _, err := k.spendApproval(theAgent, a.ID, "x")
	if err != nil || len(g.Write) != 1 || g.Write[0] != "/srv/out" {
		t.Fatalf("spend: %v %+v", err, g)
	}
	used("p7")
	if _, _, _, err := k.spendApproval(theAgent, a.ID, "x"); err == nil || !strings.Contains(err.Error(), "spent by p7") {
		t.Fatalf("spent twice: %v", err)
	}
}

// On a store several hosts share, a kernel loads its own host's approvals
// only: another host's request is for that host's agent, which alone acts
// on its decision. The control: the host that asked finds it pending.
func TestApprovalsOfAnotherHost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	open := func(host string) (*Kernel, func()) {
		st, err := sqlite.Open(path, sqlite.Config{})
		if err != nil {
			t.Fatal(err)
		}
		b := bus.New(st, bus.Config{Host: host})
		k := New(b, Config{Host: host})
		if err := k.LoadApprovals(t.Context()); err != nil {
			t.Fatal(err)
		}
		return k, func() { k.Close(); b.Close() }
	}
	k, stop := open("b")
	asked := request(t, k, "on-b")
	stop()

	k, stop = open("a")
	if got := k.Approvals(false); len(got) != 0 {
		t.Fatalf("host a loaded host b's approvals: %+v", got)
	}
	stop()
	k, stop = open("b")
	defer stop()
	if got := k.Approvals(false); len(got) != 1 || got[0].ID != asked.ID {
		t.Fatalf("host b after a restart: %+v; want its own pending request", got)
	}
}

// The agent learns of a decision from the bus and spends the approval at
// once, which may be before the kernel that published the decision has
// applied it: the spend waits for it and gets the grants (it was refused
// as "pending" now and then, under load). The control, above: a spend of
// an approval no one is deciding is refused while it is pending.
func TestApprovalSpentAsSoonAsDecided(t *testing.T) {
	k := newTestKernel(t)
	// The window held open, as a loaded machine does now and then.
	decisionStored = func() { time.Sleep(50 * time.Millisecond) }
	defer func() { decisionStored = nil }()
	for i := range 5 {
		var a abi.Approval
		if aerr := call(t, k, theAgent, abi.MethodApprovalRequest, abi.ApprovalRequest{
			ActionID: fmt.Sprintf("r%d", i), Tool: "skill.x", Mode: abi.ApprovalOnDeny, Skill: "x", Grants: abi.Grants{Write: []string{"/srv/out"}},
		}, &a); aerr != nil {
			t.Fatal(aerr)
		}
		spent := make(chan error, 1)
		sub, err := k.Bus.Subscribe(context.Background(), abi.SubjectApprovalDecided, bus.SubscribeConfig{FromSeq: k.Bus.LastSeq() + 1}, func(evs []abi.Event) error {
			for _, ev := range evs {
				if ev.CausationID == a.ID {
					_, _, _, err := k.spendApproval(theAgent, a.ID, "x")
					spent <- err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.decideApproval(context.Background(), abi.ApprovalDecision{ID: a.ID, Approved: true, By: "operator/0"}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-spent:
			if err != nil {
				t.Fatalf("decision %d: the spend on its event: %v", i, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("decision %d: no spend", i)
		}
		sub.Close()
	}
}
