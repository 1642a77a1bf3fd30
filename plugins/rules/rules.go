package rules

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// The command language: one command a message, case and surrounding
// punctuation ignored. helpText is the list the user sees (`help`); the
// README lists it too.
//
// Which task a command is about: the one it was sent into (kairo send
// --run), else the one it names (by id, number or words of its goal), else
// the only one running. When several could be meant and the message names
// none, the agent asks which — listing their short ids and goals — and
// takes the answer by id, by number ("2", "the second"), by words of the
// goal ("the sleep one") or "all"; a message that names one, or says
// "all", acts at once. A progress question never asks: it reports every
// task in progress.

const helpText = `I understand:
  run <command line>        start it as a task, e.g. "run make test"
  run <skill> <args>        run a binary skill, e.g. "run progress-demo steps=5"
  progress                  how far along the tasks are ("how far along is it?")
  stop | cancel             stop the task and its processes
  stop <task> | stop all    stop the task named by id, number or words of its goal; all of them
  use <args> instead        run the task's command again with other arguments, in the same task
                            ("restart with <args>", "try with <args>")
  again                     run what was interrupted when Kairo stopped again, in its task
  what is running           the tasks in progress
  ask <agent>: <what>       ask another agent to do it; its answer is said here
                            ("ask <agent> to <what>")
  help                      this list
With several tasks running, "stop" and "use ... instead" ask which one you mean:
answer with its id, its number, words of its goal, or "all".`

// lazyRE is pattern, compiled on its first use rather than as every kairo
// process starts, most of which never run the rule policy.
func lazyRE(pattern string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(pattern) })
}

var (
	reRun      = lazyRE(`(?i)^(?:please\s+)?(?:run|start|execute)(?:\s+(.+))?$`)
	reRestart  = lazyRE(`(?i)^(?:restart|rerun|re-run)(?:\s+it)?\s+with\s+(.+)$|^use\s+(.+?)\s+instead$|^(?:try|run it)\s+with\s+(.+?)(?:\s+instead)?$`)
	reProgress = lazyRE(`(?i)^(?:progress|status|how far(?: along)?(?: is it| are you| are they)?|how(?:'s| is| are) (?:it|they) going|are you done|is it done)$`)
	reStop     = lazyRE(`(?i)^(?:stop|cancel|abort|kill|halt)(?:\s+(.+))?$|^never ?mind$`)
	reAgain    = lazyRE(`(?i)^(?:again|(?:do|run|try) it again|(?:run|try) again|retry|rerun|re-run|resume)$`)
	reRunning  = lazyRE(`(?i)^(?:what(?:'s| is) running|what are you (?:doing|running)|ps|jobs|list)$`)
	reHelp     = lazyRE(`(?i)^(?:help|\?|what can you do)$`)
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
		case abi.IsAgentMessageSubject(ev.Type):
			var m abi.UserMessage
			if msgpack.Unmarshal(ev.Data, &m) != nil {
				continue
			}
			for _, a := range onMessage(m, ev.CorrelationID, loops, skills, b.Time) {
				a.CausationID = ev.ID // each answer belongs to its own message
				reply.Actions = append(reply.Actions, a)
			}
		case ev.Type == abi.SubjectProcessExited:
			if a, ok := onExit(ev, loops); ok {
				reply.Actions = append(reply.Actions, a)
			}
		case ev.Type == abi.SubjectToolResult:
			if a, ok := onResult(ev, loops); ok {
				reply.Actions = append(reply.Actions, a)
			}
		}
	}
	// No thought: the actions say what it decided, and a count of them
	// was all a rules policy could add.
	return reply
}

// onMessage answers one message; now is the tick's time (a guest's own
// clock is not the wall clock, and a replay must see the same times).
func onMessage(m abi.UserMessage, corr string, loops []abi.RunLoopView, skills []string, now time.Time) []abi.Action {
	text := normalize(m.Text)
	raw := strings.TrimSpace(m.Text)
	into := loopByID(corr, loops) // the task it was sent into
	if into != nil && askedWhich(into) {
		return onChoice(m, into, loops, skills, now)
	}
	switch {
	case reHelp().MatchString(text):
		return []abi.Action{say(corr, helpText, corr == "")}
	case reRestart().MatchString(text):
		args := firstGroup(reRestart().FindStringSubmatch(text))
		targets, ask := pick(into, "", running(loops))
		switch {
		case ask != nil:
			return ask
		case len(targets) == 0:
			return []abi.Action{say(corr, "Nothing is running to restart. Say `run <command>` to start something.", corr == "")}
		}
		return restart(targets[0], args, skills)
	case reAgain().MatchString(text):
		targets, ask := pick(into, "", interrupted(loops))
		switch {
		case ask != nil:
			return ask
		case len(targets) == 0:
			return []abi.Action{say(corr, "Nothing was interrupted. Say `run <command>` to start something.", corr == "")}
		}
		return again(targets[0])
	case reRun().MatchString(text):
		// The command keeps its punctuation: only the space around it goes.
		sub := reRun().FindStringSubmatch(strings.TrimSpace(m.Text))
		if sub == nil {
			sub = reRun().FindStringSubmatch(text)
		}
		cmd := strings.TrimSpace(sub[1])
		if cmd == "" {
			return []abi.Action{query(corr, "Run what? For example: run make test")}
		}
		return []abi.Action{run(corr, cmd, skills)}
	case reAsk().MatchString(text):
		return []abi.Action{onAsk(corr, m.Text)}
	case reProgress().MatchString(text):
		return progress(corr, into, loops, now)
	case reStop().MatchString(text):
		rest := firstGroup(reStop().FindStringSubmatch(text))
		cands := running(loops)
		if len(cands) == 0 {
			// Nothing runs: "stop" drops a task waiting after an
			// interruption.
			cands = interrupted(loops)
		}
		targets, ask := pick(into, rest, cands)
		switch {
		case ask != nil:
			return ask
		case len(targets) == 0 && named(rest):
			return []abi.Action{say(corr, fmt.Sprintf("No task matches %q. %s", rest, runningText(loops)), corr == "")}
		case len(targets) == 0:
			return []abi.Action{say(corr, "Nothing is running to stop.", corr == "")}
		}
		return stop(targets)
	case reRunning().MatchString(text):
		return []abi.Action{say(corr, runningText(loops), corr == "")}
	case into != nil && asked(into):
		// The answer to "run what?".
		return []abi.Action{run(corr, raw, skills)}
	case into != nil && askedWhat(into) != "":
		// The answer to "ask ops what?".
		return []abi.Action{ask(corr, askedWhat(into), raw)}
	}
	return []abi.Action{say(corr, fmt.Sprintf("I don't understand %q. Say `help` for what I can do.", raw), corr == "")}
}

// whichPrefix begins the question "which task?"; its answer comes back
// into the question's own run loop, whose goal is the command asked about.
const whichPrefix = "Which task do you mean?"

// pick is the run loops a command is about: the one it was sent into; the
// ones rest names among cands ("all" names every one); else the only one
// of cands. With several cands and none named, ask is the question.
func pick(into *abi.RunLoopView, rest string, cands []*abi.RunLoopView) (targets []*abi.RunLoopView, ask []abi.Action) {
	if into != nil && !named(rest) {
		return []*abi.RunLoopView{into}, nil
	}
	if named(rest) {
		return choose(rest, cands), nil
	}
	switch len(cands) {
	case 0:
		return nil, nil
	case 1:
		return cands, nil
	}
	return nil, []abi.Action{{Type: abi.ActionQuery, Data: data(abi.ActionData{Text: whichText(cands)})}}
}

// whichText asks which of cands: "Which task do you mean? 1. `1a2b3c4d`
// run sleep 300; 2. ...".
func whichText(cands []*abi.RunLoopView) string {
	var b strings.Builder
	b.WriteString(whichPrefix)
	for i, l := range cands {
		sep := ";"
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(&b, "%s %d. `%s` %s", sep, i+1, shortID(l.ID), l.Goal)
	}
	b.WriteString(". Say its number, its id, words of its goal, or `all`.")
	return b.String()
}

var reListed = lazyRE("(\\d+)\\. `([^`]+)`")

// listed is the run loops a "which task?" question listed, in its order;
// one no longer open keeps its place, as nil, so the numbers still mean
// what the question said.
func listed(q *abi.RunLoopView, loops []abi.RunLoopView) []*abi.RunLoopView {
	var out []*abi.RunLoopView
	for _, m := range reListed().FindAllStringSubmatch(q.Actions[len(q.Actions)-1].Text, -1) {
		var found *abi.RunLoopView
		for i := range loops {
			if strings.HasSuffix(loops[i].ID, m[2]) {
				found = &loops[i]
				break
			}
		}
		out = append(out, found)
	}
	return out
}

// askedWhich reports whether l is a "which task?" question waiting for
// its answer.
func askedWhich(l *abi.RunLoopView) bool {
	n := len(l.Actions)
	return n > 0 && l.Actions[n-1].Type == abi.ActionQuery && strings.HasPrefix(l.Actions[n-1].Text, whichPrefix)
}

// onChoice takes the answer to "which task?" sent into its run loop q: it
// carries out the command q's goal is on the loops it names and closes q.
// Another command instead is taken as that command.
func onChoice(m abi.UserMessage, q *abi.RunLoopView, loops []abi.RunLoopView, skills []string, now time.Time) []abi.Action {
	text := normalize(m.Text)
	for _, re := range []func() *regexp.Regexp{reHelp, reRun, reAsk, reRestart, reAgain, reProgress, reStop, reRunning} {
		if re().MatchString(text) {
			return append([]abi.Action{say(q.ID, "(I take that as a new request, not as the answer.)", true)},
				onMessage(m, "", loops, skills, now)...)
		}
	}
	list := listed(q, loops)
	targets := choose(text, list)
	if len(targets) == 0 {
		var open []*abi.RunLoopView
		for _, l := range list {
			if l != nil {
				open = append(open, l)
			}
		}
		if len(open) == 0 {
			return []abi.Action{say(q.ID, "None of those tasks is open any more.", true)}
		}
		return []abi.Action{{Type: abi.ActionQuery, CorrelationID: q.ID, Data: data(abi.ActionData{
			Text: fmt.Sprintf("%s I could not tell which from %q. %s", whichPrefix, strings.TrimSpace(m.Text), strings.TrimPrefix(whichText(open), whichPrefix+" "))})}}
	}
	goal := normalize(q.Goal)
	var acts []abi.Action
	var what string
	switch {
	case reRestart().MatchString(goal):
		args := firstGroup(reRestart().FindStringSubmatch(goal))
		for _, t := range targets {
			acts = append(acts, restart(t, args, skills)...)
		}
		what = "Restarting"
	case reAgain().MatchString(goal):
		for _, t := range targets {
			acts = append(acts, again(t)...)
		}
		what = "Running again"
	default:
		acts = stop(targets)
		what = "Stopping"
	}
	ids := make([]string, len(targets))
	for i, t := range targets {
		ids[i] = fmt.Sprintf("`%s` (%s)", shortID(t.ID), t.Goal)
	}
	return append(acts, say(q.ID, what+" "+strings.Join(ids, ", ")+".", true))
}

var (
	reAll     = lazyRE(`(?i)^(?:all|both|everything|all of them|all tasks|all of it|every task|each)$`)
	reNumber  = lazyRE(`^#?(\d+)$`)
	ordinals  = map[string]int{"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "1st": 1, "2nd": 2, "3rd": 3, "4th": 4, "5th": 5}
	fillers   = map[string]bool{"it": true, "that": true, "this": true, "the": true, "task": true, "one": true, "now": true, "please": true}
	filler    = lazyRE(`(?i)\b(?:the|one|task|please|number|no)\b`)
	reIDToken = lazyRE(`^[0-9a-z-]{4,}$`)
)

// named reports whether rest, what follows a command, names a task: not
// just "it", "that", "the task", "now".
func named(rest string) bool {
	for _, w := range strings.Fields(strings.ToLower(rest)) {
		if !fillers[w] {
			return true
		}
	}
	return false
}

// choose is the run loops of cands an answer names: "all"; a number or an
// ordinal of the list; the end of an id; else words of a goal that match
// one goal only. Nothing when it names none, or more than one by words.
func choose(answer string, listed []*abi.RunLoopView) []*abi.RunLoopView {
	t := strings.TrimSpace(strings.ToLower(normalize(answer)))
	// A nil is a run loop listed that is gone: it keeps its number.
	var cands []*abi.RunLoopView
	for _, l := range listed {
		if l != nil {
			cands = append(cands, l)
		}
	}
	if reAll().MatchString(t) {
		return cands
	}
	words := strings.Fields(strings.TrimSpace(filler().ReplaceAllString(t, " ")))
	if len(words) == 1 {
		w := words[0]
		n := 0
		if sub := reNumber().FindStringSubmatch(w); sub != nil {
			fmt.Sscan(sub[1], &n)
		} else if o, ok := ordinals[w]; ok {
			n = o
		} else if w == "last" || w == "newest" || w == "latest" {
			n = len(listed)
		} else if w == "oldest" {
			n = 1
		}
		if n >= 1 && n <= len(listed) {
			if listed[n-1] == nil {
				return nil
			}
			return listed[n-1 : n]
		}
	}
	for _, w := range words {
		if !reIDToken().MatchString(w) {
			continue
		}
		var hit []*abi.RunLoopView
		for _, l := range cands {
			if strings.HasSuffix(strings.ToLower(l.ID), w) {
				hit = append(hit, l)
			}
		}
		if len(hit) == 1 {
			return hit
		}
	}
	if len(words) == 0 {
		return nil
	}
	var hit []*abi.RunLoopView
	for _, l := range cands {
		goal := strings.ToLower(l.Goal)
		all := true
		for _, w := range words {
			if !strings.Contains(goal, w) {
				all = false
				break
			}
		}
		if all {
			hit = append(hit, l)
		}
	}
	if len(hit) == 1 {
		return hit
	}
	return nil
}

// stop cancels each of targets.
func stop(targets []*abi.RunLoopView) []abi.Action {
	acts := make([]abi.Action, len(targets))
	for i, t := range targets {
		acts[i] = abi.Action{Type: abi.ActionCancel, CorrelationID: t.ID, Data: data(abi.ActionData{RunLoopID: t.ID, Reason: "the user asked to stop"})}
	}
	return acts
}

// restart runs t's command again with args, in t: its processes end first
// (a cancel that keeps the run loop open), then the new one starts.
func restart(t *abi.RunLoopView, args string, skills []string) []abi.Action {
	cmd := lastCommand(t)
	if cmd == "" {
		return []abi.Action{say(t.ID, "That task ran no command I can run again.", false)}
	}
	next := strings.Fields(cmd)[0] + " " + args
	return []abi.Action{
		{Type: abi.ActionCancel, CorrelationID: t.ID, Data: data(abi.ActionData{RunLoopID: t.ID, Reason: "restarted with " + args, Keep: true})},
		run(t.ID, next, skills),
		say(t.ID, fmt.Sprintf("Stopping `%s` and running `%s` instead, in the same task.", cmd, next), false),
	}
}

// again calls once more, in t, each tool call of it that was interrupted;
// without one, its last command.
func again(t *abi.RunLoopView) []abi.Action {
	var acts []abi.Action
	var whats []string
	seen := map[string]bool{}
	for _, a := range t.Actions {
		if a.Type != abi.ActionToolCall || a.Status != abi.StatusInterrupted || seen[a.Tool+a.Args] {
			continue
		}
		seen[a.Tool+a.Args] = true
		acts = append(acts, abi.Action{Type: abi.ActionToolCall, CorrelationID: t.ID, Data: data(abi.ActionData{Tool: a.Tool, Args: a.Args})})
		whats = append(whats, commandOf(a))
	}
	if len(acts) == 0 {
		cmd := lastCommand(t)
		if cmd == "" {
			return []abi.Action{say(t.ID, "That task ran nothing I can run again.", false)}
		}
		acts = append(acts, spawn(t.ID, cmd))
		whats = append(whats, "`"+cmd+"`")
	}
	return append(acts, say(t.ID, "Running "+strings.Join(whats, ", ")+" again.", false))
}

// progress reports on the task the question was sent into, else on every
// task in progress, else on the newest task; it never opens one.
func progress(corr string, into *abi.RunLoopView, loops []abi.RunLoopView, now time.Time) []abi.Action {
	if into != nil {
		return []abi.Action{say(into.ID, progressOf(into, now), false)}
	}
	busy := running(loops)
	switch {
	case len(busy) == 1:
		return []abi.Action{say(busy[0].ID, progressOf(busy[0], now), false)}
	case len(busy) > 1:
		parts := make([]string, len(busy))
		for i, l := range busy {
			parts[i] = fmt.Sprintf("Task `%s` (%s): %s", shortID(l.ID), l.Goal, progressOf(l, now))
		}
		return []abi.Action{say(busy[len(busy)-1].ID, strings.Join(parts, " "), false)}
	case len(loops) > 0:
		// Nothing runs: report on the newest task, interrupted say.
		return []abi.Action{say(loops[len(loops)-1].ID, progressOf(&loops[len(loops)-1], now), false)}
	}
	return []abi.Action{say(corr, "Nothing is running.", corr == "")}
}

// running lists the open run loops with something in progress, oldest
// first.
func running(loops []abi.RunLoopView) []*abi.RunLoopView {
	var out []*abi.RunLoopView
	for i := range loops {
		for _, a := range loops[i].Actions {
			if a.Status == abi.StatusInProgress {
				out = append(out, &loops[i])
				break
			}
		}
	}
	return out
}

// interrupted lists the run loops that wait for the user after the daemon
// stopped while they ran.
func interrupted(loops []abi.RunLoopView) []*abi.RunLoopView {
	var out []*abi.RunLoopView
	for i := range loops {
		if loops[i].Interrupted {
			out = append(out, &loops[i])
		}
	}
	return out
}

func loopByID(id string, loops []abi.RunLoopView) *abi.RunLoopView {
	if id == "" {
		return nil
	}
	for i := range loops {
		if loops[i].ID == id {
			return &loops[i]
		}
	}
	return nil
}

// shortID is the end of a run loop's id that `kairo runs` shows.
func shortID(id string) string {
	if len(id) > 8 {
		return id[len(id)-8:]
	}
	return id
}

// asked reports whether the loop's last action asked what to run.
func asked(l *abi.RunLoopView) bool {
	n := len(l.Actions)
	return n > 0 && l.Actions[n-1].Type == abi.ActionQuery && strings.HasPrefix(l.Actions[n-1].Text, "Run what?")
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
		if a.Type != abi.ActionToolCall || a.Tool != abi.MethodProcessSpawn {
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

func runningText(loops []abi.RunLoopView) string {
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

// onResult says what became of a tool call the process events do not
// report: an ask's answer, or a call that failed.
func onResult(ev *abi.Event, loops []abi.RunLoopView) (abi.Action, bool) {
	var r abi.ToolResultEvent
	if msgpack.Unmarshal(ev.Data, &r) != nil {
		return abi.Action{}, false
	}
	switch {
	case r.Tool == abi.ToolAgentAsk:
		return onAskResult(ev.CorrelationID, &r, loops)
	case r.Status == abi.StatusFailed:
		return say(ev.CorrelationID, "I could not run it: "+r.Error, true), true
	}
	return abi.Action{}, false
}

// onExit reports a task's process that ended.
func onExit(ev *abi.Event, loops []abi.RunLoopView) (abi.Action, bool) {
	var d abi.ProcessExitedEvent
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
			if a.Status == abi.StatusCanceled {
				return abi.Action{}, false // stopped on purpose: said when asked
			}
			cmd = commandOf(a)
		} else if a.Status == abi.StatusInProgress {
			busy = true
		}
	}
	took := (time.Duration(d.DurationMs) * time.Millisecond).Round(100 * time.Millisecond)
	var text string
	ok := d.ExitCode != nil && *d.ExitCode == 0
	switch {
	case ok:
		text = fmt.Sprintf("%s finished in %s (exit code 0).", cmd, took)
	case d.ExitCode != nil:
		text = fmt.Sprintf("%s failed after %s with exit code %d.", cmd, took, *d.ExitCode)
	default:
		text = fmt.Sprintf("%s was ended by %s after %s.", cmd, d.Signal, took)
	}
	return say(l.ID, text+quoteOutput(&d, !ok, l.ID), !busy), true
}

// How much of a process's output an answer quotes; the rest is a pointer
// to `kairo runs show`, which prints every line the kernel kept.
const (
	quoteLines = 10
	quoteBytes = 2 << 10
)

// quoteOutput is what an answer shows of what an ended process wrote:
// its last lines, fenced, or on a failure the lines of stderr, which say
// why. The lines are the process's, quoted as data: nothing in them is
// read as a command.
func quoteOutput(d *abi.ProcessExitedEvent, failed bool, loop string) string {
	lines, errs := d.LastLines, false
	if failed {
		var only []abi.OutputLine
		for _, l := range lines {
			if l.Stream == "stderr" {
				only = append(only, l)
			}
		}
		if len(only) > 0 {
			lines, errs = only, true
		}
	}
	if len(lines) == 0 {
		return ""
	}
	var quoted []string
	size := 0
	for i := len(lines) - 1; i >= 0 && len(quoted) < quoteLines; i-- {
		if size += len(lines[i].Text) + 1; size > quoteBytes && len(quoted) > 0 {
			break
		}
		quoted = append(quoted, lines[i].Text)
	}
	slices.Reverse(quoted)
	cut := len(quoted) < len(lines) || (!errs && d.Lines > len(d.LastLines))
	var label string
	switch {
	case errs && cut:
		label = fmt.Sprintf("The last %d lines of its errors", len(quoted))
	case errs:
		label = "It said"
	case cut:
		label = fmt.Sprintf("Its last %d lines", len(quoted))
	default:
		label = "It printed"
	}
	body := strings.Join(quoted, "\n")
	fence := "```"
	for strings.Contains(body, fence) {
		fence += "`"
	}
	out := fmt.Sprintf(" %s:\n%s\n%s\n%s", label, fence, body, fence)
	if more := max(d.Lines, len(d.LastLines)) - len(quoted); more > 0 {
		noun := "lines"
		if more == 1 {
			noun = "line"
		}
		out += fmt.Sprintf("\n… %d more %s: kairo runs show %s", more, noun, shortID(loop))
	}
	return out
}

func say(corr, text string, done bool) abi.Action {
	return abi.Action{Type: abi.ActionSay, CorrelationID: corr, Data: data(abi.ActionData{Text: text, Done: done})}
}

// run runs a command line: a skill by its name ("run progress-demo
// steps=5"), else a shell line.
func run(corr, cmd string, skills []string) abi.Action {
	if f := strings.Fields(cmd); len(f) > 0 && slices.Contains(skills, f[0]) {
		args, _ := json.Marshal(map[string]any{"skill": f[0], "args": append([]string{}, f[1:]...)})
		return abi.Action{Type: abi.ActionToolCall, CorrelationID: corr, Data: data(abi.ActionData{Tool: abi.MethodProcessSpawn, Args: string(args)})}
	}
	return spawn(corr, cmd)
}

func spawn(corr, cmd string) abi.Action {
	args, _ := json.Marshal(map[string]string{"command": cmd})
	return abi.Action{Type: abi.ActionToolCall, CorrelationID: corr, Data: data(abi.ActionData{Tool: abi.MethodProcessSpawn, Args: string(args)})}
}

func data(d abi.ActionData) msgpack.RawMessage {
	b, _ := msgpack.Marshal(d)
	return b
}
