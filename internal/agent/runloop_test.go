package agent

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
)

// isAction matches an action of type typ in the run loop corr ("" any).
func isAction(t *testing.T, corr, typ string) func(*abi.Event) bool {
	return func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectAgentAction && (corr == "" || ev.CorrelationID == corr) && decodeAs[abi.ActionEvent](t, ev).Type == typ
	}
}

// routedFor waits for the routed copy of the user message msg.
func routedFor(t *testing.T, e *env, msg *abi.Event) *abi.Event {
	t.Helper()
	return e.events.until(t, "the routed message", func(ev *abi.Event) bool {
		return ev.Type == abi.AgentMessageSubject("default") && ev.CausationID == msg.ID
	})
}

// spawned waits for the process.spawn result of the run loop whose goal is
// goal and returns the run loop and the result.
func spawned(t *testing.T, e *env, goal string) (string, abi.ToolResultEvent) {
	t.Helper()
	loop := e.events.until(t, "the run loop of "+goal, func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectIntentStarted && decodeAs[abi.IntentStarted](t, ev).Goal == goal
	}).CorrelationID
	res := decodeAs[abi.ToolResultEvent](t, e.events.until(t, "the spawn of "+goal, func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectToolResult && ev.CorrelationID == loop && decodeAs[abi.ToolResultEvent](t, ev).ProcessID != ""
	}))
	return loop, res
}

// "stop" with one task running stops it without a question, and the chain
// reads: the action, its canceled result caused by the cancel (written
// when the cancel happens, before the process is gone), the process
// canceled and exited, then intent.ended (canceled).
func TestStopChain(t *testing.T) {
	e := newEnv(t)
	e.start(Config{Policy: e.rules()})
	e.say("run sleep 30", "")
	loop, res := spawned(t, e, "run sleep 30")
	info := decodeAs[abi.ProcessSpawned](t, e.events.until(t, "the spawn", typed(abi.SubjectProcessSpawned)))

	stop := e.say("stop", "")
	routed := routedFor(t, e, stop)
	cancel := e.events.until(t, "the cancel", isAction(t, "", abi.ActionCancel))
	if cancel.CorrelationID != loop || cancel.CausationID != routed.ID {
		t.Fatalf("cancel corr %s cause %s; want %s caused by %s", cancel.CorrelationID, cancel.CausationID, loop, routed.ID)
	}
	canceled := e.events.until(t, "the canceled result", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectToolResult && decodeAs[abi.ToolResultEvent](t, ev).Status == abi.StatusCanceled
	})
	if d := decodeAs[abi.ToolResultEvent](t, canceled); d.ActionID != res.ActionID || canceled.CausationID != cancel.ID || canceled.CorrelationID != loop {
		t.Fatalf("canceled result %+v corr %s cause %s; want action %s's, caused by the cancel %s", d, canceled.CorrelationID, canceled.CausationID, res.ActionID, cancel.ID)
	}
	pcanceled := e.events.until(t, "process.canceled", typed("kairo.process.canceled"))
	exited := e.events.until(t, "process.exited", typed("kairo.process.exited"))
	ended := e.events.until(t, "intent.ended", typed(abi.SubjectIntentEnded))
	if d := decodeAs[abi.IntentEnded](t, ended); ended.CorrelationID != loop || d.Status != "canceled" {
		t.Fatalf("ended %s %+v; want %s canceled", ended.CorrelationID, d, loop)
	}
	if !(cancel.Seq < canceled.Seq && canceled.Seq < pcanceled.Seq && pcanceled.Seq < exited.Seq && exited.Seq < ended.Seq) {
		t.Fatalf("order: cancel %d, canceled result %d, process.canceled %d, exited %d, ended %d; want that order:\n%s",
			cancel.Seq, canceled.Seq, pcanceled.Seq, exited.Seq, ended.Seq, e.events.dump())
	}
	if err := syscall.Kill(info.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the canceled process %d is still there: %v", info.PID, err)
	}
	// One result a status: the spawn's, then the canceled one; no second.
	results := e.events.all(func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectToolResult && decodeAs[abi.ToolResultEvent](t, ev).ActionID == res.ActionID
	})
	if len(results) != 2 {
		t.Fatalf("%d results for the action, want the spawn's and the canceled one:\n%s", len(results), e.events.dump())
	}
	// The control: a single task stops without a question.
	if n := len(e.events.all(isAction(t, "", abi.ActionQuery))); n != 0 {
		t.Fatalf("%d questions for a single task", n)
	}
}

// "stop" with two tasks running asks which, listing their short ids and
// goals; the answer by words of the goal stops that one only. "stop all"
// stops every one at once; a progress question asks nothing and opens
// nothing.
func TestStopWhich(t *testing.T) {
	e := newEnv(t)
	e.start(Config{Policy: e.rules()})
	e.say("run sleep 30", "")
	first, _ := spawned(t, e, "run sleep 30")
	e.say("run sleep 40", "")
	second, _ := spawned(t, e, "run sleep 40")

	e.say("how far along is it?", "")
	e.events.until(t, "the progress of both", sayIn("", "Task `"+shortID(first)+"` (run sleep 30)"))
	if n := len(e.events.all(typed(abi.SubjectIntentStarted))); n != 2 {
		t.Fatalf("%d run loops after a progress question, want 2", n)
	}
	if n := len(e.events.all(isAction(t, "", abi.ActionQuery))); n != 0 {
		t.Fatalf("a progress question was answered with a question")
	}

	e.say("stop", "")
	q := e.events.until(t, "which task?", isAction(t, "", abi.ActionQuery))
	text := decodeAs[abi.ActionEvent](t, q).Text
	for _, want := range []string{"Which task do you mean?", "1. `" + shortID(first) + "` run sleep 30", "2. `" + shortID(second) + "` run sleep 40"} {
		if !strings.Contains(text, want) {
			t.Fatalf("the question %q lacks %q", text, want)
		}
	}
	if n := len(e.events.all(isAction(t, "", abi.ActionCancel))); n != 0 {
		t.Fatalf("%d cancels before the answer", n)
	}

	e.say("the sleep 40 one", "")
	cancel := e.events.until(t, "the cancel", isAction(t, "", abi.ActionCancel))
	if cancel.CorrelationID != second {
		t.Fatalf("canceled %s, want the second task %s", cancel.CorrelationID, second)
	}
	e.events.until(t, "the second's end", func(ev *abi.Event) bool { return ev.Type == abi.SubjectIntentEnded && ev.CorrelationID == second })
	e.events.until(t, "the question's answer", sayIn(q.CorrelationID, "Stopping `"+shortID(second)+"`"))

	// The answered question closes; the first task still runs.
	e.say("run sleep 50", "")
	third, _ := spawned(t, e, "run sleep 50")
	e.say("stop all", "")
	e.events.until(t, "the first's end", func(ev *abi.Event) bool { return ev.Type == abi.SubjectIntentEnded && ev.CorrelationID == first })
	e.events.until(t, "the third's end", func(ev *abi.Event) bool { return ev.Type == abi.SubjectIntentEnded && ev.CorrelationID == third })
	if n := len(e.events.all(isAction(t, "", abi.ActionQuery))); n != 1 {
		t.Fatalf("%d questions; \"stop all\" must act at once:\n%s", n, e.events.dump())
	}
	for _, l := range []string{first, second, third} {
		if n := len(e.events.all(func(ev *abi.Event) bool { return ev.Type == abi.SubjectIntentEnded && ev.CorrelationID == l })); n != 1 {
			t.Fatalf("%d intent.ended for %s", n, l)
		}
	}
}

// runs lists the run loops as `kairo runs` gets them.
func runs(t *testing.T, r *Runtime) map[string]abi.RunSummary {
	t.Helper()
	raw, _ := msgpack.Marshal(abi.RunsParams{})
	out, err := r.runsMethod(context.Background(), &kernel.Call{Params: raw})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]abi.RunSummary{}
	for _, s := range out.(abi.RunsResult).Runs {
		m[s.ID] = s
	}
	return m
}

// After a restart, a run loop whose actions were interrupted says once
// what was, is listed as interrupted, and asks nothing of the policy until
// the user speaks; "again" runs them again in the same run loop.
func TestInterruptedWaits(t *testing.T) {
	e := newEnv(t)
	publish := func(ev abi.Event, data any) {
		raw, _ := msgpack.Marshal(data)
		ev.Data, ev.Source = raw, "agent/default"
		if _, err := e.bus.Publish(context.Background(), &ev); err != nil {
			t.Fatal(err)
		}
	}
	// What a daemon that died mid-run left in the log: a process the
	// kernel does not run, and a call without a result.
	publish(abi.Event{ID: "start-1", Type: abi.SubjectIntentStarted, CorrelationID: "loop-1"}, abi.IntentStarted{RunLoopID: "loop-1", Agent: "default", Goal: "run sleep 600", MaxIterations: 25})
	publish(abi.Event{ID: "act-1", Type: abi.SubjectAgentAction, CorrelationID: "loop-1"}, abi.ActionEvent{Type: abi.ActionToolCall, ActionData: abi.ActionData{Tool: abi.MethodProcessSpawn, Args: `{"command":"sleep 600"}`}})
	publish(abi.Event{Type: abi.SubjectToolResult, CorrelationID: "loop-1", CausationID: "act-1"}, abi.ToolResultEvent{ActionID: "act-1", Tool: abi.MethodProcessSpawn, Status: abi.StatusDone, ProcessID: "p99"})
	publish(abi.Event{ID: "act-2", Type: abi.SubjectAgentAction, CorrelationID: "loop-1"}, abi.ActionEvent{Type: abi.ActionToolCall, ActionData: abi.ActionData{Tool: abi.MethodProcessSpawn, Args: `{"command":"sleep 601"}`}})

	r := e.start(Config{Policy: e.rules()})
	const told = "`sleep 600` and `sleep 601` were running when Kairo stopped; they were ended. Say `again` to run them again."
	e.events.until(t, "the user told", sayIn("loop-1", told))
	s := runs(t, r)["loop-1"]
	if s.Status != abi.StatusInterrupted || s.InProgress != 0 {
		t.Fatalf("runs: %+v; want interrupted, nothing in progress", s)
	}
	r.mu.Lock()
	active := r.st.active()
	r.mu.Unlock()
	if active {
		t.Fatal("the interrupted run loop still asks the policy every heartbeat")
	}

	// Restarted again: the user is not told twice.
	r.Stop()
	r = e.start(Config{Policy: e.rules()})
	e.say("what is running", "")
	e.events.until(t, "nothing running", sayIn("", "Nothing is running."))
	if n := len(e.events.all(sayIn("", "when Kairo stopped"))); n != 1 {
		t.Fatalf("told %d times, want once:\n%s", n, e.events.dump())
	}
	if s := runs(t, r)["loop-1"]; s.Status != abi.StatusInterrupted {
		t.Fatalf("after a second restart: %+v", s)
	}

	again := e.say("again", "")
	routed := routedFor(t, e, again)
	var args []string
	for _, want := range []string{`"sleep 600"`, `"sleep 601"`} {
		call := e.events.until(t, "the call again", func(ev *abi.Event) bool {
			return ev.Type == abi.SubjectAgentAction && ev.Seq > routed.Seq && strings.Contains(decodeAs[abi.ActionEvent](t, ev).Args, want)
		})
		if call.CorrelationID != "loop-1" || call.CausationID != routed.ID {
			t.Fatalf("call %s: corr %s cause %s; want loop-1 caused by %s", want, call.CorrelationID, call.CausationID, routed.ID)
		}
		args = append(args, want)
	}
	spawns := 0
	e.events.until(t, "both running", func(ev *abi.Event) bool {
		if ev.Type == "kairo.process.spawned" {
			spawns++
		}
		return spawns == 2
	})
	if s := runs(t, r)["loop-1"]; s.Status != "open" || s.InProgress != 2 {
		t.Fatalf("after again: %+v; want open with 2 in progress", s)
	}
	if n := len(e.events.all(func(ev *abi.Event) bool { return ev.Type == abi.SubjectIntentStarted && ev.Seq > routed.Seq })); n != 0 {
		t.Fatalf("%d run loops opened; \"again\" must run %v in the same one", n, args)
	}
	e.say("stop", "")
	ended := e.events.until(t, "the end", func(ev *abi.Event) bool { return ev.Type == abi.SubjectIntentEnded && ev.CorrelationID == "loop-1" })
	if d := decodeAs[abi.IntentEnded](t, ended); d.Status != "canceled" {
		t.Fatalf("ended %s %+v", ended.CorrelationID, d)
	}
}

// shortID is the end of a run loop's id that `kairo runs` shows and the
// rule policy lists.
func shortID(id string) string {
	if len(id) > 8 {
		return id[len(id)-8:]
	}
	return id
}
