package agent

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/tools"
	"github.com/kairo-os/kairo/kernel"
)

// A message opens a run loop; the process it asks for runs; its end comes
// back as a note and a closing say; every event of it carries the run
// loop's correlationId and the right causationId.
func TestRunLoopChain(t *testing.T) {
	e := newEnv(t)
	e.start(Config{Policy: e.rules()})
	msg := e.say("run echo hello; echo world", "")

	routed := e.events.until(t, "the routed message", typed(abi.AgentMessageSubject("default")))
	if routed.CausationID != msg.ID {
		t.Fatalf("routed message caused by %s, want the user message %s", routed.CausationID, msg.ID)
	}
	started := e.events.until(t, "intent.started", typed(abi.SubjectIntentStarted))
	loop := started.CorrelationID
	if d := decodeAs[abi.IntentStarted](t, started); d.RunLoopID != loop || d.Goal != "run echo hello; echo world" || d.Agent != "default" {
		t.Fatalf("intent.started = %+v", d)
	}
	act := e.events.until(t, "the tool_call", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectAgentAction && decodeAs[abi.ActionEvent](t, ev).Type == abi.ActionToolCall
	})
	if act.CorrelationID != loop || act.CausationID != routed.ID {
		t.Fatalf("action corr %s cause %s; want %s and the routed message %s", act.CorrelationID, act.CausationID, loop, routed.ID)
	}
	inv := e.events.until(t, "tool.invoke", typed(abi.SubjectToolInvoke))
	res := e.events.until(t, "tool.result", typed(abi.SubjectToolResult))
	for _, ev := range []*abi.Event{inv, res} {
		if ev.CorrelationID != loop || ev.CausationID != act.ID {
			t.Fatalf("%s: corr %s cause %s; want %s and the action %s", ev.Type, ev.CorrelationID, ev.CausationID, loop, act.ID)
		}
	}
	r := decodeAs[abi.ToolResultEvent](t, res)
	if r.Status != abi.StatusDone || r.ProcessID == "" || r.ActionID != act.ID {
		t.Fatalf("tool.result = %+v", r)
	}
	exited := e.events.until(t, "process.exited", typed("kairo.process.exited"))
	if exited.CorrelationID != loop || exited.CausationID != act.ID {
		t.Fatalf("process.exited corr %s cause %s", exited.CorrelationID, exited.CausationID)
	}
	note := decodeAs[abi.Note](t, e.events.until(t, "agent.note", typed(abi.SubjectAgentNote)))
	if note.RunLoopID != loop || note.ProcessID != r.ProcessID || note.ExitCode == nil || *note.ExitCode != 0 ||
		strings.Join(note.LastLines, "|") != "hello|world" {
		t.Fatalf("note = %+v", note)
	}
	e.events.until(t, "the closing say", sayIn(loop, "finished in"))
	ended := decodeAs[abi.IntentEnded](t, e.events.until(t, "intent.ended", typed(abi.SubjectIntentEnded)))
	if ended.RunLoopID != loop || ended.Status != "done" {
		t.Fatalf("intent.ended = %+v", ended)
	}
}

// While a long process runs: "how far along is it?" gets its progress and
// opens nothing; "use 1 instead" is an iteration of the same run loop —
// the cancel and the new spawn are caused by that message, the first
// process's action gets its canceled result, the first tree dies before the
// second starts — and the run loop ends once, when the second is done.
// "stop it" then has nothing to stop.
func TestBargeIn(t *testing.T) {
	e := newEnv(t)
	e.start(Config{Policy: e.rules()})
	e.say("run sleep 30", "")
	res := decodeAs[abi.ToolResultEvent](t, e.events.until(t, "tool.result", typed(abi.SubjectToolResult)))
	first := e.events.until(t, "intent.started", typed(abi.SubjectIntentStarted)).CorrelationID
	var info abi.ProcessInfo
	if err := msgpack.Unmarshal(res.Result, &info); err != nil || info.PID == 0 {
		t.Fatalf("tool.result carries no process: %v", err)
	}

	e.say("how far along is it?", "")
	e.events.until(t, "a progress answer", sayIn(first, "`sleep 30` is running ("+res.ProcessID+")"))
	if n := len(e.events.all(typed(abi.SubjectIntentStarted))); n != 1 {
		t.Fatalf("%d run loops after a progress question, want 1:\n%s", n, e.events.dump())
	}

	change := e.say("use 1 instead", "")
	routed := e.events.until(t, "the routed change", func(ev *abi.Event) bool {
		return ev.Type == abi.AgentMessageSubject("default") && ev.CausationID == change.ID
	})
	cancel := e.events.until(t, "the cancel", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectAgentAction && decodeAs[abi.ActionEvent](t, ev).Type == abi.ActionCancel
	})
	if d := decodeAs[abi.ActionEvent](t, cancel); cancel.CorrelationID != first || cancel.CausationID != routed.ID || !d.Keep {
		t.Fatalf("cancel corr %s cause %s %+v; want run loop %s, caused by %s, keeping it open", cancel.CorrelationID, cancel.CausationID, d, first, routed.ID)
	}
	spawn := e.events.until(t, "the second command", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectAgentAction && strings.Contains(decodeAs[abi.ActionEvent](t, ev).Args, `"sleep 1"`)
	})
	if spawn.CorrelationID != first || spawn.CausationID != routed.ID {
		t.Fatalf("the second spawn: corr %s cause %s; want run loop %s, caused by %s", spawn.CorrelationID, spawn.CausationID, first, routed.ID)
	}
	canceled := e.events.until(t, "the first call's canceled result", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectToolResult && decodeAs[abi.ToolResultEvent](t, ev).Status == abi.StatusCanceled
	})
	if d := decodeAs[abi.ToolResultEvent](t, canceled); d.ActionID != res.ActionID || canceled.CausationID != cancel.ID || d.ProcessID != res.ProcessID {
		t.Fatalf("canceled result %+v cause %s; want action %s caused by the cancel %s", d, canceled.CausationID, res.ActionID, cancel.ID)
	}
	exited := e.events.until(t, "the first process's exit", func(ev *abi.Event) bool {
		return ev.Type == "kairo.process.exited" && decodeAs[abi.ProcessExitedEvent](t, ev).ProcessID == res.ProcessID
	})
	invoked := e.events.until(t, "the second invoke", func(ev *abi.Event) bool { return ev.Type == abi.SubjectToolInvoke && ev.CausationID == spawn.ID })
	if !(cancel.Seq < canceled.Seq && canceled.Seq < exited.Seq && exited.Seq < invoked.Seq) {
		t.Fatalf("order: cancel %d, canceled result %d, first exit %d, second invoke %d; want that order", cancel.Seq, canceled.Seq, exited.Seq, invoked.Seq)
	}
	if err := syscall.Kill(info.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the canceled process %d is still there: %v", info.PID, err)
	}
	ended := e.events.until(t, "the run loop's end", typed(abi.SubjectIntentEnded))
	if d := decodeAs[abi.IntentEnded](t, ended); ended.CorrelationID != first || d.Status != "done" {
		t.Fatalf("ended %s %+v; want run loop %s done", ended.CorrelationID, d, first)
	}
	e.events.until(t, "the closing say", sayIn(first, "`sleep 1` finished in"))

	e.say("stop it", "")
	e.events.until(t, "nothing to stop", sayIn("", "Nothing is running to stop."))

	if n := len(e.events.all(func(ev *abi.Event) bool { return ev.Type == abi.SubjectIntentStarted && ev.CorrelationID == first })); n != 1 {
		t.Fatalf("%d intent.started for the run loop", n)
	}
	if n := len(e.events.all(func(ev *abi.Event) bool { return ev.Type == abi.SubjectIntentEnded && ev.CorrelationID == first })); n != 1 {
		t.Fatalf("%d intent.ended for the run loop, want 1:\n%s", n, e.events.dump())
	}
	// Every tool call has its result: none was left open.
	calls := e.events.all(func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectAgentAction && decodeAs[abi.ActionEvent](t, ev).Type == abi.ActionToolCall
	})
	for _, c := range calls {
		if len(e.events.all(func(ev *abi.Event) bool {
			return ev.Type == abi.SubjectToolResult && ev.CorrelationID == first && decodeAs[abi.ToolResultEvent](t, ev).ActionID == c.ID
		})) == 0 {
			t.Fatalf("tool call %s has no result", c.ID)
		}
	}
	if len(calls) != 2 {
		t.Fatalf("%d tool calls, want 2", len(calls))
	}
}

// A message is routed once per messageId, however often it is published.
func TestMessagesDeduplicated(t *testing.T) {
	e := newEnv(t)
	e.start(Config{Policy: e.rules()})
	e.say("help", "same-id")
	e.say("help", "same-id")
	e.say("what is running", "other-id")
	e.events.until(t, "the answer to the last", sayIn("", "Nothing is running."))
	if n := len(e.events.all(typed(abi.AgentMessageSubject("default")))); n != 2 {
		t.Fatalf("%d messages routed, want 2", n)
	}
}

// After a restart the agent knows each action as done, in progress or
// interrupted: a process the log shows running, which this kernel does not
// run, is marked interrupted by an event, and the agent says so.
func TestRestartMarksInterrupted(t *testing.T) {
	e := newEnv(t)
	publish := func(ev abi.Event, data any) {
		raw, _ := msgpack.Marshal(data)
		ev.Data, ev.Source = raw, "agent/default"
		if _, err := e.bus.Publish(context.Background(), &ev); err != nil {
			t.Fatal(err)
		}
	}
	// What a daemon that died mid-run left in the log.
	publish(abi.Event{ID: "start-1", Type: abi.SubjectIntentStarted, CorrelationID: "loop-1"}, abi.IntentStarted{RunLoopID: "loop-1", Agent: "default", Goal: "run sleep 600"})
	publish(abi.Event{ID: "act-1", Type: abi.SubjectAgentAction, CorrelationID: "loop-1"}, abi.ActionEvent{Type: abi.ActionToolCall, ActionData: abi.ActionData{Tool: abi.MethodProcessSpawn, Args: `{"command":"sleep 600"}`}})
	publish(abi.Event{Type: abi.SubjectToolResult, CorrelationID: "loop-1", CausationID: "act-1"}, abi.ToolResultEvent{ActionID: "act-1", Tool: abi.MethodProcessSpawn, Status: abi.StatusDone, ProcessID: "p99"})
	publish(abi.Event{ID: "act-2", Type: abi.SubjectAgentAction, CorrelationID: "loop-1"}, abi.ActionEvent{Type: abi.ActionToolCall, ActionData: abi.ActionData{Tool: abi.MethodProcessSpawn, Args: `{"command":"sleep 601"}`}})

	e.start(Config{Policy: e.rules()})
	ev := e.events.until(t, "process.interrupted", typed("kairo.process.interrupted"))
	if ev.CorrelationID != "loop-1" || ev.CausationID != "act-1" {
		t.Fatalf("interrupted: corr %s cause %s", ev.CorrelationID, ev.CausationID)
	}
	res := e.events.until(t, "a result for the call that had none", func(ev *abi.Event) bool { return ev.Type == abi.SubjectToolResult && ev.CausationID == "act-2" })
	if d := decodeAs[abi.ToolResultEvent](t, res); d.Status != abi.StatusInterrupted {
		t.Fatalf("act-2's result = %+v", d)
	}
	e.say("how far along is it?", "")
	// Nothing is in progress any more; asked about the task, the agent
	// reports what became of each action.
	e.say("what is running", "")
	e.events.until(t, "nothing running", sayIn("", "Nothing is running."))
}

// A run loop ends at its iteration limit with a say of what was done, not
// an error.
func TestMaxIterations(t *testing.T) {
	e := newEnv(t)
	var calls atomic.Int32
	policy := PolicyFunc(func(ctx context.Context, b *abi.Batch) (*abi.Reply, error) {
		calls.Add(1)
		data, _ := msgpack.Marshal(abi.ActionData{Text: "still thinking"})
		return &abi.Reply{Actions: []abi.Action{{Type: abi.ActionSay, Data: data}}}, nil
	})
	e.start(Config{Policy: policy, MaxIterations: 3, Heartbeat: 10 * time.Millisecond})
	e.say("think forever", "")
	loop := e.events.until(t, "intent.started", typed(abi.SubjectIntentStarted)).CorrelationID
	e.events.until(t, "the final say", sayIn(loop, "I stopped after 3 steps, the limit for one task. Done so far: nothing was run"))
	ended := decodeAs[abi.IntentEnded](t, e.events.until(t, "intent.ended", typed(abi.SubjectIntentEnded)))
	if ended.Status != "max_iterations" {
		t.Fatalf("ended = %+v", ended)
	}
	if n := len(e.events.all(sayIn(loop, "still thinking"))); n != 3 {
		t.Fatalf("%d says in the loop before its end, want 3", n)
	}
}

// A policy that fails, or answers what cannot be carried out, is reported
// and the tick is a noop; what it was shown comes again next tick, and the
// runtime keeps going.
func TestPolicyFailuresAreNoops(t *testing.T) {
	e := newEnv(t)
	var calls, shownAgain atomic.Int32
	policy := PolicyFunc(func(ctx context.Context, b *abi.Batch) (*abi.Reply, error) {
		switch calls.Add(1) {
		case 1:
			return nil, errors.New("the model answered garbage")
		case 2:
			shownAgain.Store(int32(len(b.Events)))
			return &abi.Reply{Actions: []abi.Action{{Type: "dance"}, {Type: abi.ActionSay, Data: []byte{0xc1}}}}, nil
		}
		if len(b.Events) == 0 {
			return &abi.Reply{}, nil
		}
		data, _ := msgpack.Marshal(abi.ActionData{Text: "answered", Done: true})
		return &abi.Reply{Actions: []abi.Action{{Type: abi.ActionSay, Data: data}}}, nil
	})
	e.start(Config{Policy: policy})
	e.say("hello", "")
	for deadline := time.Now().Add(20 * time.Second); len(e.events.all(typed(SubjectAgentError))) < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not 3 errors within 20s:\n%s", e.events.dump())
		}
	}
	if n := shownAgain.Load(); n != 1 {
		t.Fatalf("the tick after the failure was shown %d events, want the message again", n)
	}
	e.say("hello again", "")
	e.events.until(t, "the answer after the failures", sayIn("", "answered"))
	errs := e.events.all(typed(SubjectAgentError))
	if len(errs) != 3 {
		t.Fatalf("%d errors reported, want 3:\n%s", len(errs), e.events.dump())
	}
	for i, want := range []string{"the policy failed: the model answered garbage", `unknown action "dance"`, "its data is not an ActionData"} {
		if d := decodeAs[abi.AgentError](t, &errs[i]); !strings.Contains(d.Error, want) {
			t.Fatalf("error %d = %q, want %q", i, d.Error, want)
		}
	}
}

// Queries that nobody answers slow the ticks; a user message restores them.
func TestQueryBackoff(t *testing.T) {
	e := newEnv(t)
	policy := PolicyFunc(func(ctx context.Context, b *abi.Batch) (*abi.Reply, error) {
		data, _ := msgpack.Marshal(abi.ActionData{Text: "which one?"})
		return &abi.Reply{Actions: []abi.Action{{Type: abi.ActionQuery, Data: data}}}, nil
	})
	r := e.start(Config{Policy: policy, Hz: 100, QueryBackoff: 3, MinHz: 10, Heartbeat: 5 * time.Millisecond})
	e.say("do the thing", "")
	deadline := time.Now().Add(10 * time.Second)
	for r.Hz() != 50 {
		if time.Now().After(deadline) {
			t.Fatalf("Hz = %v after unanswered queries, want 50", r.Hz())
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.say("this one", "")
	for r.Hz() != 100 {
		if time.Now().After(deadline) {
			t.Fatalf("Hz = %v after an answer, want 100", r.Hz())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// With barge-in "queue", messages reach the policy one a tick, in order,
// each answered before the next is shown.
func TestBargeInQueue(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var shown [][]string
	policy := PolicyFunc(func(ctx context.Context, b *abi.Batch) (*abi.Reply, error) {
		var texts []string
		var reply abi.Reply
		for _, ev := range b.Events {
			var m abi.UserMessage
			if ev.Type == abi.AgentMessageSubject("default") && msgpack.Unmarshal(ev.Data, &m) == nil {
				texts = append(texts, m.Text)
				data, _ := msgpack.Marshal(abi.ActionData{Text: "re: " + m.Text, Done: true})
				reply.Actions = append(reply.Actions, abi.Action{Type: abi.ActionSay, CausationID: ev.ID, Data: data})
			}
		}
		if len(texts) > 0 {
			mu.Lock()
			shown = append(shown, texts)
			mu.Unlock()
		}
		return &reply, nil
	})
	e.start(Config{Policy: policy, BargeIn: abi.BargeInQueue, Hz: 20})
	var evs []*abi.Event
	for _, text := range []string{"one", "two", "three"} {
		raw, _ := msgpack.Marshal(abi.UserMessage{Text: text, MessageID: text})
		evs = append(evs, &abi.Event{Type: abi.SubjectUserMessage, Source: "test", Data: raw})
	}
	if _, err := e.bus.PublishBatch(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	e.events.until(t, "the last answer", sayIn("", "re: three"))
	mu.Lock()
	defer mu.Unlock()
	if len(shown) != 3 || shown[0][0] != "one" || shown[1][0] != "two" || shown[2][0] != "three" {
		t.Fatalf("the policy was shown %q; want one message a tick, in order", shown)
	}
	if _, err := New(Config{Kernel: e.kernel, Policy: policy, BargeIn: "sometimes"}); err == nil || !strings.Contains(err.Error(), `barge-in "sometimes"`) {
		t.Fatalf("an unknown barge-in setting: %v", err)
	}
}

// A binary skill runs by name with its ARGS; its progress reaches the
// agent, which reports it when asked; a skill it does not know is an error
// result that names the ones it knows.
func TestRunSkill(t *testing.T) {
	e := newEnv(t)
	skill, err := filepath.Abs("../../manifests/examples/progress-demo/skill.toml")
	if err != nil {
		t.Fatal(err)
	}
	e.start(Config{Policy: e.rules(), Skills: map[string]string{"progress-demo": skill}})
	e.say("run progress-demo steps=5 delay=0.3", "")
	loop := e.events.until(t, "intent.started", typed(abi.SubjectIntentStarted)).CorrelationID
	e.events.until(t, "a progress event", func(ev *abi.Event) bool { return ev.Type == "kairo.process.progress" && ev.CorrelationID == loop })
	e.say("how far along is it?", "")
	e.events.until(t, "the progress answer", sayIn(loop, "last progress: percent="))
	e.events.until(t, "the end", sayIn(loop, "`progress-demo steps=5 delay=0.3` finished in"))

	e.say("run nosuchskill now", "")
	e.events.until(t, "a shell's answer", sayIn("", "`nosuchskill now` failed"))
}

// slowAnswer is Tools that answers a call only once the process it
// started has ended and its exit had time to reach the agent: the order a
// loaded machine can give a quick process.
type slowAnswer struct {
	Tools
	k *kernel.Kernel
}

func (s slowAnswer) Call(ctx context.Context, c tools.Invocation) abi.ToolResultEvent {
	res := s.Tools.Call(ctx, c)
	if p, ok := s.k.Proc.Get(res.ProcessID); ok {
		p.Wait(ctx)
		time.Sleep(200 * time.Millisecond)
	}
	return res
}

// A call whose process ended before the call returned still has its
// result in the log: every invoke has one. (The exit, applied first,
// ended the action; the result once went unrecorded.)
func TestResultAfterTheProcessEnded(t *testing.T) {
	e := newEnv(t)
	reg, err := tools.New(tools.Config{Kernel: e.kernel, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	e.start(Config{Policy: onceSpawn("true"), Tools: slowAnswer{reg, e.kernel}})
	e.say("run it", "")
	exited := e.events.until(t, "the process's exit", typed(abi.SubjectProcessExited))
	res := decodeAs[abi.ToolResultEvent](t, e.events.until(t, "the tool's result", typed(abi.SubjectToolResult)))
	if res.Status != abi.StatusDone || res.ProcessID == "" || !strings.Contains(decodeAny(exited.Data), res.ProcessID) {
		t.Fatalf("result %+v after the exit %s", res, decodeAny(exited.Data))
	}
}
