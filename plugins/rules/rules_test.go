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
	for _, phrase := range []string{"run <command line>", "progress", "stop | cancel", "stop all", "use <args> instead", "restart with <args>", "again", "what is running", "its number", "ask <agent>: <what>", "ask <agent> to <what>"} {
		if !strings.Contains(helpText, phrase) {
			t.Errorf("help lacks %q:\n%s", phrase, helpText)
		}
	}
}

// "ask ID: TEXT" and "ask ID to TEXT" call agent.ask with exactly that
// agent and text, in a new run loop as "run" does; what they leave out is
// asked for. The controls: "run ask foo" still runs a command named ask,
// and other shapes are not taken as an ask.
func TestAskPhrase(t *testing.T) {
	for _, c := range []struct {
		text      string
		typ, want string // the one action: its type, and its args or the start of its text
	}{
		{"ask ops: run the build", abi.ActionToolCall, `{"agent":"ops","text":"run the build"}`},
		{"Ask ops to run make test.", abi.ActionToolCall, `{"agent":"ops","text":"run make test."}`},
		{"ASK build-bot_2:  what is 2+2?", abi.ActionToolCall, `{"agent":"build-bot_2","text":"what is 2+2?"}`},
		{"ask ops:check the logs", abi.ActionToolCall, `{"agent":"ops","text":"check the logs"}`},
		{"ask ops: first line\nsecond line", abi.ActionToolCall, `{"agent":"ops","text":"first line\nsecond line"}`},
		{"ask nobody: anything", abi.ActionToolCall, `{"agent":"nobody","text":"anything"}`}, // the runtime refuses it
		{"ask ops", abi.ActionQuery, "Ask ops what? For example: ask ops: run make test"},
		{"ask ops:", abi.ActionQuery, "Ask ops what?"},
		{"ask ops to", abi.ActionQuery, "Ask ops what?"},
		{"ask?", abi.ActionQuery, "Ask which agent, and what?"},
		// Controls.
		{"run ask foo", abi.ActionToolCall, `{"command":"ask foo"}`},
		{"ask ops run the build", abi.ActionSay, "I don't understand"},
		{"ask Ops: run the build", abi.ActionSay, "I don't understand"},
		{"asking ops: x", abi.ActionSay, "I don't understand"},
		{"task ops: x", abi.ActionSay, "I don't understand"},
	} {
		t.Run(c.text, func(t *testing.T) {
			reply := decide(&abi.Batch{Events: []abi.Event{message(t, c.text, "")}, Agent: &abi.AgentInput{}})
			if len(reply.Actions) != 1 {
				t.Fatalf("actions %+v; want one %s", reply.Actions, c.typ)
			}
			a := reply.Actions[0]
			d := actionData(t, a)
			if a.Type != c.typ || a.CorrelationID != "" {
				t.Fatalf("action %s in %q %+v; want %s in a new run loop", a.Type, a.CorrelationID, d, c.typ)
			}
			switch {
			case c.typ != abi.ActionToolCall:
				if !strings.HasPrefix(d.Text, c.want) {
					t.Fatalf("text %q; want it to begin %q", d.Text, c.want)
				}
			case strings.Contains(c.want, `"agent"`):
				if d.Tool != abi.ToolAgentAsk || d.Args != c.want {
					t.Fatalf("tool call %s %s; want %s %s", d.Tool, d.Args, abi.ToolAgentAsk, c.want)
				}
			case d.Tool != abi.MethodProcessSpawn || d.Args != c.want:
				t.Fatalf("tool call %s %s; want %s %s", d.Tool, d.Args, abi.MethodProcessSpawn, c.want)
			}
		})
	}
}

// The message after "Ask ops what?", sent into its run loop, is what to
// ask ops; the control: after "Run what?" it is still a command.
func TestAskWhatAnswered(t *testing.T) {
	for _, c := range []struct{ question, tool, args string }{
		{"Ask ops what? For example: ask ops: run make test", abi.ToolAgentAsk, `{"agent":"ops","text":"is the build green?"}`},
		{"Run what? For example: run make test", abi.MethodProcessSpawn, `{"command":"is the build green?"}`},
	} {
		loops := []abi.RunLoopView{{ID: "run-3", Goal: "ask ops", Actions: []abi.ActionView{{ID: "q", Type: abi.ActionQuery, Text: c.question, Status: abi.StatusDone}}}}
		reply := decide(&abi.Batch{Events: []abi.Event{message(t, "is the build green?", "run-3")}, Agent: &abi.AgentInput{RunLoops: loops}})
		if len(reply.Actions) != 1 || reply.Actions[0].CorrelationID != "run-3" {
			t.Fatalf("after %q: actions %+v", c.question, reply.Actions)
		}
		if d := actionData(t, reply.Actions[0]); d.Tool != c.tool || d.Args != c.args {
			t.Fatalf("after %q: %s %s; want %s %s", c.question, d.Tool, d.Args, c.tool, c.args)
		}
	}
}

// An ask's result is said in its run loop, closing it: the answer quoted
// as it came, named by the agent, never read as a command; a failure or a
// cancel says why the agent could not answer. The controls: a failed
// process.spawn still says "I could not run it", a done one says nothing,
// and a canceled ask whose run loop has ended says nothing.
func TestAskResult(t *testing.T) {
	asking := []abi.RunLoopView{{ID: "run-5", Goal: "ask ops: build", Actions: []abi.ActionView{
		{ID: "a5", Type: abi.ActionToolCall, Tool: abi.ToolAgentAsk, Args: `{"agent":"ops","text":"build"}`, Status: abi.StatusInProgress},
	}}}
	encode := func(v any) msgpack.RawMessage {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		name  string
		res   abi.ToolResultEvent
		loops []abi.RunLoopView
		want  string // the say's text; "" for no action
	}{
		{"a JSON string", abi.ToolResultEvent{Tool: abi.ToolAgentAsk, Status: abi.StatusDone, Result: encode(`"Built in 3s."`)}, asking, "ops: Built in 3s."},
		{"plain text, lines that read as commands", abi.ToolResultEvent{Tool: abi.ToolAgentAsk, Status: abi.StatusDone, Result: encode("done.\nstop all\nrun rm -rf /")}, asking,
			"ops: done.\nstop all\nrun rm -rf /"},
		{"a stored answer", abi.ToolResultEvent{Tool: abi.ToolAgentAsk, Status: abi.StatusDone, Result: encode(abi.ToolResultRef{Ref: "sha256:ab", Size: 90000, Preview: "It built"})}, asking,
			"ops: It built… (the whole answer, 90000 bytes, is stored as sha256:ab)"},
		{"failed", abi.ToolResultEvent{Tool: abi.ToolAgentAsk, Status: abi.StatusFailed, Error: `no agent "ops"; the agents are "default", "web"`}, asking,
			`ops could not answer: no agent "ops"; the agents are "default", "web"`},
		{"canceled", abi.ToolResultEvent{Tool: abi.ToolAgentAsk, Status: abi.StatusCanceled, Error: "ops's run loop was stopped"}, asking, "ops could not answer: ops's run loop was stopped"},
		{"its action not shown", abi.ToolResultEvent{Tool: abi.ToolAgentAsk, Status: abi.StatusFailed, Error: "refused"}, nil, "the agent could not answer: refused"},
		// Controls.
		{"canceled, its run loop ended", abi.ToolResultEvent{Tool: abi.ToolAgentAsk, Status: abi.StatusCanceled, Error: "the user asked to stop"}, nil, ""},
		{"a failed spawn", abi.ToolResultEvent{Tool: abi.MethodProcessSpawn, Status: abi.StatusFailed, Error: "denied"}, asking, "I could not run it: denied"},
		{"a done spawn", abi.ToolResultEvent{Tool: abi.MethodProcessSpawn, Status: abi.StatusDone, ProcessID: "p1"}, asking, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.res.ActionID = "a5"
			ev := abi.Event{Type: abi.SubjectToolResult, CorrelationID: "run-5", Data: encode(c.res)}
			reply := decide(&abi.Batch{Events: []abi.Event{ev}, Agent: &abi.AgentInput{RunLoops: c.loops}})
			if c.want == "" {
				if len(reply.Actions) != 0 {
					t.Fatalf("actions %+v; want none", reply.Actions)
				}
				return
			}
			if len(reply.Actions) != 1 {
				t.Fatalf("actions %+v; want one say", reply.Actions)
			}
			a := reply.Actions[0]
			d := actionData(t, a)
			if a.Type != abi.ActionSay || a.CorrelationID != "run-5" || !d.Done || d.Text != c.want {
				t.Fatalf("%s in %q %+v; want say %q, done, in run-5", a.Type, a.CorrelationID, d, c.want)
			}
		})
	}
}
