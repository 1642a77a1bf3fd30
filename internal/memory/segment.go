package memory

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// SegmentType says what part of a run loop a segment is. The memory
// methods answer it, so it is abi's: [abi.MemorySegmentType].
type SegmentType = abi.MemorySegmentType

// Anchor locates a segment in its run loop: [abi.MemoryAnchor].
type Anchor = abi.MemoryAnchor

// Segment is one piece of a run loop, as it is indexed.
type Segment struct {
	Anchor
	Text string `json:"text" msgpack:"text"`
	// Context is what the segment answers, when it means little alone: for
	// a tool result or a note, the call that produced it ("503" is a
	// health check's answer). It is searched beside Text, not shown.
	Context string `json:"context,omitempty" msgpack:"context,omitempty"`
	// EventID is the id of the event the segment was cut from.
	EventID string `json:"eventId,omitempty" msgpack:"eventId,omitempty"`
	// Provenance says whose words Text holds; zero, Index gives the
	// segment type's default (a result is a tool's, a response the
	// agent's).
	Provenance
}

// SegmentConfig configures Segments. The zero value is useful.
type SegmentConfig struct {
	// KeepReasoning cuts the policy's thoughts into reasoning segments.
	// Off by default (seed 000 §4.2): a run loop is then remembered by its
	// public actions, their results and its summaries only.
	KeepReasoning bool
	// MaxTextBytes cuts a segment's text longer than this (at a character
	// boundary, marked with "…"). Default 8 KiB: enough for a tool's
	// result in memory, small enough for any embeddings endpoint.
	MaxTextBytes int
}

// DefaultMaxTextBytes is SegmentConfig.MaxTextBytes when it is zero.
const DefaultMaxTextBytes = 8 << 10

// Segments cuts the events of one run loop into segments, in the order a
// reader would follow them.
//
// The run loop is the one the events' kairo.intent.started opens (else the
// correlationId of the first event that has one); events of other run loops
// are ignored, and so are events that carry nothing to remember (process
// output, which reaches memory only through kairo.agent.note; noops). Events
// are taken in log order: by Seq when every event has one, else as given.
// A tool result that only says a process started is left out too: the
// process's note, when it ends, says how it went.
//
// An iteration is one decision of the policy and what it answers and
// causes: the user messages that arrived since the previous decision, the
// decision's thought and actions (those of one tick, as the runtime counts
// iterations), and the results of its tool calls and the notes of the
// processes they started, even when those arrive after a later decision
// has begun. Within an iteration the segments run user messages, reasoning,
// actions in the order the policy gave them, then results and notes as they
// arrived. The goal that opened the run loop is iteration 0's first user
// message; a message that arrives after the last decision is an iteration
// of its own; the summary of kairo.intent.ended is a response of the last
// iteration, unless it only repeats one. Iterations left empty (a thought
// with reasoning not kept) are not counted.
func Segments(events []abi.Event, opts SegmentConfig) []Segment {
	if opts.MaxTextBytes <= 0 {
		opts.MaxTextBytes = DefaultMaxTextBytes
	}
	evs := inLogOrder(events)
	c := cutter{opts: opts, loop: loopOf(evs), byAction: map[string]int{}, byProcess: map[string]string{},
		calls: map[string]string{}, users: map[string]bool{}}
	if c.loop == "" {
		return nil
	}
	for i := range evs {
		c.cut(&evs[i])
	}
	return c.finish()
}

func inLogOrder(events []abi.Event) []abi.Event {
	bySeq := func(a, b abi.Event) int { return cmp.Compare(a.Seq, b.Seq) }
	for i := range events {
		if events[i].Seq == 0 {
			return events
		}
	}
	if slices.IsSortedFunc(events, bySeq) {
		return events
	}
	sorted := slices.Clone(events)
	slices.SortStableFunc(sorted, bySeq)
	return sorted
}

// LoopOf is the run loop an event belongs to: the one a
// kairo.intent.started opens, else its correlation.
func LoopOf(ev *abi.Event) string {
	if ev.Type == abi.SubjectIntentStarted {
		var d abi.IntentStarted
		if abi.DecodeIntentStarted(ev.Data, &d) == nil && d.RunLoopID != "" {
			return d.RunLoopID
		}
	}
	return ev.CorrelationID
}

// loopOf is the run loop the events belong to.
func loopOf(evs []abi.Event) string {
	for i := range evs {
		if evs[i].Type == abi.SubjectIntentStarted {
			if id := LoopOf(&evs[i]); id != "" {
				return id
			}
		}
	}
	for i := range evs {
		if evs[i].CorrelationID != "" {
			return evs[i].CorrelationID
		}
	}
	return ""
}

// piece is a segment before it is numbered.
type piece struct {
	typ     SegmentType
	text    string
	context string
	at      time.Time
	eventID string
	prov    Provenance
	ord     int      // the event's place in the log
	data    []string // a result's own words (not Kairo's phrasing), for quotes
}

type iteration struct {
	decided bool
	tick    uint64
	users   []piece
	reason  []piece
	actions []piece
	results []piece
}

func (it *iteration) empty() bool {
	return len(it.users)+len(it.reason)+len(it.actions)+len(it.results) == 0
}

// cutter folds a run loop's events into iterations.
type cutter struct {
	opts      SegmentConfig
	loop      string
	its       []*iteration
	byAction  map[string]int    // actionId → iteration
	byProcess map[string]string // processId → actionId
	calls     map[string]string // actionId → the call's text
	users     map[string]bool
	ended     *piece // the summary of kairo.intent.ended
	ord       int    // the current event's place
}

func (c *cutter) current() *iteration {
	if len(c.its) == 0 {
		c.its = append(c.its, &iteration{})
	}
	return c.its[len(c.its)-1]
}

// decision is the iteration a decision at tick belongs to: the current
// one if it has not decided yet or decided at the same tick, else a new one.
func (c *cutter) decision(tick uint64) (int, *iteration) {
	it := c.current()
	if it.decided && it.tick != tick {
		it = &iteration{}
		c.its = append(c.its, it)
	}
	it.decided, it.tick = true, tick
	return len(c.its) - 1, it
}

// answering is the iteration of the action an event answers, else the
// current one.
func (c *cutter) answering(actionID string) *iteration {
	if i, ok := c.byAction[actionID]; ok {
		return c.its[i]
	}
	return c.current()
}

func (c *cutter) piece(typ SegmentType, text string, ev *abi.Event) piece {
	return piece{typ: typ, text: clip(strings.TrimSpace(text), c.opts.MaxTextBytes), at: ev.Time, eventID: ev.ID,
		prov: defaultProvenance(typ), ord: c.ord}
}

func (c *cutter) cut(ev *abi.Event) {
	c.ord++
	if ev.CorrelationID != c.loop && ev.Type != abi.SubjectIntentStarted {
		return
	}
	switch {
	case ev.Type == abi.SubjectIntentStarted:
		var d abi.IntentStarted
		if abi.DecodeIntentStarted(ev.Data, &d) != nil || d.RunLoopID != c.loop {
			return
		}
		if d.MessageID != "" {
			c.users[d.MessageID] = true
		}
		if strings.TrimSpace(d.Goal) != "" {
			it := c.current()
			it.users = append(it.users, c.piece(abi.MemorySegmentUserMessage, d.Goal, ev))
		}
	case ev.Type == abi.SubjectUserMessage || isAgentMessage(ev.Type):
		var m abi.UserMessage
		if abi.DecodeUserMessage(ev.Data, &m) != nil || strings.TrimSpace(m.Text) == "" {
			return
		}
		if m.MessageID != "" {
			if c.users[m.MessageID] {
				return // the raw message and its routed copy are one message
			}
			c.users[m.MessageID] = true
		}
		it := c.current()
		if it.decided {
			it = &iteration{}
			c.its = append(c.its, it)
		}
		it.users = append(it.users, c.piece(abi.MemorySegmentUserMessage, m.Text, ev))
	case ev.Type == abi.SubjectAgentThought:
		var t abi.Thought
		if msgpack.Unmarshal(ev.Data, &t) != nil {
			return
		}
		_, it := c.decision(t.Tick)
		if c.opts.KeepReasoning && strings.TrimSpace(t.Text) != "" {
			it.reason = append(it.reason, c.piece(abi.MemorySegmentReasoning, t.Text, ev))
		}
	case ev.Type == abi.SubjectAgentAction:
		var a abi.ActionEvent
		if abi.DecodeActionEvent(ev.Data, &a) != nil || a.Type == abi.ActionNoop || a.Type == "" {
			return
		}
		i, it := c.decision(a.Tick)
		c.byAction[ev.ID] = i
		if a.Type == abi.ActionToolCall {
			c.calls[ev.ID] = callText(a.Tool, a.Args)
		}
		if p, ok := c.action(&a, ev); ok {
			it.actions = append(it.actions, p)
		}
	case ev.Type == abi.SubjectToolInvoke:
		// The action already said it, unless the action is missing.
		var d abi.ToolInvoke
		if msgpack.Unmarshal(ev.Data, &d) != nil {
			return
		}
		if _, ok := c.byAction[d.ActionID]; !ok {
			i, it := c.decision(0)
			c.byAction[d.ActionID] = i
			c.calls[d.ActionID] = callText(d.Tool, d.Args)
			it.actions = append(it.actions, c.piece(abi.MemorySegmentToolCall, c.calls[d.ActionID], ev))
		}
	case ev.Type == abi.SubjectToolResult:
		var d abi.ToolResultEvent
		if msgpack.Unmarshal(ev.Data, &d) != nil {
			return
		}
		id := d.ActionID
		if id == "" {
			id = ev.CausationID
		}
		it := c.answering(id)
		if d.ProcessID != "" {
			c.byProcess[d.ProcessID] = id
		}
		if d.ProcessID != "" && d.Status == abi.StatusDone && d.Error == "" && len(d.Result) == 0 {
			return // only "started": the process's note says how it went
		}
		p := c.piece(abi.MemorySegmentToolResult, resultText(&d), ev)
		p.context = c.calls[id]
		p.prov = toolProvenance(d.Tool)
		p.data = wordsOf(d.Error + "\n" + valueText(d.Result))
		it.results = append(it.results, p)
	case ev.Type == abi.SubjectProcessSpawned:
		// Only to know which action a later note is about.
		var d struct {
			ProcessID string `msgpack:"processId"`
		}
		if msgpack.Unmarshal(ev.Data, &d) == nil && d.ProcessID != "" && ev.CausationID != "" {
			c.byProcess[d.ProcessID] = ev.CausationID
		}
	case ev.Type == abi.SubjectAgentNote:
		var n abi.Note
		if msgpack.Unmarshal(ev.Data, &n) != nil {
			return
		}
		action := c.byProcess[n.ProcessID]
		it := c.answering(action)
		p := c.piece(abi.MemorySegmentToolResult, noteText(&n), ev)
		p.context = c.calls[action]
		p.prov = Provenance{Origin: abi.MemoryOriginProcess, Source: clip(strings.Join(n.Argv, " "), 200)}
		p.data = wordsOf(n.Text + "\n" + strings.Join(n.LastLines, "\n"))
		it.results = append(it.results, p)
	case ev.Type == abi.SubjectIntentEnded:
		var d abi.IntentEnded
		if msgpack.Unmarshal(ev.Data, &d) != nil {
			return
		}
		text := strings.TrimSpace(d.Summary)
		if text == "" {
			return
		}
		if d.Status != "" && d.Status != "done" {
			text = "Ended (" + strings.ReplaceAll(d.Status, "_", " ") + "): " + text
		}
		p := c.piece(abi.MemorySegmentResponse, text, ev)
		c.ended = &p
	}
}

func isAgentMessage(subject string) bool { return abi.IsAgentMessageSubject(subject) }

// action renders a policy's action as a segment.
func (c *cutter) action(a *abi.ActionEvent, ev *abi.Event) (piece, bool) {
	switch a.Type {
	case abi.ActionSay, abi.ActionQuery:
		if strings.TrimSpace(a.Text) == "" {
			return piece{}, false
		}
		return c.piece(abi.MemorySegmentResponse, a.Text, ev), true
	case abi.ActionToolCall:
		return c.piece(abi.MemorySegmentToolCall, callText(a.Tool, a.Args), ev), true
	case abi.ActionCancel:
		text := "cancel the run loop"
		if a.Reason != "" {
			text += ": " + a.Reason
		}
		return c.piece(abi.MemorySegmentToolCall, text, ev), true
	}
	return piece{}, false
}

// finish numbers the iterations that hold something and their segments.
func (c *cutter) finish() []Segment {
	if c.ended != nil {
		repeat := false
		for _, it := range c.its {
			for _, p := range it.actions {
				repeat = repeat || (p.typ == abi.MemorySegmentResponse && p.text == c.ended.text)
			}
		}
		if !repeat {
			it := c.current()
			it.results = append(it.results, *c.ended)
		}
	}
	c.markQuotes()
	var out []Segment
	n := 0
	for _, it := range c.its {
		if it.empty() {
			continue
		}
		k := 0
		for _, part := range [][]piece{it.users, it.reason, it.actions, it.results} {
			for _, p := range part {
				if p.text == "" {
					continue
				}
				out = append(out, Segment{
					Anchor:     Anchor{RunLoopID: c.loop, IterationIndex: n, SegmentIndex: k, SegmentType: p.typ, Timestamp: p.at},
					Text:       p.text,
					Context:    clip(p.context, c.opts.MaxTextBytes),
					EventID:    p.eventID,
					Provenance: p.prov,
				})
				k++
			}
		}
		if k > 0 {
			n++
		}
	}
	return out
}

// markQuotes gives an agent's reply or call that repeats an earlier result
// of the run loop verbatim the result's provenance, marked as a quote: the
// words are the tool's, whoever repeated them.
func (c *cutter) markQuotes() {
	var results []*piece
	var agent []*piece
	for _, it := range c.its {
		for i := range it.results {
			if p := &it.results[i]; p.prov.IsData() {
				results = append(results, p)
			} else {
				agent = append(agent, p)
			}
		}
		for i := range it.actions {
			agent = append(agent, &it.actions[i])
		}
	}
	if len(results) == 0 {
		return
	}
	for _, a := range agent {
		w := wordsOf(a.text)
		for _, r := range results {
			if r.ord < a.ord && quotes(w, r.data, wordsOf(r.context)) {
				a.prov = r.prov
				a.prov.Quotes = true
				break
			}
		}
	}
}

func callText(tool, args string) string {
	args = strings.TrimSpace(args)
	if args == "" || args == "{}" {
		return "call " + tool
	}
	return "call " + tool + " " + args
}

func resultText(d *abi.ToolResultEvent) string {
	var b strings.Builder
	b.WriteString(d.Tool)
	b.WriteString(" ")
	b.WriteString(strings.ReplaceAll(d.Status, "_", " "))
	if d.Error != "" {
		b.WriteString(": ")
		b.WriteString(d.Error)
	}
	if len(d.Result) > 0 {
		if v := valueText(d.Result); v != "" {
			b.WriteString(": ")
			b.WriteString(v)
		}
	}
	if d.ProcessID != "" {
		b.WriteString(" (process ")
		b.WriteString(d.ProcessID)
		b.WriteString(")")
	}
	return b.String()
}

// valueText renders a MsgPack value: a string as it is, anything else as
// JSON where it can.
func valueText(raw msgpack.RawMessage) string {
	var v any
	if msgpack.Unmarshal(raw, &v) != nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	if b, err := json.Marshal(v); err == nil {
		return string(b)
	}
	return fmt.Sprint(v)
}

func noteText(n *abi.Note) string {
	var b strings.Builder
	b.WriteString("process")
	if len(n.Argv) > 0 {
		b.WriteString(" `")
		b.WriteString(strings.Join(n.Argv, " "))
		b.WriteString("`")
	}
	if n.Status != "" {
		b.WriteString(" ")
		b.WriteString(n.Status)
	}
	if n.ExitCode != nil {
		fmt.Fprintf(&b, " with exit code %d", *n.ExitCode)
	}
	if n.Duration > 0 {
		fmt.Fprintf(&b, " after %s", n.Duration.Round(time.Millisecond))
	}
	if n.Text != "" {
		b.WriteString(": ")
		b.WriteString(n.Text)
	}
	if len(n.LastLines) > 0 {
		b.WriteString("\nlast lines:\n")
		b.WriteString(strings.Join(n.LastLines, "\n"))
	}
	if len(n.Artifacts) > 0 {
		b.WriteString("\nartifacts: ")
		b.WriteString(strings.Join(n.Artifacts, ", "))
	}
	return b.String()
}

// clip cuts s to at most max bytes at a character boundary, marking the cut.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const mark = "…"
	cut := max - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
