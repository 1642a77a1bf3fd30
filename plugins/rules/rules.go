package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// The command language, one command a message, case and surrounding
// punctuation ignored:
//
//	run <skill> <args>              run a binary skill by name, ARGS as kairo run takes them
//	run <command line>              run it (with /bin/sh -c) as a new task
//	progress | how far along is it?  what the task is doing
//	stop | cancel | stop it          stop the task and its processes
//	restart with <args>              stop it and run its command again with <args>
//	use <args> instead               the same
//	what is running | ps             every task in progress
//	help                             this list
//
// "run" alone asks "run what?". A message sent into a task (its run loop)
// applies to that task; otherwise to the newest task in progress.

const helpText = `I understand:
  run <command line>        start it as a task, e.g. "run make test"
  run <skill> <args>        run a binary skill, e.g. "run progress-demo steps=5"
  progress                  how far along the task is ("how far along is it?")
  stop | cancel             stop the task and its processes
  restart with <args>       run the task's command again with other arguments ("use <args> instead")
  what is running           the tasks in progress
  help                      this list`

var (
	reRun      = regexp.MustCompile(`(?i)^(?:please\s+)?(?:run|start|execute)(?:\s+(.+))?$`)
	reRestart  = regexp.MustCompile(`(?i)^(?:restart|rerun|re-run)(?:\s+it)?\s+with\s+(.+)$|^use\s+(.+?)\s+instead$|^(?:try|run it)\s+with\s+(.+?)(?:\s+instead)?$`)
	reProgress = regexp.MustCompile(`(?i)^(?:progress|status|how far(?: along)?(?: is it| are you)?|how(?:'s| is) it going|are you done|is it done)$`)
	reStop     = regexp.MustCompile(`(?i)^(?:stop|cancel|abort|kill|halt)(?:\s+(?:it|that|this|the task|everything|now))*$|^never ?mind$`)
	reRunning  = regexp.MustCompile(`(?i)^(?:what(?:'s| is) running|what are you (?:doing|running)|ps|jobs|list)$`)
	reHelp     = regexp.MustCompile(`(?i)^(?:help|\?|what can you do)$`)
)

// normalize trims space and punctuation around a message; the patterns
// ignore case.
func normalize(s string) string {
	return strings.Trim(strings.TrimSpace(s), " .!?\t")
}

// decide answers a tick.
func decide(b *abi.Batch) abi.Reply {
	var reply abi.Reply
	var loops []abi.RunLoopView
	var skills []string
	if b.Agent != nil {
		loops, skills = b.Agent.RunLoops, b.Agent.Skills
	}
	for i := range b.Events {
		ev := &b.Events[i]
		switch {
		case strings.HasPrefix(ev.Type, "kairo.agent.") && strings.HasSuffix(ev.Type, ".message"):
			var m abi.UserMessage
			if msgpack.Unmarshal(ev.Data, &m) != nil {
				continue
			}
			for _, a := range onMessage(m, ev.CorrelationID, loops, skills, b.Time) {
				a.CausationID = ev.ID // each answer belongs to its own message
				reply.Actions = append(reply.Actions, a)
			}
		case ev.Type == "kairo.process.exited":
			if a, ok := onExit(ev, loops); ok {
				reply.Actions = append(reply.Actions, a)
			}
		case ev.Type == abi.SubjectToolResult:
			var r abi.ToolResultEvent
			if msgpack.Unmarshal(ev.Data, &r) == nil && r.Status == abi.StatusFailed {
				reply.Actions = append(reply.Actions, say(ev.CorrelationID, "I could not run it: "+r.Error, true))
			}
		}
	}
	if len(reply.Actions) > 0 {
		reply.Thought = fmt.Sprintf("rules: %d action(s)", len(reply.Actions))
	}
	return reply
}

// onMessage answers one message; now is the tick's time (a guest's own
// clock is not the wall clock, and a replay must see the same times).
func onMessage(m abi.UserMessage, corr string, loops []abi.RunLoopView, skills []string, now time.Time) []abi.Action {
	text := normalize(m.Text)
	raw := strings.TrimSpace(m.Text)
	target := targetLoop(corr, loops)
	switch {
	case reHelp.MatchString(text):
		return []abi.Action{say(corr, helpText, corr == "")}
	case reRestart.MatchString(text):
		args := firstGroup(reRestart.FindStringSubmatch(text))
		if target == nil {
			return []abi.Action{say(corr, "Nothing is running to restart. Say `run <command>` to start something.", corr == "")}
		}
		cmd := lastCommand(target)
		if cmd == "" {
			return []abi.Action{say(corr, "That task ran no command I can run again.", false)}
		}
		prog := strings.Fields(cmd)[0]
		return []abi.Action{
			{Type: abi.ActionCancel, CorrelationID: target.ID, Data: data(abi.ActionData{RunLoopID: target.ID, Reason: "restarted with " + args})},
			run("", prog+" "+args, skills),
		}
	case reRun.MatchString(text):
		// The command keeps its punctuation: only the space around it goes.
		sub := reRun.FindStringSubmatch(strings.TrimSpace(m.Text))
		if sub == nil {
			sub = reRun.FindStringSubmatch(text)
		}
		cmd := strings.TrimSpace(sub[1])
		if cmd == "" {
			return []abi.Action{{Type: abi.ActionQuery, CorrelationID: corr, Data: data(abi.ActionData{Text: "Run what? For example: run make test"})}}
		}
		return []abi.Action{run(corr, cmd, skills)}
	case reProgress.MatchString(text):
		if target == nil && len(loops) > 0 {
			// Nothing runs: report on the newest task, interrupted say.
			target = &loops[len(loops)-1]
		}
		if target == nil {
			return []abi.Action{say(corr, "Nothing is running.", corr == "")}
		}
		return []abi.Action{say(target.ID, progressOf(target, now), false)}
	case reStop.MatchString(text):
		if target == nil {
			return []abi.Action{say(corr, "Nothing is running to stop.", corr == "")}
		}
		return []abi.Action{{Type: abi.ActionCancel, CorrelationID: target.ID, Data: data(abi.ActionData{RunLoopID: target.ID, Reason: "the user asked to stop"})}}
	case reRunning.MatchString(text):
		return []abi.Action{say(corr, running(loops), corr == "")}
	case target != nil && target.ID == corr && asked(target):
		// The answer to "run what?".
		return []abi.Action{run(corr, raw, skills)}
	}
	return []abi.Action{say(corr, fmt.Sprintf("I don't understand %q. Say `help` for what I can do.", raw), corr == "")}
}

// asked reports whether the loop's last action asked what to run.
func asked(l *abi.RunLoopView) bool {
	n := len(l.Actions)
	return n > 0 && l.Actions[n-1].Type == abi.ActionQuery && strings.HasPrefix(l.Actions[n-1].Text, "Run what?")
}

// targetLoop is the run loop a message is about: the one it was sent into,
// else the newest with something in progress.
func targetLoop(corr string, loops []abi.RunLoopView) *abi.RunLoopView {
	for i := range loops {
		if loops[i].ID == corr {
			return &loops[i]
		}
	}
	for i := len(loops) - 1; i >= 0; i-- {
		for _, a := range loops[i].Actions {
			if a.Status == abi.StatusInProgress {
				return &loops[i]
			}
		}
	}
	return nil
}

func firstGroup(sub []string) string {
	for _, s := range sub[1:] {
		if s != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// lastCommand is the command line of the loop's last spawn.
func lastCommand(l *abi.RunLoopView) string {
	for i := len(l.Actions) - 1; i >= 0; i-- {
		a := l.Actions[i]
		if a.Type != abi.ActionToolCall || a.Tool != "process.spawn" {
			continue
		}
		var args struct {
			Command string   `json:"command"`
			Argv    []string `json:"argv"`
			Skill   string   `json:"skill"`
			Args    []string `json:"args"`
		}
		if json.Unmarshal([]byte(a.Args), &args) == nil {
			switch {
			case args.Command != "":
				return args.Command
			case args.Skill != "":
				return strings.Join(append([]string{args.Skill}, args.Args...), " ")
			}
			return strings.Join(args.Argv, " ")
		}
	}
	return ""
}

func progressOf(l *abi.RunLoopView, now time.Time) string {
	var b strings.Builder
	for _, a := range l.Actions {
		if a.Type != abi.ActionToolCall {
			continue
		}
		cmd := commandOf(a)
		switch a.Status {
		case abi.StatusInProgress:
			fmt.Fprintf(&b, "%s is running", cmd)
			if a.ProcessID != "" {
				fmt.Fprintf(&b, " (%s)", a.ProcessID)
			}
			if !a.StartedAt.IsZero() && !now.IsZero() {
				fmt.Fprintf(&b, ", for %s", now.Sub(a.StartedAt).Round(time.Second))
			}
			if a.Progress != "" {
				fmt.Fprintf(&b, "; last progress: %s", a.Progress)
			} else {
				b.WriteString("; it reported no progress yet")
			}
			b.WriteString(". ")
		default:
			fmt.Fprintf(&b, "%s: %s", cmd, strings.ReplaceAll(a.Status, "_", " "))
			if a.Result != "" && a.Status != abi.StatusDone {
				fmt.Fprintf(&b, " (%s)", a.Result)
			}
			b.WriteString(". ")
		}
	}
	if b.Len() == 0 {
		return "Nothing has started yet for " + fmt.Sprintf("%q", l.Goal) + "."
	}
	return strings.TrimSpace(b.String())
}

func commandOf(a abi.ActionView) string {
	l := abi.RunLoopView{Actions: []abi.ActionView{a}}
	if c := lastCommand(&l); c != "" {
		return "`" + c + "`"
	}
	return a.Tool
}

func running(loops []abi.RunLoopView) string {
	var lines []string
	for i := range loops {
		for _, a := range loops[i].Actions {
			if a.Status == abi.StatusInProgress {
				lines = append(lines, fmt.Sprintf("%s in task %q", commandOf(a), loops[i].Goal))
			}
		}
	}
	if len(lines) == 0 {
		return "Nothing is running."
	}
	return "Running: " + strings.Join(lines, "; ") + "."
}

// onExit reports a task's process that ended.
func onExit(ev *abi.Event, loops []abi.RunLoopView) (abi.Action, bool) {
	var d struct {
		ProcessID  string `msgpack:"processId"`
		ExitCode   *int   `msgpack:"exitCode"`
		Signal     string `msgpack:"signal"`
		DurationMs int64  `msgpack:"durationMs"`
	}
	if msgpack.Unmarshal(ev.Data, &d) != nil || ev.CorrelationID == "" {
		return abi.Action{}, false
	}
	var l *abi.RunLoopView
	for i := range loops {
		if loops[i].ID == ev.CorrelationID {
			l = &loops[i]
		}
	}
	if l == nil {
		return abi.Action{}, false // ended already, e.g. canceled
	}
	cmd := "the process"
	busy := false
	for _, a := range l.Actions {
		if a.ProcessID == d.ProcessID {
			cmd = commandOf(a)
		} else if a.Status == abi.StatusInProgress {
			busy = true
		}
	}
	took := (time.Duration(d.DurationMs) * time.Millisecond).Round(100 * time.Millisecond)
	var text string
	switch {
	case d.ExitCode != nil && *d.ExitCode == 0:
		text = fmt.Sprintf("%s finished in %s (exit code 0).", cmd, took)
	case d.ExitCode != nil:
		text = fmt.Sprintf("%s failed after %s with exit code %d.", cmd, took, *d.ExitCode)
	default:
		text = fmt.Sprintf("%s was ended by %s after %s.", cmd, d.Signal, took)
	}
	return say(l.ID, text, !busy), true
}

func say(corr, text string, done bool) abi.Action {
	return abi.Action{Type: abi.ActionSay, CorrelationID: corr, Data: data(abi.ActionData{Text: text, Done: done})}
}

// run runs a command line: a skill by its name ("run progress-demo
// steps=5"), else a shell line.
func run(corr, cmd string, skills []string) abi.Action {
	if f := strings.Fields(cmd); len(f) > 0 && slices.Contains(skills, f[0]) {
		args, _ := json.Marshal(map[string]any{"skill": f[0], "args": append([]string{}, f[1:]...)})
		return abi.Action{Type: abi.ActionToolCall, CorrelationID: corr, Data: data(abi.ActionData{Tool: "process.spawn", Args: string(args)})}
	}
	return spawn(corr, cmd)
}

func spawn(corr, cmd string) abi.Action {
	args, _ := json.Marshal(map[string]string{"command": cmd})
	return abi.Action{Type: abi.ActionToolCall, CorrelationID: corr, Data: data(abi.ActionData{Tool: "process.spawn", Args: string(args)})}
}

func data(d abi.ActionData) msgpack.RawMessage {
	b, _ := msgpack.Marshal(d)
	return b
}
