package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/llmscript"
)

// The run-loop scenarios of the rule policy, played by the LLM policy
// against a real HTTP server speaking OpenAI's protocol. The server plays a
// competent model: it reads each prompt as a model would — the open tasks,
// their later messages and processes, the labelled new messages — and
// answers from what the prompt shows, never from what the test knows.

// loopOf waits for the run loop whose goal is goal.
func loopOf(t *testing.T, e *env, goal string) string {
	t.Helper()
	return e.events.until(t, "the run loop of "+goal, func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectIntentStarted && decodeAs[abi.IntentStarted](t, ev).Goal == goal
	}).CorrelationID
}

// Three messages that reach the model in one prompt each get their own
// answer, filed under the message it answers: the action format names it.
func TestLLMAnswersEveryMessage(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	model := &llmscript.Server{Think: func(n int, _, prompt string) map[string]any {
		if n == 0 {
			<-release // the three arrive while the model thinks
			return llmscript.Actions(map[string]any{"type": "say", "text": "Hello.", "done": true})
		}
		var acts []map[string]any
		for _, m := range llmscript.Read(prompt).Messages {
			acts = append(acts, map[string]any{"type": "say", "text": "About " + m.Text + ".", "answers": m.Label, "done": true})
		}
		return llmscript.Actions(acts...)
	}}
	e := newEnv(t)
	e.model(model, 0)
	e.start(Config{Policy: e.policy("llm")})
	defer once.Do(func() { close(release) })

	e.say("hi", "")
	e.events.until(t, "the first request", typed(abi.SubjectLLMRequest))
	var routed []*abi.Event
	for _, text := range []string{"the weather", "the news", "the time"} {
		routed = append(routed, routedFor(t, e, e.say(text, "")))
	}
	once.Do(func() { close(release) })
	for i, text := range []string{"the weather", "the news", "the time"} {
		say := e.events.until(t, "the answer about "+text, sayIn("", "About "+text+"."))
		if say.CausationID != routed[i].ID {
			t.Fatalf("the answer about %s answers %s, want its message %s:\n%s", text, say.CausationID, routed[i].ID, e.events.dump())
		}
	}
	if p := model.Prompt(1); !strings.Contains(p, `[m1] the user says: "the weather"`) || !strings.Contains(p, `[m3] the user says: "the time"`) {
		t.Fatalf("the three messages did not reach the model in one prompt:\n%s", p)
	}
}

// "Use 200 instead" while `sleep 300` runs is an iteration of the same run
// loop: the model cancels with keep and spawns the new command in it, both
// caused by the user's message; one intent.ended at the end.
func TestLLMParameterChange(t *testing.T) {
	model := &llmscript.Server{Think: func(n int, _, prompt string) map[string]any {
		s := llmscript.Read(prompt)
		if len(s.Messages) == 0 {
			return llmscript.Noop()
		}
		m := s.Messages[len(s.Messages)-1]
		switch {
		case strings.HasPrefix(m.Text, "run "):
			return llmscript.Calls("process_spawn", map[string]any{"command": strings.TrimPrefix(m.Text, "run ")})
		case strings.HasPrefix(m.Text, "use "):
			task := s.Task("sleep")
			arg := strings.Fields(m.Text)[1]
			return llmscript.Actions(
				map[string]any{"type": "cancel", "runLoopId": task.ID, "keep": true, "reason": "new parameters", "answers": m.Label},
				map[string]any{"type": "tool_call", "tool": "process_spawn", "args": map[string]any{"command": "sleep " + arg}, "runLoopId": task.ID, "answers": m.Label})
		case m.Text == "stop":
			return llmscript.Actions(map[string]any{"type": "cancel", "runLoopId": s.Tasks[0].ID})
		}
		return llmscript.Noop()
	}}
	e := newEnv(t)
	e.model(model, 0)
	e.start(Config{Policy: e.policy("llm")})

	e.say("run sleep 300", "")
	loop := loopOf(t, e, "run sleep 300")
	e.events.until(t, "the first process", typed("kairo.process.spawned"))
	change := routedFor(t, e, e.say("use 200 instead", ""))
	spawn := e.events.until(t, "the new spawn", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectAgentAction && decodeAs[abi.ActionEvent](t, ev).Args == `{"command":"sleep 200"}`
	})
	cancel := e.events.until(t, "the cancel", isAction(t, "", abi.ActionCancel))
	if spawn.CorrelationID != loop || spawn.CausationID != change.ID || cancel.CorrelationID != loop || cancel.CausationID != change.ID {
		t.Fatalf("cancel in %s caused by %s, spawn in %s caused by %s; want both in %s caused by %s",
			cancel.CorrelationID, cancel.CausationID, spawn.CorrelationID, spawn.CausationID, loop, change.ID)
	}
	e.events.until(t, "the canceled result", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectToolResult && ev.CorrelationID == loop && decodeAs[abi.ToolResultEvent](t, ev).Status == abi.StatusCanceled
	})
	e.events.until(t, "the second process", func(ev *abi.Event) bool {
		return ev.Type == "kairo.process.spawned" && ev.CorrelationID == loop && strings.Contains(decodeAny(ev.Data), "sleep 200")
	})
	e.say("stop", "")
	e.events.until(t, "the end", func(ev *abi.Event) bool { return ev.Type == abi.SubjectIntentEnded && ev.CorrelationID == loop })
	if n := len(e.events.all(typed(abi.SubjectIntentStarted))); n != 1 {
		t.Fatalf("%d run loops; a change of parameters is an iteration of one:\n%s", n, e.events.dump())
	}
	if n := len(e.events.all(typed(abi.SubjectIntentEnded))); n != 1 {
		t.Fatalf("%d intent.ended, want one", n)
	}
}

// A restart step by step: the model kills the process with process_kill,
// naming only the process — the kill belongs to that process's task, not
// to a new one — and, told of the exit, reads the new parameter from the
// task's later messages in the prompt and spawns it in the same task.
func TestLLMRestartStepByStep(t *testing.T) {
	model := &llmscript.Server{Think: func(n int, _, prompt string) map[string]any {
		s := llmscript.Read(prompt)
		task := s.Task("sleep")
		for _, m := range s.Messages {
			if strings.HasPrefix(m.Text, "run ") {
				return llmscript.Calls("process_spawn", map[string]any{"command": strings.TrimPrefix(m.Text, "run ")})
			}
			if strings.HasPrefix(m.Text, "restart") && task != nil && len(task.Running) == 1 {
				return llmscript.Calls("process_kill", map[string]any{"processId": task.Running[0]})
			}
		}
		if len(s.Messages) == 0 && task != nil && len(task.Running) == 0 && len(task.Later) > 0 {
			later := task.Later[len(task.Later)-1]
			if i := strings.Index(later, "with "); i >= 0 {
				return llmscript.Calls("process_spawn", map[string]any{"command": later[i+len("with "):], "runLoopId": task.ID})
			}
		}
		return llmscript.Noop()
	}}
	e := newEnv(t)
	e.model(model, 0)
	e.start(Config{Policy: e.policy("llm")})

	e.say("run sleep 300", "")
	loop := loopOf(t, e, "run sleep 300")
	e.events.until(t, "the first process", typed("kairo.process.spawned"))
	restart := routedFor(t, e, e.say("restart it with sleep 200", ""))
	kill := e.events.until(t, "the kill", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectAgentAction && decodeAs[abi.ActionEvent](t, ev).Tool == abi.MethodProcessKill
	})
	if kill.CorrelationID != loop || kill.CausationID != restart.ID {
		t.Fatalf("the kill is in %s caused by %s; want the task %s, caused by %s:\n%s", kill.CorrelationID, kill.CausationID, loop, restart.ID, e.events.dump())
	}
	spawn := e.events.until(t, "the new spawn", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectAgentAction && decodeAs[abi.ActionEvent](t, ev).Args == `{"command":"sleep 200"}`
	})
	if spawn.CorrelationID != loop {
		t.Fatalf("the new spawn is in %s, want the task %s", spawn.CorrelationID, loop)
	}
	if n := len(e.events.all(typed(abi.SubjectIntentStarted))); n != 1 {
		t.Fatalf("%d run loops; the restart opened a stray task:\n%s", n, e.events.dump())
	}
}

// "Stop" with two tasks open: the prompt shows both with ids and goals, so
// the model asks which; the answer by words of the goal stops that one
// only. The control: with one task open, "stop" stops it at once.
func TestLLMStopWhich(t *testing.T) {
	model := &llmscript.Server{Think: func(n int, _, prompt string) map[string]any {
		s := llmscript.Read(prompt)
		if len(s.Messages) == 0 {
			return llmscript.Noop()
		}
		m := s.Messages[len(s.Messages)-1]
		switch {
		case strings.HasPrefix(m.Text, "run "):
			return llmscript.Calls("process_spawn", map[string]any{"command": strings.TrimPrefix(m.Text, "run ")})
		case m.Text == "stop" && len(s.Tasks) == 1:
			return llmscript.Actions(map[string]any{"type": "cancel", "runLoopId": s.Tasks[0].ID})
		case m.Text == "stop":
			q := "Which task do you mean?"
			for i, tk := range s.Tasks {
				q += fmt.Sprintf(" %d. %s %s", i+1, tk.ID, tk.Goal)
			}
			return llmscript.Actions(map[string]any{"type": "query", "text": q})
		case strings.HasPrefix(m.Text, "the "):
			if tk := s.Task(strings.TrimSuffix(strings.TrimPrefix(m.Text, "the "), " one")); tk != nil {
				return llmscript.Actions(map[string]any{"type": "cancel", "runLoopId": tk.ID},
					map[string]any{"type": "say", "text": "Stopping " + tk.ID + ".", "done": true})
			}
		}
		return llmscript.Noop()
	}}
	e := newEnv(t)
	e.model(model, 0)
	e.start(Config{Policy: e.policy("llm")})

	e.say("run sleep 30", "")
	first := loopOf(t, e, "run sleep 30")
	e.say("run sleep 40", "")
	second := loopOf(t, e, "run sleep 40")
	e.events.until(t, "both running", func(ev *abi.Event) bool {
		return ev.Type == "kairo.process.spawned" && ev.CorrelationID == second
	})
	e.say("stop", "")
	q := e.events.until(t, "which task?", isAction(t, "", abi.ActionQuery))
	if text := decodeAs[abi.ActionEvent](t, q).Text; !strings.Contains(text, "1. "+first+" run sleep 30") || !strings.Contains(text, "2. "+second+" run sleep 40") {
		t.Fatalf("the question %q does not list both tasks", text)
	}
	if n := len(e.events.all(isAction(t, "", abi.ActionCancel))); n != 0 {
		t.Fatalf("%d cancels before the answer", n)
	}
	e.say("the sleep 40 one", "")
	e.events.until(t, "the second's end", func(ev *abi.Event) bool { return ev.Type == abi.SubjectIntentEnded && ev.CorrelationID == second })

	// The control: one task left, "stop" stops it without a question.
	e.say("stop", "")
	e.events.until(t, "the first's end", func(ev *abi.Event) bool { return ev.Type == abi.SubjectIntentEnded && ev.CorrelationID == first })
	if n := len(e.events.all(isAction(t, "", abi.ActionQuery))); n != 1 {
		t.Fatalf("%d questions, want one:\n%s", n, e.events.dump())
	}
}

// After a restart the interrupted task waits; the model is asked nothing
// until the user speaks, then sees the task marked interrupted and runs
// its command again in the same task on "again".
func TestLLMInterrupted(t *testing.T) {
	model := &llmscript.Server{Think: func(n int, _, prompt string) map[string]any {
		s := llmscript.Read(prompt)
		for _, m := range s.Messages {
			if tk := s.Task("sleep 600"); m.Text == "again" && tk != nil && tk.Interrupted {
				return llmscript.Calls("process_spawn", map[string]any{"command": "sleep 600", "runLoopId": tk.ID})
			}
		}
		return llmscript.Noop()
	}}
	e := newEnv(t)
	publish := func(ev abi.Event, data any) {
		raw, _ := msgpack.Marshal(data)
		ev.Data, ev.Source = raw, "agent/default"
		if _, err := e.bus.Publish(context.Background(), &ev); err != nil {
			t.Fatal(err)
		}
	}
	publish(abi.Event{ID: "start-1", Type: abi.SubjectIntentStarted, CorrelationID: "loop-1"}, abi.IntentStarted{RunLoopID: "loop-1", Agent: "default", Goal: "run sleep 600", MaxIterations: 25})
	publish(abi.Event{ID: "act-1", Type: abi.SubjectAgentAction, CorrelationID: "loop-1"}, abi.ActionEvent{Type: abi.ActionToolCall, ActionData: abi.ActionData{Tool: abi.MethodProcessSpawn, Args: `{"command":"sleep 600"}`}})
	publish(abi.Event{Type: abi.SubjectToolResult, CorrelationID: "loop-1", CausationID: "act-1"}, abi.ToolResultEvent{ActionID: "act-1", Tool: abi.MethodProcessSpawn, Status: abi.StatusDone, ProcessID: "p99"})

	e.model(model, 0)
	e.start(Config{Policy: e.policy("llm")})
	e.events.until(t, "the user told", sayIn("loop-1", "`sleep 600` was running when Kairo stopped; it was ended. Say `again` to run it again."))
	if n := len(e.events.all(typed(abi.SubjectLLMRequest))); n != 0 {
		t.Fatalf("the model was asked %d times before the user spoke", n)
	}
	again := routedFor(t, e, e.say("again", ""))
	call := e.events.until(t, "the call again", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectAgentAction && ev.Seq > again.Seq && decodeAs[abi.ActionEvent](t, ev).Tool == abi.MethodProcessSpawn
	})
	if call.CorrelationID != "loop-1" || call.CausationID != again.ID {
		t.Fatalf("the call again is in %s caused by %s; want loop-1 caused by %s", call.CorrelationID, call.CausationID, again.ID)
	}
	if !strings.Contains(model.Prompt(0), "interrupted: Kairo stopped while it ran") {
		t.Fatalf("the prompt does not show the task interrupted:\n%s", model.Prompt(0))
	}
}
