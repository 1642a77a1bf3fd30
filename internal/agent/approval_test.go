package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/manifests"
)

// onceSpawn is a policy that answers the first user message with one
// process.spawn of command, and nothing after.
func onceSpawn(command string) Policy {
	var asked atomic.Bool
	return PolicyFunc(func(ctx context.Context, b *abi.Batch) (*abi.Reply, error) {
		if len(b.Events) == 0 || asked.Swap(true) {
			return &abi.Reply{}, nil
		}
		data, _ := msgpack.Marshal(abi.ActionData{Tool: abi.MethodProcessSpawn, Args: `{"command":` + quoteJSON(command) + `}`})
		return &abi.Reply{Actions: []abi.Action{{Type: abi.ActionToolCall, Data: data}}}, nil
	})
}

func quoteJSON(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

func alwaysFor(tool string) func(string) string {
	return func(t string) string {
		if t == tool {
			return manifests.ApprovalAlways
		}
		return manifests.ApprovalNever
	}
}

func decide(t *testing.T, k *kernel.Kernel, id string, yes bool) abi.Approval {
	t.Helper()
	raw, _ := msgpack.Marshal(abi.ApprovalDecision{ID: id, Approved: yes})
	out, aerr := k.Invoke(context.Background(), abi.MethodApprovalDecide, &kernel.Call{Session: operatorSession{}, Params: raw})
	if aerr != nil {
		t.Fatal(aerr)
	}
	var a abi.Approval
	if err := msgpack.Unmarshal(out, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// operatorSession is the operator's door, as a local client's would be.
type operatorSession struct{}

func (operatorSession) Caller() kernel.Caller                { return kernel.Caller{Kind: kernel.KindOperator} }
func (operatorSession) Context() context.Context             { return context.Background() }
func (operatorSession) PushEvents(uint64, []abi.Event) error { return nil }
func (operatorSession) PushChunks([]abi.StreamChunk) error   { return nil }
func (operatorSession) EndStream(uint64, *abi.Error) error   { return nil }

func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// A tool marked "always" does not run until the operator approves it, and
// runs once however often the approval is delivered; the control, a tool
// not marked, runs at once.
func TestApprovalAlways(t *testing.T) {
	e := newEnv(t)
	marker := filepath.Join(t.TempDir(), "ran")
	e.start(Config{Policy: onceSpawn("echo ran >> " + marker), Approval: alwaysFor(abi.MethodProcessSpawn)})
	e.say("run it", "")
	req := decodeAs[abi.ApprovalRequest](t, e.events.until(t, "approval.requested", typed(abi.SubjectApprovalRequested)))
	if req.Tool != abi.MethodProcessSpawn || req.Mode != abi.ApprovalAlways || !strings.Contains(req.Args, marker) {
		t.Fatalf("request %+v", req)
	}
	if n := len(e.events.all(typed(abi.SubjectToolInvoke))); n != 0 {
		t.Fatalf("%d invokes before the decision", n)
	}
	// Delivered three times at once: it runs once.
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); decide(t, e.kernel, req.ID, true) }()
	}
	wg.Wait()
	e.events.until(t, "the process's exit", typed(abi.SubjectProcessExited))
	if again := decide(t, e.kernel, req.ID, true); !again.Already {
		t.Fatalf("a fourth decision was not told it came late: %+v", again)
	}
	if n := len(e.events.all(typed(abi.SubjectToolInvoke))); n != 1 {
		t.Fatalf("%d invokes, want 1:\n%s", n, e.events.dump())
	}
	if n := len(e.events.all(typed(abi.SubjectApprovalDecided))); n != 1 {
		t.Fatalf("%d decided events, want 1", n)
	}
	if n := lines(t, marker); n != 1 {
		t.Fatalf("ran %d times", n)
	}

	// The control: unmarked, the same call runs without asking.
	e2 := newEnv(t)
	marker2 := filepath.Join(t.TempDir(), "ran")
	e2.start(Config{Policy: onceSpawn("echo ran >> " + marker2), Approval: alwaysFor("skill.other")})
	e2.say("run it", "")
	e2.events.until(t, "the process's exit", typed(abi.SubjectProcessExited))
	if n := len(e2.events.all(typed(abi.SubjectApprovalRequested))); n != 0 || lines(t, marker2) != 1 {
		t.Fatalf("unmarked: %d requests, ran %d times", n, lines(t, marker2))
	}
}

// A denial fails the call, with who said no, and nothing runs.
func TestApprovalDenied(t *testing.T) {
	e := newEnv(t)
	marker := filepath.Join(t.TempDir(), "ran")
	e.start(Config{Policy: onceSpawn("echo ran >> " + marker), Approval: alwaysFor(abi.MethodProcessSpawn)})
	e.say("run it", "")
	req := decodeAs[abi.ApprovalRequest](t, e.events.until(t, "approval.requested", typed(abi.SubjectApprovalRequested)))
	decide(t, e.kernel, req.ID, false)
	res := decodeAs[abi.ToolResultEvent](t, e.events.until(t, "the failed result", typed(abi.SubjectToolResult)))
	if res.Status != abi.StatusFailed || !strings.Contains(res.Error, "not approved by operator/0") {
		t.Fatalf("result %+v", res)
	}
	if lines(t, marker) != 0 || len(e.events.all(typed(abi.SubjectToolInvoke))) != 0 {
		t.Fatal("a denied call ran")
	}
}

// The user's "yes" in the chat decides the one pending approval; a "no"
// from a skill would not (the kernel reads who said it).
func TestApprovalFromChatMessage(t *testing.T) {
	e := newEnv(t)
	marker := filepath.Join(t.TempDir(), "ran")
	e.start(Config{Policy: onceSpawn("echo ran >> " + marker), Approval: alwaysFor(abi.MethodProcessSpawn)})
	e.say("run it", "")
	e.events.until(t, "approval.requested", typed(abi.SubjectApprovalRequested))
	// The test's messages come from "test", as an input plugin's would
	// from plugin/NAME; the kernel takes the user's word from operator/
	// and plugin/ sources only.
	raw, _ := msgpack.Marshal(abi.UserMessage{Text: "yes", MessageID: "m-yes"})
	if _, err := e.bus.Publish(context.Background(), &abi.Event{Type: abi.SubjectUserMessage, Source: "plugin/terminal", Data: raw}); err != nil {
		t.Fatal(err)
	}
	d := decodeAs[abi.ApprovalDecision](t, e.events.until(t, "approval.decided", typed(abi.SubjectApprovalDecided)))
	if !d.Approved || d.By != "agent/default" || !strings.Contains(d.Reason, "yes") {
		t.Fatalf("decided %+v", d)
	}
	e.events.until(t, "the process's exit", typed(abi.SubjectProcessExited))
	if lines(t, marker) != 1 {
		t.Fatal("the approved call did not run once")
	}
}

// A pending approval survives a restart: the call is not marked
// interrupted, and runs once when approved after it.
func TestApprovalPendingAcrossRestart(t *testing.T) {
	e := newEnv(t)
	marker := filepath.Join(t.TempDir(), "ran")
	r, err := New(Config{Kernel: e.kernel, Policy: onceSpawn("echo ran >> " + marker), Approval: alwaysFor(abi.MethodProcessSpawn), Logger: quiet, Hz: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	e.say("run it", "")
	req := decodeAs[abi.ApprovalRequest](t, e.events.until(t, "approval.requested", typed(abi.SubjectApprovalRequested)))
	r.Stop()
	e.kernel.Close()
	e.bus.Close()

	e.open()
	if p := e.kernel.Approvals(false); len(p) != 1 || p[0].ID != req.ID {
		t.Fatalf("pending after the restart: %+v", p)
	}
	e.start(Config{Policy: onceSpawn("echo again >> " + marker), Approval: alwaysFor(abi.MethodProcessSpawn)})
	decide(t, e.kernel, req.ID, true)
	e.events.until(t, "the process's exit", typed(abi.SubjectProcessExited))
	if n := len(e.events.all(func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectToolResult && strings.Contains(decodeAny(ev.Data), "interrupted")
	})); n != 0 {
		t.Fatalf("the waiting call was marked interrupted:\n%s", e.events.dump())
	}
	if n := lines(t, marker); n != 1 {
		t.Fatalf("ran %d times", n)
	}
}
