package telemetry

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/vmihailenco/msgpack/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// A run loop is a trace; the Builder makes its spans from the events the
// log holds about it, in sequence order, each span when the event that
// completes it arrives:
//
//	invoke_agent AGENT          kairo.intent.started → kairo.intent.ended
//	├─ iteration N              a tick in which the policy acted for the run loop → the next such tick, or the end
//	│  ├─ decide                the tick's time → its kairo.agent.tick record
//	│  │  └─ chat MODEL         kairo.llm.request → kairo.llm.response, the policy's call the tick's decision answers
//	│  └─ execute_tool TOOL     the tool_call action → its kairo.tool.result
//	│     └─ process NAME       kairo.process.spawned (caused by the action) → exited
//	└─ chat MODEL               a request not made while deciding (a summary)
//
// A policy's model call names no run loop: it is asked about everything
// the agent observed, often before the run loop it starts exists. Its
// answer reaches the policy in a later tick, whose record counts the
// answers it carried (TickRecord.Results): the calls answered first are
// that tick's, and each run loop it acted for shows them under its
// decision. A call is the agent's whose message caused it (the policy
// names the message as its cause), so two agents' calls answered in the
// other order stay each under its own agent's decision; a call caused by
// no message the builder saw (an observation) goes to the next tick of
// any agent.
//
// Every id is derived from the events (the trace id is the run loop's id,
// a span's id a hash of the event that opens it), so a span exported again
// is the same span. Only what the writer a subject belongs to published is
// read: an agent's records from "agent/ID", processes from the kernel, the
// model's from the LLM provider, and only this host's events (Event.Host is
// the store's word on a shared log); anything else is passed by.

// Span is a finished span, before it becomes the SDK's.
type Span struct {
	Trace  trace.TraceID
	ID     trace.SpanID
	Parent trace.SpanID // zero for a run loop's root
	Name   string
	Kind   trace.SpanKind
	Start  time.Time
	End    time.Time
	Attrs  []attribute.KeyValue
	Status codes.Code
	Msg    string // the status description of an error
	Links  []trace.Link
	// Seq is the sequence number of the event that completed the span.
	Seq uint64
}

// The sources whose events the builder reads.
const (
	procSource = "kernel/proc"
	llmSource  = "host/llm"
)

// Bounds of what the builder holds between an event that opens a span and
// the one that ends it. Past one, the new span is not made, and counted.
const (
	maxLoops    = 4096
	maxActions  = 16384
	maxProcs    = 16384
	maxRequests = 4096
	maxLLMHeld  = 64  // the policies' answered model calls waiting for the tick that carries them
	maxMessages = 256 // the messages remembered, to tell whose a policy's call is
	maxClip     = 256
)

// State is what the builder holds between events: the spans that have
// begun and not ended. It is plain data, so that the exporter can keep it
// beside its place in the log and resume after a restart.
type State struct {
	Loops    map[string]*LoopState    `json:"loops,omitempty"`
	Actions  map[string]*ActionState  `json:"actions,omitempty"`
	Procs    map[string]*ProcState    `json:"procs,omitempty"`
	Requests map[string]*RequestState `json:"requests,omitempty"`
	// Ticks are, per agent source, the run loops the policy acted for in
	// a tick whose record has not come yet, with the actions of each.
	Ticks map[string]map[string]*TickActs `json:"ticks,omitempty"`
	// Answered are the policies' finished model calls, oldest first,
	// waiting for the tick record that counts their answers.
	Answered []HeldCall `json:"answered,omitempty"`
	// Messages are the latest messages routed to an agent (event id →
	// agent), so that a policy's model call, caused by one, is known to
	// be that agent's.
	Messages []MessageRef `json:"messages,omitempty"`
}

// MessageRef is a message routed to an agent: kairo.agent.ID.message, as
// the agent published it.
type MessageRef struct {
	Event string `json:"event"`
	Agent string `json:"agent"`
}

// LoopState is an open run loop.
type LoopState struct {
	Agent      string    `json:"agent"`
	Goal       string    `json:"goal,omitempty"`
	Start      time.Time `json:"start"`
	Seq        uint64    `json:"seq"`
	AskAction  string    `json:"askAction,omitempty"`
	AskLoop    string    `json:"askLoop,omitempty"`
	AskAgent   string    `json:"askAgent,omitempty"`
	Iterations int       `json:"iterations,omitempty"`
	// The open iteration: its tick, when it began, its record's seq.
	IterTick uint64    `json:"iterTick,omitempty"`
	IterAt   time.Time `json:"iterAt,omitzero"`
	IterSeq  uint64    `json:"iterSeq,omitempty"`
	// Ended is set once it ended, while its last decision's tick record
	// is still to come.
	Ended *EndState `json:"ended,omitempty"`
}

// EndState is how a run loop ended.
type EndState struct {
	Time    time.Time `json:"time"`
	Seq     uint64    `json:"seq"`
	Status  string    `json:"status"`
	Summary string    `json:"summary,omitempty"`
}

// HeldCall is a finished model call: its request and its response event.
type HeldCall struct {
	Request  string       `json:"request"` // the request event's id
	State    RequestState `json:"state"`
	Response abi.Event    `json:"response"`
}

// ActionState is a tool call that has not had its result.
type ActionState struct {
	Loop  string    `json:"loop"`
	Tool  string    `json:"tool"`
	Tick  uint64    `json:"tick"`
	Start time.Time `json:"start"`
	Seq   uint64    `json:"seq"`
	// InIteration is set once the tick's record came: the call is its
	// iteration's; until then, the root's.
	InIteration bool `json:"inIteration,omitempty"`
}

// ProcState is a running process of a run loop.
type ProcState struct {
	Loop   string    `json:"loop"`
	Action string    `json:"action"`
	Event  string    `json:"event"` // the spawned event's id
	Argv   []string  `json:"argv,omitempty"`
	PID    int       `json:"pid,omitempty"`
	Start  time.Time `json:"start"`
	Seq    uint64    `json:"seq"`
}

// RequestState is a model call waiting for its response.
type RequestState struct {
	Loop string `json:"loop,omitempty"` // "" for a policy's call
	// Agent is the agent whose message caused a policy's call; "" when
	// the log does not say.
	Agent   string    `json:"agent,omitempty"`
	Model   string    `json:"model,omitempty"`
	Server  string    `json:"server,omitempty"`
	Purpose string    `json:"purpose,omitempty"`
	Start   time.Time `json:"start"`
	Seq     uint64    `json:"seq"`
}

// TickActs are the tool calls of one run loop in one tick.
type TickActs struct {
	Tick    uint64   `json:"tick"`
	Actions []string `json:"actions,omitempty"` // tool call action ids
	Kinds   []string `json:"kinds,omitempty"`   // what it decided: "say", "tool_call TOOL"…
}

// Builder turns events into spans. It is not safe for concurrent use.
type Builder struct {
	host string
	st   State
	// only, when set, limits the builder to these run loops (an export of
	// chosen ones).
	only    map[string]bool
	dropped atomic.Uint64
}

// Dropped counts the spans not made because a bound was reached. It may be
// read while the builder works.
func (b *Builder) Dropped() uint64 { return b.dropped.Load() }

// NewBuilder returns a builder of the spans of host's run loops ("" on a
// store of one host), resuming from st when it is not nil.
func NewBuilder(host string, st *State) *Builder {
	b := &Builder{host: host}
	if st != nil {
		b.st = *st
	}
	if b.st.Loops == nil {
		b.st.Loops = map[string]*LoopState{}
	}
	if b.st.Actions == nil {
		b.st.Actions = map[string]*ActionState{}
	}
	if b.st.Procs == nil {
		b.st.Procs = map[string]*ProcState{}
	}
	if b.st.Requests == nil {
		b.st.Requests = map[string]*RequestState{}
	}
	if b.st.Ticks == nil {
		b.st.Ticks = map[string]map[string]*TickActs{}
	}
	return b
}

// Only limits the builder to the run loops named.
func (b *Builder) Only(loops ...string) {
	b.only = map[string]bool{}
	for _, l := range loops {
		b.only[l] = true
	}
}

// State is what the builder holds; it stays the builder's.
func (b *Builder) State() *State { return &b.st }

// Open reports whether run loop id has begun and not ended.
func (b *Builder) Open(id string) bool { return b.st.Loops[id] != nil }

// Interesting reports whether the builder reads events of this subject:
// the exporter decodes nothing else.
func Interesting(subject string) bool {
	switch subject {
	case abi.SubjectIntentStarted, abi.SubjectIntentEnded, abi.SubjectAgentAction, abi.SubjectAgentTick,
		abi.SubjectToolResult, abi.SubjectProcessSpawned, abi.SubjectProcessExited, abi.SubjectProcessInterrupted,
		abi.SubjectLLMRequest, abi.SubjectLLMResponse:
		return true
	}
	return agentMessage(subject) != ""
}

// agentMessage is ID of a subject kairo.agent.ID.message, else "".
func agentMessage(subject string) string {
	id, ok := strings.CutPrefix(subject, "kairo.agent.")
	if !ok {
		return ""
	}
	id, ok = strings.CutSuffix(id, ".message")
	if !ok || id == "" || strings.Contains(id, ".") {
		return ""
	}
	return id
}

// Add reads one event and appends the spans it completes to out.
func (b *Builder) Add(ev *abi.Event, out []Span) []Span {
	if ev.Host != b.host || !Interesting(ev.Type) {
		return out
	}
	switch ev.Type {
	case abi.SubjectIntentStarted:
		b.started(ev)
	case abi.SubjectIntentEnded:
		out = b.ended(ev, out)
	case abi.SubjectAgentAction:
		b.action(ev)
	case abi.SubjectAgentTick:
		out = b.tick(ev, out)
	case abi.SubjectToolResult:
		out = b.toolResult(ev, out)
	case abi.SubjectProcessSpawned:
		b.spawned(ev)
	case abi.SubjectProcessExited, abi.SubjectProcessInterrupted:
		out = b.exited(ev, out)
	case abi.SubjectLLMRequest:
		b.request(ev)
	case abi.SubjectLLMResponse:
		out = b.response(ev, out)
	default:
		if id := agentMessage(ev.Type); id != "" && ev.Source == "agent/"+id {
			if len(b.st.Messages) >= maxMessages {
				b.st.Messages = b.st.Messages[1:]
			}
			b.st.Messages = append(b.st.Messages, MessageRef{Event: ev.ID, Agent: id})
		}
	}
	return out
}

// loopOf is the open run loop ev belongs to, when ev's source is the
// agent that runs it.
func (b *Builder) loopOf(ev *abi.Event) *LoopState {
	l := b.st.Loops[ev.CorrelationID]
	if l == nil || ev.Source != "agent/"+l.Agent {
		return nil
	}
	return l
}

func (b *Builder) started(ev *abi.Event) {
	var d abi.IntentStarted
	if msgpack.Unmarshal(ev.Data, &d) != nil || d.RunLoopID == "" || ev.Source != "agent/"+d.Agent ||
		b.st.Loops[d.RunLoopID] != nil || (b.only != nil && !b.only[d.RunLoopID]) {
		return
	}
	if len(b.st.Loops) >= maxLoops {
		b.dropped.Add(1)
		return
	}
	l := &LoopState{Agent: d.Agent, Goal: clip(d.Goal), Start: ev.Time, Seq: ev.Seq}
	if a := d.Ask; a != nil {
		l.AskAction, l.AskLoop, l.AskAgent = a.ActionID, a.RunLoopID, a.Agent
	}
	b.st.Loops[d.RunLoopID] = l
}

func (b *Builder) action(ev *abi.Event) {
	l := b.loopOf(ev)
	if l == nil {
		return
	}
	var d abi.ActionEvent
	if msgpack.Unmarshal(ev.Data, &d) != nil {
		return
	}
	ticks := b.st.Ticks[ev.Source]
	if ticks == nil {
		ticks = map[string]*TickActs{}
		b.st.Ticks[ev.Source] = ticks
	}
	ta := ticks[ev.CorrelationID]
	if ta == nil || ta.Tick != d.Tick {
		ta = &TickActs{Tick: d.Tick}
		ticks[ev.CorrelationID] = ta
	}
	kind := d.Type
	if d.Tool != "" {
		kind += " " + clip(d.Tool)
	}
	if len(ta.Kinds) < 64 {
		ta.Kinds = append(ta.Kinds, kind)
	}
	if d.Type != "tool_call" {
		return
	}
	if len(b.st.Actions) >= maxActions {
		b.dropped.Add(1)
		return
	}
	b.st.Actions[ev.ID] = &ActionState{Loop: ev.CorrelationID, Tool: clip(d.Tool), Tick: d.Tick, Start: ev.Time, Seq: ev.Seq}
	if len(ta.Actions) < 256 {
		ta.Actions = append(ta.Actions, ev.ID)
	}
}

// tick reads an agent's tick record: each run loop the policy acted for
// in it begins an iteration (ending its last), whose decision span ends
// now and holds the model calls made for it.
func (b *Builder) tick(ev *abi.Event, out []Span) []Span {
	if !strings.HasPrefix(ev.Source, "agent/") {
		return out
	}
	ticks := b.st.Ticks[ev.Source]
	var d abi.TickRecord
	if msgpack.Unmarshal(ev.Data, &d) != nil {
		return out
	}
	// The model calls whose answers the tick carried: its decision's, the
	// oldest of this agent's (or of no agent the log names).
	var calls []HeldCall
	agent := strings.TrimPrefix(ev.Source, "agent/")
	kept := b.st.Answered[:0]
	for _, h := range b.st.Answered {
		if len(calls) < d.Results && (h.State.Agent == "" || h.State.Agent == agent) {
			calls = append(calls, h)
		} else {
			kept = append(kept, h)
		}
	}
	clear(b.st.Answered[len(kept):])
	b.st.Answered = kept
	for id, ta := range ticks {
		l := b.st.Loops[id]
		if ta.Tick != d.Tick {
			if l != nil && l.Ended != nil && ta.Tick < d.Tick {
				// Its last decision went unrecorded: end it without.
				delete(ticks, id)
				out = b.finish(id, l, l.Ended.Time, ev.Seq, out)
			}
			continue
		}
		delete(ticks, id)
		if l == nil {
			continue
		}
		out = b.endIteration(id, l, d.At, ev.Seq, out)
		l.Iterations++
		l.IterTick, l.IterAt, l.IterSeq = d.Tick, d.At, ev.Seq
		iter := iterationID(id, d.Tick)
		decide := Span{Trace: traceID(id), ID: spanID("decide", id+"/"+strconv.FormatUint(d.Tick, 10)), Parent: iter,
			Name: "decide", Start: d.At, End: ev.Time, Seq: ev.Seq,
			Attrs: []attribute.KeyValue{
				attribute.Int64("kairo.tick", int64(d.Tick)), attribute.Int64("kairo.seq", int64(ev.Seq)),
				attribute.Float64("kairo.agent.hz", d.Hz), attribute.StringSlice("kairo.decision", ta.Kinds),
				attribute.String("gen_ai.agent.name", l.Agent),
			}}
		out = append(out, decide)
		for _, h := range calls {
			out = append(out, llmSpan(h, id, decide.ID, ev.Seq))
		}
		for _, a := range ta.Actions {
			if as := b.st.Actions[a]; as != nil {
				as.InIteration = true
			}
		}
		if l.Ended != nil {
			out = b.finish(id, l, ev.Time, ev.Seq, out)
		}
	}
	if len(ticks) == 0 {
		delete(b.st.Ticks, ev.Source)
	}
	return out
}

// endIteration ends run loop id's open iteration, if it has one, at end.
func (b *Builder) endIteration(id string, l *LoopState, end time.Time, seq uint64, out []Span) []Span {
	if l.Iterations == 0 || l.IterAt.IsZero() {
		return out
	}
	out = append(out, Span{Trace: traceID(id), ID: iterationID(id, l.IterTick), Parent: spanID("run", id),
		Name: "iteration " + strconv.Itoa(l.Iterations), Start: l.IterAt, End: end, Seq: seq,
		Attrs: []attribute.KeyValue{
			attribute.Int("kairo.iteration", l.Iterations), attribute.Int64("kairo.tick", int64(l.IterTick)),
			attribute.Int64("kairo.seq", int64(l.IterSeq)), attribute.Int64("kairo.seq.end", int64(seq)),
		}})
	l.IterAt = time.Time{}
	return out
}

func (b *Builder) ended(ev *abi.Event, out []Span) []Span {
	l := b.loopOf(ev)
	if l == nil || l.Ended != nil {
		return out
	}
	var d abi.IntentEnded
	if msgpack.Unmarshal(ev.Data, &d) != nil {
		return out
	}
	l.Ended = &EndState{Time: ev.Time, Seq: ev.Seq, Status: d.Status, Summary: clip(d.Summary)}
	if ta := b.st.Ticks[ev.Source][ev.CorrelationID]; ta != nil {
		// The decision that ended it is recorded with its tick, next: the
		// run loop's last spans wait for that record.
		return out
	}
	return b.finish(ev.CorrelationID, l, ev.Time, ev.Seq, out)
}

// finish makes a run loop's last spans: its open iteration, the model
// calls still held, and its root, ending at end (when its last event, seq,
// came).
func (b *Builder) finish(id string, l *LoopState, end time.Time, seq uint64, out []Span) []Span {
	delete(b.st.Loops, id)
	out = b.endIteration(id, l, end, seq, out)
	root := spanID("run", id)
	s := Span{Trace: traceID(id), ID: root, Name: "invoke_agent " + l.Agent, Start: l.Start, End: end, Seq: seq,
		Attrs: []attribute.KeyValue{
			attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", l.Agent),
			attribute.String("kairo.run_loop.id", id), attribute.String("kairo.run_loop.goal", l.Goal),
			attribute.String("kairo.run_loop.status", l.Ended.Status), attribute.Int("kairo.run_loop.iterations", l.Iterations),
			attribute.Int64("kairo.seq", int64(l.Seq)), attribute.Int64("kairo.seq.end", int64(l.Ended.Seq)),
		}}
	if b.host != "" {
		s.Attrs = append(s.Attrs, attribute.String("kairo.host", b.host))
	}
	if l.AskLoop != "" {
		s.Attrs = append(s.Attrs, attribute.String("kairo.ask.run_loop.id", l.AskLoop), attribute.String("kairo.ask.agent", l.AskAgent))
		s.Links = append(s.Links, trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: traceID(l.AskLoop), SpanID: spanID("tool", l.AskAction), TraceFlags: trace.FlagsSampled, Remote: true,
		}), Attributes: []attribute.KeyValue{attribute.String("kairo.link", "asked by")}})
	}
	if l.Ended.Status == abi.StatusFailed {
		s.Status, s.Msg = codes.Error, l.Ended.Summary
	}
	return append(out, s)
}

func (b *Builder) toolResult(ev *abi.Event, out []Span) []Span {
	var d abi.ToolResultEvent
	if msgpack.Unmarshal(ev.Data, &d) != nil {
		return out
	}
	a := b.st.Actions[d.ActionID]
	if a == nil || a.Loop != ev.CorrelationID {
		return out
	}
	if l := b.st.Loops[a.Loop]; l != nil && ev.Source != "agent/"+l.Agent {
		return out
	}
	delete(b.st.Actions, d.ActionID)
	parent := spanID("run", a.Loop)
	if a.InIteration {
		parent = iterationID(a.Loop, a.Tick)
	}
	s := Span{Trace: traceID(a.Loop), ID: spanID("tool", d.ActionID), Parent: parent, Name: "execute_tool " + a.Tool,
		Start: a.Start, End: ev.Time, Seq: ev.Seq,
		Attrs: []attribute.KeyValue{
			attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", a.Tool),
			attribute.String("gen_ai.tool.call.id", d.ActionID), attribute.String("kairo.tool.status", d.Status),
			attribute.Int64("kairo.tick", int64(a.Tick)),
			attribute.Int64("kairo.seq", int64(a.Seq)), attribute.Int64("kairo.seq.end", int64(ev.Seq)),
		}}
	if d.ProcessID != "" {
		s.Attrs = append(s.Attrs, attribute.String("kairo.process.id", d.ProcessID))
	}
	if d.Status == abi.StatusFailed {
		s.Status, s.Msg = codes.Error, clip(d.Error)
		s.Attrs = append(s.Attrs, attribute.String("error.type", "tool_failed"))
	}
	return append(out, s)
}

func (b *Builder) spawned(ev *abi.Event) {
	if ev.Source != procSource || b.st.Loops[ev.CorrelationID] == nil {
		return
	}
	var d abi.ProcessSpawned
	if msgpack.Unmarshal(ev.Data, &d) != nil || d.ProcessID == "" {
		return
	}
	if len(b.st.Procs) >= maxProcs {
		b.dropped.Add(1)
		return
	}
	argv := d.Argv
	if len(argv) > 32 {
		argv = argv[:32]
	}
	clipped := make([]string, len(argv))
	for i, a := range argv {
		clipped[i] = clip(a)
	}
	b.st.Procs[d.ProcessID] = &ProcState{Loop: ev.CorrelationID, Action: ev.CausationID, Event: ev.ID,
		Argv: clipped, PID: d.PID, Start: ev.Time, Seq: ev.Seq}
}

func (b *Builder) exited(ev *abi.Event, out []Span) []Span {
	var d abi.ProcessExitedEvent // a ProcessInterrupted's id and reason read as these
	if msgpack.Unmarshal(ev.Data, &d) != nil {
		return out
	}
	p := b.st.Procs[d.ProcessID]
	if p == nil {
		return out
	}
	if ev.Type == abi.SubjectProcessInterrupted {
		// The agent says so of its own run loop's process, after a restart.
		if l := b.st.Loops[p.Loop]; l == nil || ev.Source != "agent/"+l.Agent {
			return out
		}
		d.Status = "interrupted"
	} else if ev.Source != procSource {
		return out
	}
	delete(b.st.Procs, d.ProcessID)
	name := "process"
	if len(p.Argv) > 0 {
		name += " " + path.Base(p.Argv[0])
	}
	parent := spanID("run", p.Loop)
	if p.Action != "" {
		parent = spanID("tool", p.Action)
	}
	s := Span{Trace: traceID(p.Loop), ID: spanID("process", p.Event), Parent: parent, Name: name,
		Start: p.Start, End: ev.Time, Seq: ev.Seq,
		Attrs: []attribute.KeyValue{
			attribute.String("kairo.process.id", d.ProcessID), attribute.String("kairo.process.status", d.Status),
			attribute.Int("process.pid", p.PID), attribute.StringSlice("process.command_args", p.Argv),
			attribute.Int64("kairo.seq", int64(p.Seq)), attribute.Int64("kairo.seq.end", int64(ev.Seq)),
		}}
	if len(p.Argv) > 0 {
		s.Attrs = append(s.Attrs, attribute.String("process.command", p.Argv[0]))
	}
	if d.ExitCode != nil {
		s.Attrs = append(s.Attrs, attribute.Int("process.exit.code", *d.ExitCode))
		if *d.ExitCode != 0 {
			s.Status, s.Msg = codes.Error, "exit code "+strconv.Itoa(*d.ExitCode)
		}
	}
	if d.Signal != "" {
		s.Attrs = append(s.Attrs, attribute.String("kairo.process.signal", d.Signal))
	}
	if d.Reason != "" {
		s.Attrs = append(s.Attrs, attribute.String("kairo.process.reason", clip(d.Reason)))
	}
	return append(out, s)
}

// request reads a model call: a policy's (no purpose), whatever run loop
// it names, or another's of an open run loop.
func (b *Builder) request(ev *abi.Event) {
	if ev.Source != llmSource {
		return
	}
	var d abi.LLMRequest
	if msgpack.Unmarshal(ev.Data, &d) != nil {
		return
	}
	loop := ev.CorrelationID
	if d.Params.Purpose == "" {
		loop = ""
	} else if b.st.Loops[loop] == nil {
		return
	}
	if len(b.st.Requests) >= maxRequests {
		b.dropped.Add(1)
		return
	}
	r := &RequestState{Loop: loop, Model: clip(d.Model), Purpose: clip(d.Params.Purpose), Start: ev.Time, Seq: ev.Seq}
	if loop == "" {
		for _, m := range b.st.Messages {
			if m.Event == ev.CausationID {
				r.Agent = m.Agent
			}
		}
	}
	if i := strings.Index(d.Endpoint, "://"); i >= 0 {
		host := d.Endpoint[i+3:]
		if j := strings.IndexByte(host, '/'); j >= 0 {
			host = host[:j]
		}
		r.Server = clip(host)
	}
	b.st.Requests[ev.ID] = r
}

func (b *Builder) response(ev *abi.Event, out []Span) []Span {
	r := b.st.Requests[ev.CausationID]
	if ev.Source != llmSource || r == nil {
		return out
	}
	delete(b.st.Requests, ev.CausationID)
	h := HeldCall{Request: ev.CausationID, State: *r, Response: *ev}
	h.Response.Data = append([]byte(nil), ev.Data...) // the event is the bus's
	if r.Loop != "" {
		// Not a decision's (a summary): under the root.
		if b.st.Loops[r.Loop] == nil {
			return out
		}
		return append(out, llmSpan(h, r.Loop, spanID("run", r.Loop), ev.Seq))
	}
	if len(b.st.Answered) >= maxLLMHeld {
		b.st.Answered = b.st.Answered[1:]
		b.dropped.Add(1)
	}
	b.st.Answered = append(b.st.Answered, h) // under a decision, when the tick that carries its answer is recorded
	return out
}

// llmSpan is the span of a model call in run loop loop's trace, under
// parent, completed by the event at seq.
func llmSpan(h HeldCall, loop string, parent trace.SpanID, seq uint64) Span {
	r, ev := &h.State, &h.Response
	s := Span{Trace: traceID(loop), ID: spanID("llm", h.Request), Parent: parent,
		Name: "chat " + r.Model, Kind: trace.SpanKindClient, Start: r.Start, End: ev.Time, Seq: seq,
		Attrs: []attribute.KeyValue{
			attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.system", "openai"),
			attribute.String("gen_ai.provider.name", "openai"), attribute.String("gen_ai.request.model", r.Model),
			attribute.Int64("kairo.seq", int64(r.Seq)), attribute.Int64("kairo.seq.end", int64(ev.Seq)),
		}}
	if r.Server != "" {
		s.Attrs = append(s.Attrs, attribute.String("server.address", r.Server))
	}
	if r.Purpose != "" {
		s.Attrs = append(s.Attrs, attribute.String("kairo.llm.purpose", r.Purpose))
	}
	var d abi.LLMResponse
	if msgpack.Unmarshal(ev.Data, &d) != nil {
		s.Status, s.Msg = codes.Error, "the response's record does not decode"
		return s
	}
	s.Attrs = append(s.Attrs, attribute.Int("kairo.llm.attempts", d.Attempts))
	if res := d.Result; res != nil {
		s.Attrs = append(s.Attrs,
			attribute.String("gen_ai.response.model", clip(res.Model)),
			attribute.Int("gen_ai.usage.input_tokens", res.Usage.PromptTokens),
			attribute.Int("gen_ai.usage.output_tokens", res.Usage.CompletionTokens))
		if res.FinishReason != "" {
			s.Attrs = append(s.Attrs, attribute.StringSlice("gen_ai.response.finish_reasons", []string{clip(res.FinishReason)}))
		}
	}
	if e := d.Error; e != nil {
		s.Status, s.Msg = codes.Error, clip(e.Message)
		s.Attrs = append(s.Attrs, attribute.String("error.type", clip(e.Code)))
	}
	return s
}

// traceID is a run loop's trace id: its id's 16 bytes when it is a UUID
// (so a trace is found by the run loop's id), else a hash of it.
func traceID(loop string) trace.TraceID {
	var t trace.TraceID
	if h := strings.ReplaceAll(loop, "-", ""); len(h) == 32 {
		if _, err := hex.Decode(t[:], []byte(h)); err == nil && t.IsValid() {
			return t
		}
	}
	sum := sha256.Sum256([]byte("trace\x00" + loop))
	copy(t[:], sum[:])
	return t
}

// spanID is the id of the span of kind that event key opens.
func spanID(kind, key string) trace.SpanID {
	sum := sha256.Sum256([]byte(kind + "\x00" + key))
	var s trace.SpanID
	copy(s[:], sum[:])
	if !s.IsValid() {
		s[7] = 1
	}
	return s
}

func iterationID(loop string, tick uint64) trace.SpanID {
	return spanID("iteration", loop+"/"+strconv.FormatUint(tick, 10))
}

// TraceIDOf is the trace id of run loop id, as hex.
func TraceIDOf(loop string) string { return traceID(loop).String() }

// clip bounds a string taken from an event, at a rune boundary.
func clip(s string) string {
	if len(s) <= maxClip {
		return s
	}
	cut := maxClip
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// Forget gives up every span begun and not ended, when the events that
// would end them are passed by; it returns how many it gave up.
func (b *Builder) Forget() int {
	n := len(b.st.Loops) + len(b.st.Actions) + len(b.st.Procs) + len(b.st.Requests) + len(b.st.Answered)
	b.st.Answered = nil
	clear(b.st.Loops)
	clear(b.st.Actions)
	clear(b.st.Procs)
	clear(b.st.Requests)
	clear(b.st.Ticks)
	return n
}
