package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/llm"
)

// A replay hands a policy plugin the ticks of a recorded run loop again and
// checks that it decides what it decided then. Each recorded tick
// (kairo.agent.tick) says what the batch held: the events observed, how
// many answers to earlier calls, and where in the log the agent's state
// was, so folding the log up to there gives the run loops the policy saw.
// The policy runs alone in a kernel of its own, over a store in memory:
// nothing it does reaches the real log or starts a process. Its llm.chat is
// answered from the recorded kairo.llm.response events, each held back
// until the tick that delivered it then, so the policy sees its answers
// when it saw them. A policy must decide from its batches; state it keeps
// from before the run loop began is not replayed.

// ReplaySetup is what a replay needs.
type ReplaySetup struct {
	// Events is the log from its start, in sequence order, at least
	// through the run loop's end.
	Events []abi.Event
	// RunLoop is the run loop's id, or the end of it as `kairo runs`
	// shows it.
	RunLoop string
	// Agent, BargeIn and Skills are the agent's settings, as Config's.
	Agent   string
	BargeIn string
	Skills  []string
	// Tools are the agent's tools as the policy is shown them: today's,
	// so a tool added since the run can make a model's prompt differ.
	Tools []abi.Tool
	// Policy is the policy plugin's name.
	Policy string
	// Agents are the other agents the policy was shown (AgentInput.Agents).
	Agents []abi.AgentRef
	Logger *slog.Logger
}

// replayWait bounds each wait of a replay on the policy: for a call it
// should make, or an answer to reach it. A variable for the tests whose
// replay waits it out.
var replayWait = 10 * time.Second

// Replay is a replay of a recorded run loop, ready to run. Its caller
// puts the policy in a kernel of its own: one whose llm.chat is
// [Replay.Answers], whose log holds [Replay.Grants], and nothing else of
// the real log; then [Replay.Run] hands the policy its ticks again.
type Replay struct {
	s    ReplaySetup
	rec  *recording
	gate *gate
}

// NewReplay reads the recording of s.RunLoop from s.Events. An error means
// the replay cannot be made: no such run loop, or a log from before ticks
// were recorded.
func NewReplay(s ReplaySetup) (*Replay, error) {
	if s.Agent == "" {
		s.Agent = "default"
	}
	if s.BargeIn == "" {
		s.BargeIn = abi.BargeInBoundary
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	rec, err := readRecording(s.Events, s.RunLoop, s.Agent)
	if err != nil {
		return nil, err
	}
	answers, err := llm.NewReplay(rec.llm)
	if err != nil {
		return nil, err
	}
	return &Replay{s: s, rec: rec, gate: &gate{answers: answers, tokens: make(chan struct{})}}, nil
}

// Answers is the policy's model: the recorded answers, each held back
// until the tick that delivered it then, so the policy sees its answers
// when it saw them.
func (r *Replay) Answers() llm.Chatter { return r.gate }

// Grants are the operator's grants of plugins (kairo plugins grant) as
// they were when the run loop last decided, for the replay's log: the
// plugin engine folds them from there. Their Seq is zero.
func (r *Replay) Grants() []abi.Event {
	last := r.rec.ticks[len(r.rec.ticks)-1].Seq
	var out []abi.Event
	for _, ev := range r.s.Events {
		if ev.Seq <= last && ev.Source == abi.PrincipalHost && (ev.Type == abi.SubjectPluginGranted || ev.Type == abi.SubjectPluginRevoked) {
			ev.Seq = 0
			out = append(out, ev)
		}
	}
	return out
}

// Run re-runs the recorded decisions with the policy plugin that m runs
// and reports the first that differs. An error means the replay could not
// be made (a policy that does not run); a policy that decides otherwise is
// a Divergence in the report.
func (r *Replay) Run(ctx context.Context, m PolicyPlugins) (*abi.AgentReplayReport, error) {
	s, rec, g := r.s, r.rec, r.gate
	rep := &abi.AgentReplayReport{RunLoop: rec.loop, Goal: rec.goal, Decisions: len(rec.ticks), Unrecorded: rec.unrecorded,
		FirstTick: rec.ticks[0].Tick, LastTick: rec.ticks[len(rec.ticks)-1].Tick}
	if err := policyRunning(m, s.Policy); err != nil {
		return nil, err
	}

	st := newState(s.Agent)
	next := 0 // the next event of the log to fold
	mem := "" // the memory shown, as last recorded
	for i, tr := range rec.ticks {
		for next < len(s.Events) && s.Events[next].Seq <= tr.Seq {
			st.apply(&s.Events[next])
			next++
		}
		for _, id := range tr.Pending {
			if ev := rec.byID[id]; ev != nil {
				c := *ev
				c.Seq = 0
				st.apply(&c)
				st.own[id] = struct{}{}
			}
		}
		diverge := func(format string, args ...any) (*abi.AgentReplayReport, error) {
			rep.Divergence = &abi.AgentReplayDivergence{Tick: tr.Tick, Decision: i + 1, What: fmt.Sprintf(format, args...)}
			return rep, nil
		}
		if tr.MemoryChanged {
			mem = tr.Memory
		}
		in := &abi.AgentInput{Agent: s.Agent, Hz: tr.Hz, BargeIn: s.BargeIn, Skills: s.Skills, Tools: s.Tools, Memory: mem, Agents: s.Agents}
		for _, l := range st.open {
			in.RunLoops = append(in.RunLoops, l.view())
		}
		batch := &abi.Batch{Time: tr.At, Tick: tr.Tick, Agent: in}
		for _, id := range tr.Observed {
			ev := rec.byID[id]
			if ev == nil {
				return nil, fmt.Errorf("replay: tick %d observed event %s, which the log does not hold", tr.Tick, id)
			}
			batch.Events = append(batch.Events, *ev)
		}
		if err := g.release(ctx, m, s.Policy, tr.Results); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return diverge("%v", err)
		}
		rep.Answers += tr.Results
		reply, err := m.Decide(ctx, s.Policy, batch)
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			return diverge("the policy failed: %v", err)
		}
		if err := g.diverged(); err != nil {
			return diverge("%v", err)
		}
		now := decisions(reply, st)
		was := rec.outputs[i]
		rep.Actions += len(was) - countThoughts(was)
		rep.Thoughts += countThoughts(was)
		if what := compareDecisions(was, now); what != "" {
			return diverge("%s", what)
		}
	}
	return rep, nil
}

// recording is the part of the log a replay reads.
type recording struct {
	loop, goal string
	ticks      []abi.TickRecord // of the span, in order
	outputs    [][]string       // by tick of ticks
	llm        []abi.Event      // the model's exchanges within the span
	unrecorded int
	memory     string // the memory recorded last before the span
	byID       map[string]*abi.Event
}

// namesLoop reports whether id, as a person gives it (the whole id, or
// its end of at least 4 characters), names the run loop loop.
func namesLoop(id, loop string) bool {
	return loop == id || (len(id) >= 4 && strings.HasSuffix(loop, id))
}

// LoopAgent is the agent whose run loop id names, as its start in events
// says, the start being that agent's own record; "" when there is none.
// A replay is made with that agent's policy.
func LoopAgent(events []abi.Event, id string) string {
	for i := range events {
		ev := &events[i]
		var d abi.IntentStarted
		if ev.Type != abi.SubjectIntentStarted || abi.DecodeIntentStarted(ev.Data, &d) != nil || d.RunLoopID == "" || !namesLoop(id, d.RunLoopID) {
			continue
		}
		if ev.Source == abi.PrincipalAgent+"/"+d.Agent {
			return d.Agent
		}
	}
	return ""
}

func readRecording(events []abi.Event, id, agent string) (*recording, error) {
	rec := &recording{byID: make(map[string]*abi.Event, len(events))}
	var matches []string
	var trigger string
	for i := range events {
		ev := &events[i]
		rec.byID[ev.ID] = ev
		if ev.Type != abi.SubjectIntentStarted {
			continue
		}
		var d abi.IntentStarted
		if abi.DecodeIntentStarted(ev.Data, &d) != nil || d.Agent != agent {
			continue
		}
		if namesLoop(id, d.RunLoopID) {
			matches = append(matches, d.RunLoopID)
			rec.loop, rec.goal, trigger = d.RunLoopID, d.Goal, ev.CausationID
		}
	}
	switch {
	case len(matches) == 0:
		return nil, fmt.Errorf("replay: agent %s has no run loop %q in the log; `kairo runs` lists them", agent, id)
	case len(matches) > 1:
		return nil, fmt.Errorf("replay: %q names %d run loops (%s); give more of the id", id, len(matches), strings.Join(matches, ", "))
	}

	// The span: from the tick that observed the message opening the run
	// loop to the tick that made its last decision. A tick's actions and
	// thought are published before its record, after the last tick's.
	self := "agent/" + agent
	var lastOut uint64 // the seq of the run loop's last decision
	for i := range events {
		ev := &events[i]
		if ev.Source == self && ev.CorrelationID == rec.loop && isDecision(ev) {
			lastOut = ev.Seq
		}
	}
	type placed struct {
		tr       abi.TickRecord
		from, to uint64 // the seqs its decisions lie between
	}
	var span []placed
	var prev uint64
	for i := range events {
		ev := &events[i]
		if ev.Source != self || ev.Type != abi.SubjectAgentTick {
			continue
		}
		var tr abi.TickRecord
		if err := abi.DecodeTickRecord(ev.Data, &tr); err != nil {
			return nil, fmt.Errorf("replay: event %s (seq %d): %s data: %w", ev.ID, ev.Seq, ev.Type, err)
		}
		from := prev
		prev = ev.Seq
		if len(span) == 0 && !slices.Contains(tr.Observed, trigger) {
			if tr.MemoryChanged {
				rec.memory = tr.Memory // what the span's first tick may carry on
			}
			continue
		}
		span = append(span, placed{tr, from, ev.Seq})
		if ev.Seq > lastOut {
			break
		}
	}
	if len(span) == 0 {
		return nil, fmt.Errorf("replay: the log holds no recorded ticks (%s) of run loop %s: it ran on a Kairo that did not record them, and cannot be replayed", abi.SubjectAgentTick, rec.loop)
	}

	// What the policy decided at those ticks, in every run loop: it is one
	// policy, and the replay hands it every tick of the span.
	rec.outputs = make([][]string, len(span))
	first, end := span[0].from, span[len(span)-1].to
	requests := map[string]bool{}
	at := 0
	for i := range events {
		ev := &events[i]
		switch {
		case ev.Seq <= first || ev.Seq > end:
		case ev.Source == self && isDecision(ev):
			for at < len(span) && ev.Seq > span[at].to {
				at++
			}
			if at < len(span) && tickOf(ev) == span[at].tr.Tick {
				rec.outputs[at] = append(rec.outputs[at], describeOutput(ev))
			} else if ev.CorrelationID == rec.loop {
				rec.unrecorded++
			}
		case ev.Type == abi.SubjectLLMRequest && ev.Seq > span[0].tr.Seq && !summaryRequest(ev):
			requests[ev.ID] = true
			rec.llm = append(rec.llm, *ev)
		case ev.Type == abi.SubjectLLMResponse && requests[ev.CausationID]:
			rec.llm = append(rec.llm, *ev)
		}
	}
	for _, p := range span {
		rec.ticks = append(rec.ticks, p.tr)
	}
	if lastOut > end {
		rec.unrecorded++ // the last decision's tick went unrecorded
	}
	return rec, nil
}

// summaryRequest reports whether ev asked the model for a memory summary,
// not for the policy's decision.
func summaryRequest(ev *abi.Event) bool {
	var r abi.LLMRequest
	return msgpack.Unmarshal(ev.Data, &r) == nil && r.Params.Purpose != ""
}

// isDecision reports whether ev is an action or thought, what a policy
// decides.
func isDecision(ev *abi.Event) bool {
	return ev.Type == abi.SubjectAgentAction || ev.Type == abi.SubjectAgentThought
}

// tickOf reads the tick of an agent's action or thought.
func tickOf(ev *abi.Event) uint64 {
	if ev.Type == abi.SubjectAgentThought {
		var t abi.Thought
		msgpack.Unmarshal(ev.Data, &t)
		return t.Tick
	}
	var a abi.ActionEvent
	abi.DecodeActionEvent(ev.Data, &a)
	return a.Tick
}

// describeOutput renders a recorded action or thought as decisions renders
// a reply's, so the two compare as text.
func describeOutput(ev *abi.Event) string {
	if ev.Type == abi.SubjectAgentThought {
		var t abi.Thought
		msgpack.Unmarshal(ev.Data, &t)
		return "thought " + quote(t.Text)
	}
	var a abi.ActionEvent
	abi.DecodeActionEvent(ev.Data, &a)
	return describeAction(a.Type, &a.ActionData)
}

// decisions renders what the runtime would carry out of reply, in the order
// it publishes them: the actions it accepts, then the thought.
func decisions(reply *abi.Reply, st *state) []string {
	var out []string
	for _, a := range reply.Actions {
		var d abi.ActionData
		if len(a.Data) > 0 && abi.DecodeActionData(a.Data, &d) != nil {
			continue
		}
		switch a.Type {
		case abi.ActionSay, abi.ActionQuery, abi.ActionToolCall, abi.ActionCancel:
		default:
			continue
		}
		if a.CausationID != "" && st.routed[a.CausationID] == nil {
			continue
		}
		if id := a.CorrelationID; id != "" && a.Type != abi.ActionCancel {
			if l := st.loops[id]; l == nil || l.status != "" {
				continue
			}
		}
		out = append(out, describeAction(a.Type, &d))
	}
	if reply.Thought != "" {
		out = append(out, "thought "+quote(reply.Thought))
	}
	return out
}

func describeAction(typ string, d *abi.ActionData) string {
	var b strings.Builder
	b.WriteString(typ)
	if d.Text != "" {
		b.WriteString(" " + quote(d.Text))
	}
	if d.Tool != "" {
		b.WriteString(" " + d.Tool)
	}
	if d.Args != "" {
		b.WriteString(" " + d.Args)
	}
	if d.RunLoopID != "" {
		b.WriteString(" run=" + d.RunLoopID)
	}
	if d.Reason != "" {
		b.WriteString(" reason=" + quote(d.Reason))
	}
	if d.Done {
		b.WriteString(" (done)")
	}
	return b.String()
}

func quote(s string) string {
	const most = 200
	if len(s) > most {
		s = s[:most] + "…"
	}
	return fmt.Sprintf("%q", s)
}

func countThoughts(out []string) int {
	n := 0
	for _, o := range out {
		if strings.HasPrefix(o, "thought ") {
			n++
		}
	}
	return n
}

// compareDecisions names the first difference between what the policy
// decided at a tick then (was) and now, or returns "".
func compareDecisions(was, now []string) string {
	for i := range min(len(was), len(now)) {
		if was[i] != now[i] {
			return fmt.Sprintf("decision %d is now %s; it was %s", i+1, now[i], was[i])
		}
	}
	switch {
	case len(now) > len(was):
		return fmt.Sprintf("the policy now also decides %s", now[len(was)])
	case len(was) > len(now):
		return fmt.Sprintf("the policy no longer decides %s", was[len(now)])
	}
	return ""
}

// policyRunning waits for the replay's policy to serve.
func policyRunning(m PolicyPlugins, name string) error {
	for _, p := range m.List() {
		if p.Name != name {
			continue
		}
		if p.State != abi.PluginRunning {
			return fmt.Errorf("replay: the policy plugin %s does not run (%s): %s", name, p.State, p.Error)
		}
		return nil
	}
	return fmt.Errorf("replay: no policy plugin %q is installed; `kairo plugins` lists the plugins", name)
}

// gate answers the policy's llm.chat from the recording, each answer held
// until release lets it through, as the recorded tick that delivered it.
type gate struct {
	answers *llm.Replay
	tokens  chan struct{}

	mu      sync.Mutex
	blocked int   // calls waiting for their answer to be released
	first   error // the first divergence of a request
}

func (g *gate) Chat(ctx context.Context, p abi.ChatParams) (abi.ChatResult, error) {
	g.mu.Lock()
	g.blocked++
	g.mu.Unlock()
	select {
	case <-g.tokens: // release counted it off
	case <-ctx.Done():
		g.mu.Lock()
		g.blocked--
		g.mu.Unlock()
		return abi.ChatResult{}, ctx.Err()
	}
	res, err := g.answers.Chat(ctx, p)
	var de *llm.DivergenceError
	if errors.As(err, &de) {
		g.mu.Lock()
		if g.first == nil {
			g.first = err
		}
		g.mu.Unlock()
	}
	return res, err
}

func (g *gate) diverged() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.first
}

// release lets n answers through and waits until they wait in the policy's
// inbox: its calls still out are then only those still held.
func (g *gate) release(ctx context.Context, m PolicyPlugins, policy string, n int) error {
	for i := range n {
		select {
		case g.tokens <- struct{}{}:
			g.mu.Lock()
			g.blocked--
			g.mu.Unlock()
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(replayWait):
			return fmt.Errorf("the recorded batch carried %d answers to the policy's calls; the policy now asked %d questions", n, i)
		}
	}
	deadline := time.Now().Add(replayWait)
	for {
		g.mu.Lock()
		held := g.blocked
		g.mu.Unlock()
		if m.InFlight(policy) <= held {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("an answer to the policy did not reach it within %v", replayWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Microsecond):
		}
	}
}
