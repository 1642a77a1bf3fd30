package main

import (
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

func message(t *testing.T, text, corr string) abi.Event {
	t.Helper()
	d, err := msgpack.Marshal(abi.UserMessage{Text: text, MessageID: "m"})
	if err != nil {
		t.Fatal(err)
	}
	return abi.Event{Type: "kairo.agent.default.message", Data: d, CorrelationID: corr}
}

func actionData(t *testing.T, a abi.Action) abi.ActionData {
	t.Helper()
	var d abi.ActionData
	if err := msgpack.Unmarshal(a.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// A task busyTask `sleep 30` for 5 s, with a progress report.
var busyTask = []abi.RunLoopView{{ID: "run-1", Goal: "run sleep 30", Actions: []abi.ActionView{
	{ID: "a1", Type: abi.ActionToolCall, Tool: "process.spawn", Args: `{"command":"sleep 30"}`, Status: abi.StatusInProgress,
		ProcessID: "p7", Progress: "percent=40", StartedAt: time.Now().Add(-5 * time.Second)},
}}}

func TestCommands(t *testing.T) {
	for _, c := range []struct {
		text  string
		loops []abi.RunLoopView
		want  []string // per action: type, then what its data must contain
	}{
		{"run make test", nil, []string{"tool_call", `{"command":"make test"}`}},
		{"Run  ls -la /tmp  ", nil, []string{"tool_call", `{"command":"ls -la /tmp"}`}},
		{"run", nil, []string{"query", "Run what?"}},
		{"RUN!", nil, []string{"query", "Run what?"}},
		{"help", nil, []string{"say", "run <command line>"}},
		{"how far along is it?", busyTask, []string{"say", "`sleep 30` is running (p7), for 5s; last progress: percent=40"}},
		{"progress", nil, []string{"say", "Nothing is running."}},
		{"stop it", busyTask, []string{"cancel", "run-1"}},
		{"Cancel.", busyTask, []string{"cancel", "run-1"}},
		{"stop", nil, []string{"say", "Nothing is running to stop."}},
		{"use 10 instead", busyTask, []string{"cancel", "restarted with 10", "tool_call", `{"command":"sleep 10"}`}},
		{"restart with 5", busyTask, []string{"cancel", "run-1", "tool_call", `{"command":"sleep 5"}`}},
		{"what is running?", busyTask, []string{"say", "Running: `sleep 30` in task \"run sleep 30\"."}},
		{"run progress-demo steps=5 -v", nil, []string{"tool_call", `{"args":["steps=5","-v"],"skill":"progress-demo"}`}},
		{"make me a sandwich", nil, []string{"say", `I don't understand "make me a sandwich"`}},
	} {
		t.Run(c.text, func(t *testing.T) {
			reply := decide(&abi.Batch{Time: time.Now(), Events: []abi.Event{message(t, c.text, "")}, Agent: &abi.AgentInput{RunLoops: c.loops, Skills: []string{"progress-demo"}}})
			if len(reply.Actions)*2 != len(c.want) {
				t.Fatalf("actions %+v; want %q", reply.Actions, c.want)
			}
			for i, a := range reply.Actions {
				d := actionData(t, a)
				all := d.Text + d.Args + d.RunLoopID + d.Reason
				if a.Type != c.want[2*i] || !strings.Contains(all, c.want[2*i+1]) {
					t.Fatalf("action %d = %s %+v; want %s with %q", i, a.Type, d, c.want[2*i], c.want[2*i+1])
				}
			}
		})
	}
}

// The message after "run what?" is the command.
func TestAnswerToQuestion(t *testing.T) {
	loops := []abi.RunLoopView{{ID: "run-2", Goal: "run", Actions: []abi.ActionView{{ID: "q", Type: abi.ActionQuery, Text: "Run what? For example: run make test", Status: abi.StatusDone}}}}
	reply := decide(&abi.Batch{Events: []abi.Event{message(t, "ls -l", "run-2")}, Agent: &abi.AgentInput{RunLoops: loops}})
	if len(reply.Actions) != 1 || reply.Actions[0].Type != abi.ActionToolCall || reply.Actions[0].CorrelationID != "run-2" ||
		actionData(t, reply.Actions[0]).Args != `{"command":"ls -l"}` {
		t.Fatalf("actions = %+v", reply.Actions)
	}
}

// A process that ends in a task is reported, closing the task.
func TestExitReported(t *testing.T) {
	d, _ := msgpack.Marshal(map[string]any{"processId": "p7", "exitCode": 0, "durationMs": 5200})
	reply := decide(&abi.Batch{Events: []abi.Event{{Type: "kairo.process.exited", CorrelationID: "run-1", Data: d}}, Agent: &abi.AgentInput{RunLoops: busyTask}})
	if len(reply.Actions) != 1 {
		t.Fatalf("actions = %+v", reply.Actions)
	}
	ad := actionData(t, reply.Actions[0])
	if reply.Actions[0].CorrelationID != "run-1" || !ad.Done || ad.Text != "`sleep 30` finished in 5.2s (exit code 0)." {
		t.Fatalf("say = %+v", ad)
	}
}
