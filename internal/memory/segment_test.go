package memory

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// chain builds the events of run loops as the agent runtime publishes
// them: each event in its correlation chain, with ids, times and sequence
// numbers.
type chain struct {
	t   *testing.T
	seq uint64
	at  time.Time
	evs []abi.Event
}

func newChain(t *testing.T) *chain {
	return &chain{t: t, at: time.Date(2025, 5, 2, 10, 0, 0, 0, time.UTC)}
}

// add appends an event and returns its id.
func (c *chain) add(typ, loop, cause string, data any) string {
	raw, err := msgpack.Marshal(data)
	if err != nil {
		c.t.Fatal(err)
	}
	c.seq++
	c.at = c.at.Add(time.Second)
	id := fmt.Sprintf("ev-%03d", c.seq)
	c.evs = append(c.evs, abi.Event{ID: id, Type: typ, Source: "agent/default", Time: c.at, Data: raw,
		CorrelationID: loop, CausationID: cause, Seq: c.seq})
	return id
}

// backupLoop is a run loop as the runtime records one: a goal, a decision
// with a thought, a say and a tool call that starts a process, a message
// from the user while it runs (the raw message and its routed copy), a
// second decision answering it, the process's end as a note, a third
// decision with another call, its result, and a closing say whose text is
// also the summary of kairo.intent.ended. An event of another run loop and
// the process's own events are mixed in, as on the bus.
func backupLoop(t *testing.T) *chain {
	c := newChain(t)
	const loop = "rl-backup"
	c.add(abi.SubjectUserMessage, "", "", abi.UserMessage{Text: "back up the billing database", MessageID: "m1"})
	c.add(abi.SubjectIntentStarted, loop, "ev-001", abi.IntentStarted{RunLoopID: loop, Agent: "default", Goal: "back up the billing database", MessageID: "m1"})
	c.add(abi.SubjectAgentAction, loop, "ev-001", abi.ActionEvent{Type: abi.ActionSay, ActionData: abi.ActionData{Text: "Starting the dump of billing."}, Tick: 4})
	call := c.add(abi.SubjectAgentAction, loop, "ev-001", abi.ActionEvent{Type: abi.ActionToolCall, ActionData: abi.ActionData{Tool: "run_skill", Args: `{"command":"pg_dump billing"}`}, Tick: 4})
	c.add(abi.SubjectAgentThought, loop, "", abi.Thought{Text: "pg_dump is the safest; SECRET-REASONING-42", Tick: 4})
	c.add(abi.SubjectToolInvoke, loop, call, abi.ToolInvoke{ActionID: call, Tool: "run_skill", Args: `{"command":"pg_dump billing"}`})
	c.add(abi.SubjectToolResult, loop, call, abi.ToolResultEvent{ActionID: call, Tool: "run_skill", Status: abi.StatusDone, ProcessID: "p1"})
	c.add("kairo.process.spawned", loop, call, map[string]any{"processId": "p1", "argv": []string{"pg_dump", "billing"}})
	c.add(abi.SubjectAgentAction, "rl-other", "", abi.ActionEvent{Type: abi.ActionSay, ActionData: abi.ActionData{Text: "another run loop"}, Tick: 5})
	raw := c.add(abi.SubjectUserMessage, "", "", abi.UserMessage{Text: "compress it too", MessageID: "m2", RunLoopID: loop})
	c.add(abi.AgentMessageSubject("default"), loop, raw, abi.UserMessage{Text: "compress it too", MessageID: "m2", RunLoopID: loop, Agent: "default"})
	c.add(abi.SubjectAgentAction, loop, raw, abi.ActionEvent{Type: abi.ActionSay, ActionData: abi.ActionData{Text: "I will compress it when the dump ends."}, Tick: 9})
	exited := c.add("kairo.process.exited", loop, call, map[string]any{"processId": "p1", "exitCode": 0})
	code := 0
	c.add(abi.SubjectAgentNote, loop, exited, abi.Note{RunLoopID: loop, ProcessID: "p1", Argv: []string{"pg_dump", "billing"}, Status: "exited",
		ExitCode: &code, Duration: 95 * time.Second, LastLines: []string{"wrote billing.sql (2.1 GB)"}})
	gz := c.add(abi.SubjectAgentAction, loop, "", abi.ActionEvent{Type: abi.ActionToolCall, ActionData: abi.ActionData{Tool: "run_skill", Args: `{"command":"gzip billing.sql"}`}, Tick: 12})
	c.add(abi.SubjectToolInvoke, loop, gz, abi.ToolInvoke{ActionID: gz, Tool: "run_skill", Args: `{"command":"gzip billing.sql"}`})
	res, _ := msgpack.Marshal(map[string]any{"size": "412 MB"})
	c.add(abi.SubjectToolResult, loop, gz, abi.ToolResultEvent{ActionID: gz, Tool: "run_skill", Status: abi.StatusDone, Result: res})
	c.add(abi.SubjectAgentAction, loop, "", abi.ActionEvent{Type: abi.ActionSay, ActionData: abi.ActionData{Text: "Done: billing.sql.gz, 412 MB.", Done: true}, Tick: 15})
	c.add(abi.SubjectIntentEnded, loop, "", abi.IntentEnded{RunLoopID: loop, Status: "done", Summary: "Done: billing.sql.gz, 412 MB."})
	return c
}

type segWant struct {
	it, seg int
	typ     SegmentType
	text    string // a prefix of the text
}

func checkSegments(t *testing.T, got []Segment, want []segWant) {
	t.Helper()
	for i := 0; i < max(len(got), len(want)); i++ {
		switch {
		case i >= len(got):
			t.Errorf("segment %d missing: want %d.%d %s %q", i, want[i].it, want[i].seg, want[i].typ, want[i].text)
		case i >= len(want):
			t.Errorf("segment %d extra: %s %q", i, got[i].Anchor, got[i].Text)
		default:
			g, w := got[i], want[i]
			if g.IterationIndex != w.it || g.SegmentIndex != w.seg || g.SegmentType != w.typ || !strings.HasPrefix(g.Text, w.text) {
				t.Errorf("segment %d: got %s %q, want %d.%d(%s) %q", i, g.Anchor, g.Text, w.it, w.seg, w.typ, w.text)
			}
		}
	}
}

func TestSegmentsRunLoop(t *testing.T) {
	c := backupLoop(t)
	got := Segments(c.evs, SegmentConfig{KeepReasoning: true})
	checkSegments(t, got, []segWant{
		{0, 0, abi.MemorySegmentUserMessage, "back up the billing database"},
		{0, 1, abi.MemorySegmentReasoning, "pg_dump is the safest"},
		{0, 2, abi.MemorySegmentResponse, "Starting the dump of billing."},
		{0, 3, abi.MemorySegmentToolCall, `call run_skill {"command":"pg_dump billing"}`},
		// The process's note joins the call that started it, though it
		// came after the user's message and the next decision.
		{0, 4, abi.MemorySegmentToolResult, "process `pg_dump billing` exited with exit code 0 after 1m35s"},
		{1, 0, abi.MemorySegmentUserMessage, "compress it too"},
		{1, 1, abi.MemorySegmentResponse, "I will compress it when the dump ends."},
		{2, 0, abi.MemorySegmentToolCall, `call run_skill {"command":"gzip billing.sql"}`},
		{2, 1, abi.MemorySegmentToolResult, `run_skill done: {"size":"412 MB"}`},
		{3, 0, abi.MemorySegmentResponse, "Done: billing.sql.gz, 412 MB."},
	})
	for _, sg := range got {
		if sg.RunLoopID != "rl-backup" || sg.EventID == "" || sg.Timestamp.IsZero() {
			t.Errorf("segment %s: run loop %q, event %q, time %v", sg.Anchor, sg.RunLoopID, sg.EventID, sg.Timestamp)
		}
		if strings.Contains(sg.Text, "another run loop") {
			t.Errorf("segment %s holds an event of another run loop", sg.Anchor)
		}
	}
	if note := got[4]; !strings.Contains(note.Text, "wrote billing.sql (2.1 GB)") || !strings.Contains(note.Context, "pg_dump billing") {
		t.Errorf("note %q (context %q): want its last lines and the call that started it", note.Text, note.Context)
	}
	// Shuffled events with their sequence numbers cut the same.
	shuffled := append([]abi.Event(nil), c.evs...)
	for i, j := 0, len(shuffled)-1; i < j; i, j = i+1, j-1 {
		shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
	}
	if again := Segments(shuffled, SegmentConfig{KeepReasoning: true}); fmt.Sprint(again) != fmt.Sprint(got) {
		t.Errorf("events out of order cut differently:\n%v\n%v", again, got)
	}
}

func TestSegmentsWithoutReasoning(t *testing.T) {
	got := Segments(backupLoop(t).evs, SegmentConfig{})
	for _, sg := range got {
		if sg.SegmentType == abi.MemorySegmentReasoning || strings.Contains(sg.Text, "SECRET-REASONING") {
			t.Errorf("reasoning is not kept, yet %s holds %q", sg.Anchor, sg.Text)
		}
	}
	// The thought's iteration keeps its other segments, renumbered.
	checkSegments(t, got[:4], []segWant{
		{0, 0, abi.MemorySegmentUserMessage, "back up"},
		{0, 1, abi.MemorySegmentResponse, "Starting"},
		{0, 2, abi.MemorySegmentToolCall, "call run_skill"},
		{0, 3, abi.MemorySegmentToolResult, "process"},
	})
}

func TestSegmentsEndedSummary(t *testing.T) {
	c := newChain(t)
	const loop = "rl-cancel"
	c.add(abi.SubjectIntentStarted, loop, "", abi.IntentStarted{RunLoopID: loop, Agent: "default", Goal: "rebuild the search index"})
	call := c.add(abi.SubjectAgentAction, loop, "", abi.ActionEvent{Type: abi.ActionToolCall, ActionData: abi.ActionData{Tool: "run_skill", Args: `{"command":"reindex"}`}, Tick: 1})
	c.add(abi.SubjectAgentAction, loop, "", abi.ActionEvent{Type: abi.ActionCancel, ActionData: abi.ActionData{RunLoopID: loop, Reason: "the user changed their mind"}, Tick: 3})
	c.add(abi.SubjectToolResult, loop, call, abi.ToolResultEvent{ActionID: call, Tool: "run_skill", Status: abi.StatusCanceled, Error: "canceled by the user"})
	c.add(abi.SubjectAgentAction, loop, "", abi.ActionEvent{Type: abi.ActionNoop, Tick: 4})
	c.add(abi.SubjectIntentEnded, loop, "", abi.IntentEnded{RunLoopID: loop, Status: "canceled", Summary: "reindex (canceled)"})
	checkSegments(t, Segments(c.evs, SegmentConfig{}), []segWant{
		{0, 0, abi.MemorySegmentUserMessage, "rebuild the search index"},
		{0, 1, abi.MemorySegmentToolCall, `call run_skill {"command":"reindex"}`},
		{0, 2, abi.MemorySegmentToolResult, "run_skill canceled: canceled by the user"},
		{1, 0, abi.MemorySegmentToolCall, "cancel the run loop: the user changed their mind"},
		{1, 1, abi.MemorySegmentResponse, "Ended (canceled): reindex (canceled)"},
	})
}

func TestSegmentsCutsLongText(t *testing.T) {
	c := newChain(t)
	long := strings.Repeat("é", 5000) // 10,000 bytes
	c.add(abi.SubjectIntentStarted, "rl", "", abi.IntentStarted{RunLoopID: "rl", Goal: long})
	got := Segments(c.evs, SegmentConfig{MaxTextBytes: 1001})
	if len(got) != 1 || len(got[0].Text) > 1001 || !strings.HasSuffix(got[0].Text, "…") || !utf8Valid(got[0].Text) {
		t.Fatalf("a 10 KB goal cut to 1001 bytes: %d segments, %d bytes", len(got), len(got[0].Text))
	}
	if Segments(nil, SegmentConfig{}) != nil {
		t.Error("no events gave segments")
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
