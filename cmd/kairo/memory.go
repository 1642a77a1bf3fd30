package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/agent"
)

var memoryCommands []command

func init() {
	// Set here, not in the declaration: help refers to memoryCommands.
	memoryCommands = []command{
		{"search", "the remembered segments that best answer a query, with anchors and provenance", runMemorySearch},
		{"show", "a remembered segment whole, with its run loop around it: kairo memory show ANCHOR", runMemoryShow},
		{"forget", "forget a segment, a task, or every segment holding a phrase (recorded)", runMemoryForget},
		{"help", "show this help, or a command's: kairo memory help COMMAND", runMemoryHelp},
	}
}

func runMemory(ctx context.Context, args []string) error {
	if len(args) == 0 {
		printMemoryUsage(os.Stderr)
		return errUsageShown
	}
	return dispatch(ctx, memoryCommands, "kairo memory", args)
}

func runMemoryHelp(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] != "-h" {
		return dispatch(ctx, memoryCommands, "kairo memory", append(args[:len(args):len(args)], "-h"))
	}
	printMemoryUsage(os.Stdout)
	return nil
}

func printMemoryUsage(w io.Writer) {
	fmt.Fprint(w, `usage: kairo memory COMMAND [flags] [args]

The agent's long-term memory: the segments of the tasks that ended, each
with where its words came from (the user, the agent, or data from a tool,
a process or an MCP server) and its task.

commands:
`)
	for _, c := range memoryCommands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun \"kairo memory COMMAND -h\" for a command's flags.\n")
}

// memoryChunk is a remembered segment as --json prints it: its field names
// are stable.
type memoryChunk struct {
	Anchor    string    `json:"anchor"`
	RunLoopID string    `json:"runLoopId"`
	Iteration int       `json:"iteration"`
	Segment   int       `json:"segment"`
	Type      string    `json:"type"`
	Time      time.Time `json:"time"`
	Origin    string    `json:"origin"`
	Source    string    `json:"source"`
	Quotes    bool      `json:"quotes"`
	Data      bool      `json:"data"`
	Score     float64   `json:"score,omitempty"`
	Focus     bool      `json:"focus,omitempty"`
	Text      string    `json:"text"`
}

func memoryJSON(c abi.MemoryChunk) memoryChunk {
	return memoryChunk{Anchor: c.Anchor.Ref(), RunLoopID: c.Anchor.RunLoopID, Iteration: c.Anchor.IterationIndex,
		Segment: c.Anchor.SegmentIndex, Type: string(c.Anchor.SegmentType), Time: c.Anchor.Timestamp, Origin: string(c.Origin),
		Source: c.Source, Quotes: c.Quotes, Data: c.IsData(), Score: c.Score, Text: c.Text}
}

// from says whose words a chunk holds, in a table cell.
func from(c abi.MemoryChunk) string {
	if c.IsData() {
		return "data: " + c.Describe()
	}
	return c.Describe()
}

func runMemorySearch(ctx context.Context, args []string) error {
	f := newFlags("memory search", "kairo memory search [--json] [--limit N] [--cursor C] [--agent ID] QUERY...", `
Print the remembered segments that best answer QUERY, best first, as the
agent recalls them: each with its anchor (for kairo memory show and
forget), its task, and where its words came from — the user, the agent, or
data from a tool, a process or an MCP server (the agent is shown data as
quoted data, never as instructions). It prints a page of N segments and,
when there are more, the command for the next page (with --json, a last
line {"next": CURSOR}).`)
	asJSON := f.Bool("json", false, "print one JSON object per segment")
	limit := f.Int("limit", 10, "at most `N` segments a page")
	cursor := f.String("cursor", "", "start at the page `C`, the cursor the previous page printed")
	agent := memoryAgentFlag(f)
	pos, err := f.parse(args, 1, -1)
	if err != nil {
		return err
	}
	query := strings.Join(pos, " ")
	var page abi.MemorySearchPage
	if err := callKernel(ctx, "kairo memory search", abi.MethodMemorySearch, abi.MemorySearchParams{Query: query, Limit: *limit, Cursor: *cursor, Agent: *agent}, &page); err != nil {
		return err
	}
	if *asJSON {
		for _, c := range page.Chunks {
			fmt.Printf("%s\n", marshalJSON(memoryJSON(c)))
		}
		if page.Next != "" {
			fmt.Printf("%s\n", marshalJSON(struct {
				Next string `json:"next"`
			}{page.Next}))
		}
		return nil
	}
	if len(page.Chunks) == 0 {
		fmt.Println("nothing remembered answers that")
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ANCHOR\tTYPE\tFROM\tTEXT")
	for _, c := range page.Chunks {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", termLine(c.Anchor.Ref()), termLine(string(c.Anchor.SegmentType)), termLine(clip(from(c), 60)), termLine(clip(strings.Join(strings.Fields(c.Text), " "), 80)))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if page.Next != "" {
		fmt.Printf("\nmore: kairo memory search --limit %d --cursor %s %s\n", *limit, page.Next, termLine(shellJoin(pos)))
	}
	return nil
}

func runMemoryShow(ctx context.Context, args []string) error {
	f := newFlags("memory show", "kairo memory show [--json] [--window N] [--agent ID] ANCHOR", `
Print the remembered segment at ANCHOR (as kairo memory search shows it)
whole, with where its words came from, and the segments of its task
around it.`)
	asJSON := f.Bool("json", false, "print one JSON object per segment, the anchor's with \"focus\": true")
	window := f.Int("window", 2, "`N` segments of the task before and after it")
	agent := memoryAgentFlag(f)
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	a, err := abi.ParseMemoryAnchor(pos[0])
	if err != nil {
		return &usageError{msg: err.Error(), synopsis: f.synopsis}
	}
	var x abi.MemoryExpanded
	if err := callKernel(ctx, "kairo memory show", abi.MethodMemoryExpand, abi.MemoryExpandParams{Anchor: a, Window: *window, Agent: *agent}, &x); err != nil {
		return err
	}
	if *asJSON {
		for _, c := range x.Before {
			fmt.Printf("%s\n", marshalJSON(memoryJSON(c)))
		}
		focus := memoryJSON(x.Focus)
		focus.Focus = true
		fmt.Printf("%s\n", marshalJSON(focus))
		for _, c := range x.After {
			fmt.Printf("%s\n", marshalJSON(memoryJSON(c)))
		}
		return nil
	}
	fmt.Printf("task %s: %s (%d segments)\n\n", termLine(x.RunLoopID), termLine(clip(x.Goal, 80)), x.Segments)
	for _, c := range x.Before {
		fmt.Printf("  %s  %s  %s: %s\n", termLine(c.Anchor.Ref()), termLine(string(c.Anchor.SegmentType)), termLine(from(c)), termLine(clip(strings.Join(strings.Fields(c.Text), " "), 100)))
	}
	fmt.Printf("> %s  %s  %s\n%s\n", termLine(x.Focus.Anchor.Ref()), termLine(string(x.Focus.Anchor.SegmentType)), termLine(from(x.Focus)), termText(x.Focus.Text))
	for _, c := range x.After {
		fmt.Printf("  %s  %s  %s: %s\n", termLine(c.Anchor.Ref()), termLine(string(c.Anchor.SegmentType)), termLine(from(c)), termLine(clip(strings.Join(strings.Fields(c.Text), " "), 100)))
	}
	return nil
}

func runMemoryForget(ctx context.Context, args []string) error {
	f := newFlags("memory forget", "kairo memory forget [--agent ID] --anchor ANCHOR | --task ID | --query PHRASE", `
Make the agent's memory forget one segment (--anchor, as kairo memory
search shows it), every segment of a task (--task; the last 8 characters
of its ID do, as kairo runs shows them), or every segment whose text holds
PHRASE, whatever its case (--query). It is recorded in the event log as
kairo.memory.forgotten, so what it named stays forgotten after a restart
and when memory.db is rebuilt from the log. Only the operator may.`)
	anchor := f.String("anchor", "", "forget the segment at `ANCHOR`")
	task := f.String("task", "", "forget every segment of the task `ID`")
	query := f.String("query", "", "forget every segment whose text holds `PHRASE`")
	whose := memoryAgentFlag(f)
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	n := 0
	for _, v := range []string{*anchor, *task, *query} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return &usageError{msg: "give one of --anchor, --task or --query", synopsis: f.synopsis}
	}
	p := abi.MemoryForgetParams{Anchor: *anchor, Task: *task, Query: *query, Agent: *whose}
	if p.Task != "" {
		id, err := resolveRun(ctx, p.Task)
		if err != nil {
			return err
		}
		p.Task = id
	}
	var res abi.MemoryForgetResult
	if err := callKernel(ctx, "kairo memory forget", abi.MethodMemoryForget, p, &res); err != nil {
		return err
	}
	switch {
	case !res.Recorded:
		fmt.Printf("nothing remembered holds %q; nothing forgotten\n", termLine(p.Query))
	case p.Task != "" && len(res.Segments) == 0:
		fmt.Printf("task %s forgotten: nothing of it was in memory, and it will not be when it ends (recorded as %s)\n", p.Task, agent.SubjectMemoryForgotten)
	default:
		fmt.Printf("forgot %d segment(s) (recorded as %s):\n", len(res.Segments), agent.SubjectMemoryForgotten)
		for _, r := range res.Segments {
			a := abi.MemoryAnchor{RunLoopID: r.RunLoopID, IterationIndex: r.IterationIndex, SegmentIndex: r.SegmentIndex, SegmentType: r.SegmentType}
			fmt.Printf("  %s  %s\n", termLine(a.Ref()), termLine(string(a.SegmentType)))
		}
	}
	return nil
}

// resolveRun finds the run loop id names: whole, or its end as kairo runs
// shows it; id itself when none does (memory.forget says whether memory
// knows it).
func resolveRun(ctx context.Context, id string) (string, error) {
	r, ok, err := findRun(ctx, id)
	if err != nil || !ok {
		return id, err
	}
	return r.ID, nil
}

// memoryAgentFlag is --agent of the memory commands: whose memory they
// read; the default agent's when it is not given.
func memoryAgentFlag(f *cmdFlags) *string {
	return f.String("agent", "", "the memory of agent `ID` (kairo agents lists them); the default agent's when not given")
}
