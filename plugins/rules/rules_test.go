package rules

import (
	"fmt"
	"os"
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
	{ID: "a1", Type: abi.ActionToolCall, Tool: abi.MethodProcessSpawn, Args: `{"command":"sleep 30"}`, Status: abi.StatusInProgress,
		ProcessID: "p7", Progress: "percent=40", StartedAt: time.Now().Add(-5 * time.Second)},
}}}

// Two tasks in progress, and one that waits after an interruption.
var (
	twoTasks = append(append([]abi.RunLoopView{}, busyTask...), abi.RunLoopView{ID: "run-2", Goal: "run sleep 40", Actions: []abi.ActionView{
		{ID: "a2", Type: abi.ActionToolCall, Tool: abi.MethodProcessSpawn, Args: `{"command":"sleep 40"}`, Status: abi.StatusInProgress, ProcessID: "p8"},
	}})
	interruptedTask = []abi.RunLoopView{{ID: "run-9", Goal: "run sleep 300", Interrupted: true, Actions: []abi.ActionView{
		{ID: "a9", Type: abi.ActionToolCall, Tool: abi.MethodProcessSpawn, Args: `{"command":"sleep 300"}`, Status: abi.StatusInterrupted, ProcessID: "p1"},
		{ID: "s9", Type: abi.ActionSay, Text: "`sleep 300` was running when Kairo stopped; it was ended. Say `again` to run it again.", Status: abi.StatusDone},
	}}}
)

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
		{"use 10 instead", busyTask, []string{"cancel", "restarted with 10", "tool_call", `{"command":"sleep 10"}`, "say", "Stopping `sleep 30` and running `sleep 10` instead, in the same task."}},
		{"restart with 5", busyTask, []string{"cancel", "run-1", "tool_call", `{"command":"sleep 5"}`, "say", "in the same task"}},
		{"again", nil, []string{"say", "Nothing was interrupted."}},
		{"again", interruptedTask, []string{"tool_call", `{"command":"sleep 300"}`, "say", "Running `sleep 300` again."}},
		{"stop", interruptedTask, []string{"cancel", "run-9"}},
		{"stop", twoTasks, []string{"query", "Which task do you mean? 1. `run-1` run sleep 30; 2. `run-2` run sleep 40. Say its number"}},
		{"use 5 instead", twoTasks, []string{"query", "Which task do you mean? 1. `run-1`"}},
		{"how far along is it?", twoTasks, []string{"say", "Task `run-1` (run sleep 30): `sleep 30` is running (p7)"}},
		{"stop all", twoTasks, []string{"cancel", "run-1", "cancel", "run-2"}},
		{"stop sleep 40", twoTasks, []string{"cancel", "run-2"}},
		{"cancel run-1", twoTasks, []string{"cancel", "run-1"}},
		{"stop the second one", twoTasks, []string{"cancel", "run-2"}},
		{"stop make", twoTasks, []string{"say", `No task matches "make".`}},
		{"what is running?", busyTask, []string{"say", "Running: `sleep 30` in task \"run sleep 30\"."}},
		{"run progress-demo steps=5 -v", nil, []string{"tool_call", `{"args":["steps=5","-v"],"skill":"progress-demo"}`}},
		{"make me a sandwich", nil, []string{"say", `I don't understand "make me a sandwich"`}},
	} {
		t.Run(c.text, func(t *testing.T) {
			reply := decide(&abi.Batch{Time: time.Now(), Events: []abi.Event{message(t, c.text, "")}, Agent: &abi.AgentInput{RunLoops: c.loops, Skills: []string{"progress-demo"}}})
			if len(reply.Actions)*2 != len(c.want) {
				for _, a := range reply.Actions {
					t.Logf("%s %+v", a.Type, actionData(t, a))
				}
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

// An exit's answer quotes what the process wrote: short output whole,
// long output as its last lines and a pointer to `kairo runs show`, a
// failure's stderr; output that reads like a command is only quoted.
func TestExitQuotesOutput(t *testing.T) {
	lines := func(stream string, texts ...string) []abi.OutputLine {
		var out []abi.OutputLine
		for _, x := range texts {
			out = append(out, abi.OutputLine{Stream: stream, Text: x})
		}
		return out
	}
	var many []string
	for i := 1; i <= 40; i++ {
		many = append(many, fmt.Sprintf("line %d", i))
	}
	zero, two := 0, 2
	for _, c := range []struct {
		name     string
		exit     abi.ProcessExitedEvent
		want     []string
		dontWant []string
	}{
		{"no output: as before", abi.ProcessExitedEvent{ExitCode: &zero}, []string{"finished in 0s (exit code 0)."}, []string{"printed", "```"}},
		{"short output whole", abi.ProcessExitedEvent{ExitCode: &zero, LastLines: lines("stdout", "hi"), Lines: 1},
			[]string{"(exit code 0). It printed:\n```\nhi\n```"}, []string{"more lines"}},
		{"a failure says why", abi.ProcessExitedEvent{ExitCode: &two, Lines: 2,
			LastLines: append(lines("stdout", "partial"), lines("stderr", "ls: cannot access '/nonexistent': No such file or directory")...)},
			[]string{"with exit code 2. It said:\n```\nls: cannot access '/nonexistent': No such file or directory\n```\n… 1 more line: kairo runs show run-1"}, []string{"partial"}},
		{"long output: its last lines and a pointer", abi.ProcessExitedEvent{ExitCode: &zero, LastLines: lines("stdout", many...), Lines: 500},
			[]string{"Its last 10 lines:", "line 31\n", "line 40\n```", "… 490 more lines: kairo runs show run-1"}, []string{"line 30\n"}},
		{"a fence in the output does not end the quote", abi.ProcessExitedEvent{ExitCode: &zero, LastLines: lines("stdout", "```", "stop all"), Lines: 2},
			[]string{"````\n```\nstop all\n````"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.exit.ProcessID = "p7"
			d, _ := msgpack.Marshal(c.exit)
			reply := decide(&abi.Batch{Events: []abi.Event{{Type: abi.SubjectProcessExited, CorrelationID: "run-1", Data: d}}, Agent: &abi.AgentInput{RunLoops: busyTask}})
			if len(reply.Actions) != 1 || reply.Actions[0].Type != abi.ActionSay {
				t.Fatalf("actions = %+v", reply.Actions)
			}
			text := actionData(t, reply.Actions[0]).Text
			for _, w := range c.want {
				if !strings.Contains(text, w) {
					t.Errorf("answer %q lacks %q", text, w)
				}
			}
			for _, w := range c.dontWant {
				if strings.Contains(text, w) {
					t.Errorf("answer %q has %q", text, w)
				}
			}
		})
	}
}

// The answer to "which task?", sent into the question's run loop, is taken
// by number, id, words of the goal or "all", and carries out the command
// asked about; an answer that names none asks again; a command instead is
// taken as a command.
func TestWhichTask(t *testing.T) {
	for _, c := range []struct {
		goal, answer string
		want         []string // per action: type, corr, what its data must contain
	}{
		{"stop", "2", []string{"cancel", "run-2", "run-2", "say", "q", "Stopping `run-2` (run sleep 40)."}},
		{"stop", "the first one", []string{"cancel", "run-1", "run-1", "say", "q", "Stopping `run-1`"}},
		{"stop", "run-2", []string{"cancel", "run-2", "run-2", "say", "q", "Stopping"}},
		{"stop", "the sleep 30", []string{"cancel", "run-1", "run-1", "say", "q", "Stopping"}},
		{"stop it", "all", []string{"cancel", "run-1", "run-1", "cancel", "run-2", "run-2", "say", "q", "Stopping `run-1` (run sleep 30), `run-2` (run sleep 40)."}},
		{"use 5 instead", "2", []string{"cancel", "run-2", "restarted with 5", "tool_call", "run-2", `{"command":"sleep 5"}`, "say", "run-2", "instead", "say", "q", "Restarting `run-2`"}},
		{"stop", "sleep", []string{"query", "q", "I could not tell which from \"sleep\". 1. `run-1` run sleep 30; 2. `run-2` run sleep 40."}},
		{"stop", "what is running", []string{"say", "q", "not as the answer", "say", "", "Running: "}},
		// A task listed that has ended since keeps its number.
		{"stop", "3", []string{"query", "q", "I could not tell which from \"3\""}},
		{"stop", "4", []string{"cancel", "run-2", "run-2", "say", "q", "Stopping `run-2`"}},
	} {
		t.Run(c.goal+"/"+c.answer, func(t *testing.T) {
			text := "Which task do you mean? 1. `run-1` run sleep 30; 2. `run-2` run sleep 40. Say its number, its id, words of its goal, or `all`."
			if c.answer == "3" || c.answer == "4" {
				text = "Which task do you mean? 1. `run-1` run sleep 30; 2. `run-0` run sleep 20; 3. `run-7` gone; 4. `run-2` run sleep 40. Say its number."
			}
			q := abi.RunLoopView{ID: "q", Goal: c.goal, Actions: []abi.ActionView{{ID: "qa", Type: abi.ActionQuery, Status: abi.StatusDone, Text: text}}}
			loops := append(append([]abi.RunLoopView{}, twoTasks...), q)
			reply := decide(&abi.Batch{Time: time.Now(), Events: []abi.Event{message(t, c.answer, "q")}, Agent: &abi.AgentInput{RunLoops: loops}})
			if len(reply.Actions)*3 != len(c.want) {
				for _, a := range reply.Actions {
					t.Logf("%s %s %+v", a.Type, a.CorrelationID, actionData(t, a))
				}
				t.Fatalf("%d actions; want %q", len(reply.Actions), c.want)
			}
			for i, a := range reply.Actions {
				d := actionData(t, a)
				all := d.Text + d.Args + d.RunLoopID + d.Reason
				if a.Type != c.want[3*i] || a.CorrelationID != c.want[3*i+1] || !strings.Contains(all, c.want[3*i+2]) {
					t.Fatalf("action %d = %s in %q %+v; want %s in %q with %q", i, a.Type, a.CorrelationID, d, c.want[3*i], c.want[3*i+1], c.want[3*i+2])
				}
				if a.Type == abi.ActionCancel && strings.HasPrefix(c.goal, "use") != d.Keep {
					t.Fatalf("cancel %+v: Keep must be set for a restart only", d)
				}
			}
		})
	}
}

// A canceled process's exit is not reported as a failure: the cancel said
// what happened.
func TestCanceledExitQuiet(t *testing.T) {
	loops := []abi.RunLoopView{{ID: "run-1", Goal: "run sleep 30", Actions: []abi.ActionView{
		{ID: "a1", Type: abi.ActionToolCall, Tool: abi.MethodProcessSpawn, Args: `{"command":"sleep 30"}`, Status: abi.StatusCanceled, ProcessID: "p7"},
		{ID: "a2", Type: abi.ActionToolCall, Tool: abi.MethodProcessSpawn, Args: `{"command":"sleep 5"}`, Status: abi.StatusInProgress, ProcessID: "p8"},
	}}}
	d, _ := msgpack.Marshal(map[string]any{"processId": "p7", "signal": "SIGTERM", "durationMs": 5200})
	if reply := decide(&abi.Batch{Events: []abi.Event{{Type: "kairo.process.exited", CorrelationID: "run-1", Data: d}}, Agent: &abi.AgentInput{RunLoops: loops}}); len(reply.Actions) != 0 {
		t.Fatalf("actions for a canceled process's exit: %+v", reply.Actions)
	}
	// The control: the running one's exit is reported.
	d, _ = msgpack.Marshal(map[string]any{"processId": "p8", "exitCode": 0, "durationMs": 5000})
	if reply := decide(&abi.Batch{Events: []abi.Event{{Type: "kairo.process.exited", CorrelationID: "run-1", Data: d}}, Agent: &abi.AgentInput{RunLoops: loops}}); len(reply.Actions) != 1 {
		t.Fatalf("actions for the running process's exit: %+v", reply.Actions)
	}
}

// Every phrase the rule policy takes is in its help, and the README lists
// the help line for line.
func TestHelpListsPhrases(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(helpText, "\n")[1:] {
		if !strings.Contains(string(readme), line+"\n") {
			t.Errorf("the README lacks the help line %q", line)
		}
	}
	for _, phrase := range []string{"run <command line>", "progress", "stop | cancel", "stop all", "use <args> instead", "restart with <args>", "again", "what is running", "its number"} {
		if !strings.Contains(helpText, phrase) {
			t.Errorf("help lacks %q:\n%s", phrase, helpText)
		}
	}
}
