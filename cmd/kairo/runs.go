package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

func runRuns(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "show" {
		return runRunsShow(ctx, args[1:])
	}
	f := newFlags("runs", "kairo runs [--agent ID] [--open] [--all] [--limit N] [--before N] [--json] | kairo runs show [--json] ID", `
List the agents' run loops — a task each: what the user asked, how it ended
or what is still running — newest first. STATUS is open, interrupted (the
daemon stopped while it ran: it waits for the user, who may say "again"),
or how it ended. A message the agent only answered ("help", a question)
is a conversation, not a task: --all lists those too. "kairo runs show ID"
prints one as a timeline (ID may be the last 8 characters the list shows).

When the daemon runs several agents (kairo agents), AGENT says whose each
run loop is, and for one that answers another agent's ask, which agent
asked ("ops, asked by default"). --agent lists one agent's only.

With --json, one JSON object per run loop: id, agent, host (when kairos
share one store), goal, status, startedAt, endedAt (once ended),
iterations, actions, inProgress, conversation (true for one), startSeq
(the seq of its start in the log) and ask (for a run loop that answers
another agent's ask: agent, actionId and runLoopId of the asker, depth,
grants "intersection" or "own", within). A listing of more than --limit
says on stderr how to ask for the older ones (--before N).`)
	agent := f.String("agent", "", "only the run loops of the agent `ID`")
	open := f.Bool("open", false, "only the run loops still open")
	all := f.Bool("all", false, "conversations too: run loops that only answered")
	before := f.Uint64("before", 0, "the page of run loops older than the last one listed: the `N` the listing ends with")
	limit := f.Int("limit", 20, "at most `N` run loops")
	asJSON := f.Bool("json", false, "print one JSON object per run loop")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	res, err := listRuns(ctx, abi.RunsParams{Limit: *limit, Open: *open, All: *all, Before: *before, Agent: *agent})
	if err != nil {
		return err
	}
	more := func() {
		if res.Next != 0 {
			next := fmt.Sprintf("kairo runs --before %d", res.Next)
			if *agent != "" {
				next += " --agent " + termLine(*agent)
			}
			fmt.Fprintf(os.Stderr, "older run loops: %s\n", next)
		}
	}
	if *asJSON {
		for _, r := range res.Runs {
			fmt.Printf("%s\n", marshalJSON(runJSON(r)))
		}
		more()
		return nil
	}
	if len(res.Runs) == 0 {
		if *agent != "" {
			fmt.Printf("no tasks of %s yet: send it a message, e.g. kairo send --agent %s \"run sleep 5\" (kairo runs --all lists conversations too)\n", termLine(*agent), termLine(*agent))
			return nil
		}
		fmt.Println(`no tasks yet: send the agent a message, e.g. kairo send "run sleep 5" (kairo runs --all lists conversations too)`)
		return nil
	}
	agents, err := listAgents(ctx)
	if err != nil {
		return err
	}
	if err := printRuns(res.Runs, len(agents.Agents) > 1); err != nil {
		return err
	}
	more()
	return nil
}

// printRuns prints run loops as a table: with AGENT when the daemon runs
// several agents (or a run loop answers an ask, whoever runs it), so the
// table keeps its columns from one listing to the next; with HOST when
// kairos share the store.
func printRuns(runs []abi.RunSummary, several bool) error {
	hosts := slices.ContainsFunc(runs, func(r abi.RunSummary) bool { return r.Host != "" })
	agents := several || slices.ContainsFunc(runs, func(r abi.RunSummary) bool { return r.Ask != nil })
	head := "ID\t"
	if hosts {
		head += "HOST\t"
	}
	if agents {
		head += "AGENT\t"
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, head+"STARTED\tSTATUS\tSTEPS\tRUNNING\tGOAL")
	for _, r := range runs {
		id := shortID(r.ID)
		if hosts {
			id += "\t" + termLine(orDash(r.Host))
		}
		if agents {
			id += "\t" + termLine(runAgent(r))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\n", id, r.StartedAt.Local().Format("01-02 15:04:05"),
			termLine(r.Status), r.Iterations, r.InProgress, termLine(clip(r.Goal, 60)))
	}
	return w.Flush()
}

// runAgent is whose run loop r is, and who asked for it: "ops, asked by
// default".
func runAgent(r abi.RunSummary) string {
	if r.Ask == nil {
		return r.Agent
	}
	return r.Agent + ", asked by " + r.Ask.Agent
}

// runObject is a run loop as `kairo runs --json` prints it: stable
// camelCase field names.
type runObject struct {
	ID           string     `json:"id"`
	Agent        string     `json:"agent"`
	Host         string     `json:"host,omitempty"`
	Goal         string     `json:"goal"`
	Status       string     `json:"status"`
	StartedAt    time.Time  `json:"startedAt"`
	EndedAt      *time.Time `json:"endedAt,omitempty"`
	Iterations   int        `json:"iterations"`
	Actions      int        `json:"actions"`
	InProgress   int        `json:"inProgress"`
	Conversation bool       `json:"conversation,omitempty"`
	StartSeq     uint64     `json:"startSeq,omitempty"`
	Ask          *askObject `json:"ask,omitempty"`
}

// askObject is the ask a run loop answers, as abi.Ask names it.
type askObject struct {
	Agent     string   `json:"agent"`
	ActionID  string   `json:"actionId"`
	RunLoopID string   `json:"runLoopId"`
	Depth     int      `json:"depth"`
	Grants    string   `json:"grants"`
	Within    []string `json:"within"`
}

func runJSON(r abi.RunSummary) runObject {
	o := runObject{ID: r.ID, Agent: r.Agent, Host: r.Host, Goal: r.Goal, Status: r.Status, StartedAt: r.StartedAt,
		Iterations: r.Iterations, Actions: r.Actions, InProgress: r.InProgress, Conversation: r.Conversation, StartSeq: r.StartSeq}
	if a := r.Ask; a != nil {
		o.Ask = &askObject{Agent: a.Agent, ActionID: a.ActionID, RunLoopID: a.RunLoopID, Depth: a.Depth, Grants: a.Grants, Within: orEmpty(a.Within)}
	}
	if !r.EndedAt.IsZero() {
		t := r.EndedAt
		o.EndedAt = &t
	}
	return o
}

func listRuns(ctx context.Context, p abi.RunsParams) (abi.RunsResult, error) {
	var res abi.RunsResult
	if err := callKernel(ctx, "kairo runs", abi.MethodAgentRuns, p, &res); err != nil {
		return res, err
	}
	return res, nil
}

// findRun is the run loop id names — whole, or its end as kairo runs
// shows it — old ones too; ok is false when none does.
func findRun(ctx context.Context, id string) (abi.RunSummary, bool, error) {
	res, err := listRuns(ctx, abi.RunsParams{ID: id, Limit: 2, All: true})
	if err != nil {
		return abi.RunSummary{}, false, err
	}
	for _, r := range res.Runs {
		if r.ID == id {
			return r, true, nil
		}
	}
	switch len(res.Runs) {
	case 0:
		return abi.RunSummary{}, false, nil
	case 1:
		return res.Runs[0], true, nil
	}
	return abi.RunSummary{}, false, fmt.Errorf("%q names more than one run loop; give more of the ID", id)
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

func runRunsShow(ctx context.Context, args []string) error {
	f := newFlags("runs show", "kairo runs show [--json] ID", "Print a run loop's events as a timeline: who did what, when, caused by what.")
	asJSON := f.Bool("json", false, "print one JSON object per event")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	id := pos[0]
	run, ok, err := findRun(ctx, id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no run loop %q; `kairo runs --all` lists them", id)
	}
	id, from := run.ID, run.StartSeq
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var evs []abi.Event
	// Its events come after its start.
	_, err = c.Replay(ctx, abi.ReplayParams{Pattern: abi.SubjectAll, FromSeq: from}, func(ev *abi.Event) error {
		if ev.CorrelationID == id {
			e := *ev
			e.Data = append([]byte(nil), ev.Data...)
			evs = append(evs, e)
		}
		return nil
	})
	if err != nil {
		return callError("kairo runs show", err)
	}
	if *asJSON {
		p := newPrinter(true)
		for i := range evs {
			if err := p.print(&evs[i]); err != nil {
				return err
			}
		}
		return p.w.Flush()
	}
	fmt.Printf("run loop %s of %s\n", id, termLine(runAgent(run)))
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	// On a terminal a process's progress is one row, as it was one line
	// redrawn while it ran: its last report, with its rate. Piped, each
	// report is a row.
	tty := isTerminal(int(os.Stdout.Fd()))
	last := map[string]int{} // process → the index of its last report
	for i := range evs {
		if r, ok := readProgress(&evs[i]); ok {
			last[r.ProcessID] = i
		}
	}
	var meter progressMeter
	var t0 time.Time
	for i := range evs {
		ev := &evs[i]
		if t0.IsZero() {
			t0 = ev.Time
		}
		desc := termLine(describeRunEvent(ev))
		if r, ok := meter.read(ev); ok && tty {
			if last[r.ProcessID] != i {
				continue
			}
			r.HasETA = false // a past estimate
			desc = termLine(r.ProcessID) + " " + r.bar()
		}
		fmt.Fprintf(w, "%s\t+%s\t%s\t%s\n", ev.Time.Local().Format("15:04:05.000"), ev.Time.Sub(t0).Round(time.Millisecond), termLine(ev.Type), desc)
		printKeptLines(w, ev)
	}
	return w.Flush()
}

// printKeptLines prints, under a process's exit, the last lines the kernel
// kept of its output, one row each ("stderr|" marks that stream's), after
// how many earlier ones were not kept.
func printKeptLines(w io.Writer, ev *abi.Event) {
	if ev.Type != abi.SubjectProcessExited {
		return
	}
	var d abi.ProcessExitedEvent
	if msgpack.Unmarshal(ev.Data, &d) != nil || len(d.LastLines) == 0 {
		return
	}
	if more := d.Lines - len(d.LastLines); more > 0 {
		fmt.Fprintf(w, "\t\t\t  … %d earlier lines not kept\n", more)
	}
	for _, l := range d.LastLines {
		mark := "|"
		if l.Stream == "stderr" {
			mark = "stderr|"
		}
		fmt.Fprintf(w, "\t\t\t  %s %s\n", mark, termLine(l.Text))
	}
}

// describe says what an event of a run loop means, in a line.
func describeRunEvent(ev *abi.Event) string {
	var m map[string]any
	msgpack.Unmarshal(ev.Data, &m)
	str := func(k string) string {
		if v, ok := m[k]; ok && v != nil {
			return fmt.Sprint(v)
		}
		return ""
	}
	switch ev.Type {
	case abi.SubjectIntentStarted:
		return fmt.Sprintf("task opened: %q", str("goal"))
	case abi.SubjectIntentEnded:
		return fmt.Sprintf("task %s: %s", str("status"), str("summary"))
	case abi.SubjectAgentAction:
		switch str("type") {
		case abi.ActionSay:
			return "says: " + str("text")
		case abi.ActionQuery:
			return "asks: " + str("text")
		case abi.ActionToolCall:
			return fmt.Sprintf("calls %s %s", str("tool"), str("args"))
		case abi.ActionCancel:
			return "cancels: " + str("reason")
		}
	case abi.SubjectAgentThought:
		return "thinks: " + str("text")
	case abi.SubjectToolInvoke:
		return "invoke " + str("tool")
	case abi.SubjectToolResult:
		s := fmt.Sprintf("%s: %s", str("tool"), str("status"))
		if e := str("error"); e != "" {
			s += " (" + e + ")"
		}
		if p := str("processId"); p != "" {
			s += " process " + p
		}
		return s
	case abi.SubjectAgentNote:
		s := fmt.Sprintf("note: %s %s", str("processId"), str("status"))
		if c := str("exitCode"); c != "" {
			s += " exit " + c
		}
		if l, ok := m["lastLines"].([]any); ok && len(l) > 0 {
			s += fmt.Sprintf(", last: %q", fmt.Sprint(l[len(l)-1]))
		}
		return s
	case abi.SubjectProcessSpawned:
		return fmt.Sprintf("%s started: %v", str("processId"), m["argv"])
	case abi.SubjectProcessExited:
		s := str("processId") + " exited"
		if c := str("exitCode"); c != "" {
			s += " with code " + c
		}
		if sig := str("signal"); sig != "" {
			s += " by " + sig
		}
		return s
	case abi.SubjectProcessCanceled, abi.SubjectProcessInterrupted:
		return fmt.Sprintf("%s: %s", str("processId"), str("reason"))
	case abi.SubjectProcessProgress:
		if r, ok := readProgress(ev); ok {
			return str("processId") + " " + r.plain()
		}
	}
	if strings.HasSuffix(ev.Type, ".message") {
		return "user: " + str("text")
	}
	return string(marshalJSON(m))
}
