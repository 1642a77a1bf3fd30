package agent

import (
	"slices"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// state is what the event log says about the agent: its run loops, the
// actions in them and what became of each, and the user messages already
// routed. It is a fold of the log — built by replaying it at start and kept
// by applying each new event — so whatever it says, the log says: an action
// is in progress because its result is missing from the log, not because a
// flag says so. See
// docs/RATIONALE.md#what-the-agent-knows-is-a-fold-of-the-event-log.
type state struct {
	agent string
	// owner is the agent a user message is for (Router.owner); nil: the
	// agent it names, or any when it names none.
	owner    func(*abi.UserMessage) string
	loops    map[string]*runLoop
	open     []*runLoop            // oldest first
	actions  map[string]*action    // by actionId
	procs    map[string]*action    // by processId
	seen     map[string]struct{}   // messageIds routed
	unrouted map[string]*abi.Event // user messages stored but not routed yet (replay only)
	// own are the events the runtime applied as it published them; the
	// subscription, which brings them again, skips them once.
	own     map[string]struct{}
	lastSeq uint64
	// routed are the messages routed to the agent, by event id, so a
	// policy that answers a message ticks later can name it.
	routed map[string]*abi.Event
	// opened is the run loop each routed message opened, by its event id.
	opened map[string]string

	// What bounds the state by what is live: the ended run loops kept, the
	// actions of no run loop, the message ids seen and the messages
	// routed, each oldest first and cut at its window (see window).
	ended       []*runLoop
	free        []*action
	seenOrder   []string
	routedOrder []string
	// evicted counts the ended run loops dropped from the window: they
	// stay in the log, where listings and questions read them.
	evicted int
}

// The windows of what ended that the state keeps: everything open is kept
// whatever its age; of what ended, the newest. What falls out stays in the
// log. See docs/RATIONALE.md#a-start-reads-what-is-live.
const (
	maxEndedLoops  = 256  // with their actions and processes
	maxFreeActions = 1024 // actions of no run loop: answers, asides
	maxSeen        = 4096 // message ids routed, against routing one twice
	maxRouted      = 256  // routed messages a later action may name
)

type runLoop struct {
	id, goal   string
	startSeq   uint64 // of its kairo.intent.started
	openedBy   string // the routed message that opened it, if one did
	started    time.Time
	ended      time.Time
	status     string // "" while open, then an IntentEnded status
	iterations int
	lastTick   uint64
	tickCalls  int // the tool calls of lastTick
	maxIter    int
	actions    []*action
	endActions int // how many of actions it had when it ended
	messages   []string
	joined     map[string]bool // the routed messages in messages, by event id
	queries    int             // queries in a row without a user message since
	// interrupted: actions of it were interrupted (the daemon stopped
	// while they ran) and no tool call came since: it waits for the user.
	interrupted bool
	// ask: it answers another agent's ask (router.go).
	ask *abi.Ask
}

type action struct {
	id, typ, tool, args, text string
	loop                      *runLoop
	status                    string
	processID                 string
	pid                       int       // of the process, from its spawn
	spawned                   time.Time // when the kernel spawned it
	argv                      []string
	progress                  string
	result                    string
	started, ended            time.Time
	exitCode                  *int

	// What a person was asked and said: the approval before the call runs
	// (mode always) and the one to re-run it with what the sandbox refused
	// (mode on-deny), each with its state ("" none, then pending, approved
	// or denied); approvalOf is the approval a re-run holds the grants of.
	approval, approvalState string
	rerun, rerunState       string
	approvalOf              string
	invoked                 bool                // its kairo.tool.invoke is in the log
	denials                 []abi.SandboxDenied // what the sandbox refused its process, latest count each
}

func newState(agent string) *state {
	return &state{
		agent: agent, loops: map[string]*runLoop{}, actions: map[string]*action{}, procs: map[string]*action{},
		seen: map[string]struct{}{}, unrouted: map[string]*abi.Event{}, own: map[string]struct{}{},
		routed: map[string]*abi.Event{}, opened: map[string]string{},
	}
}

// apply folds one event into the state.
func (s *state) apply(ev *abi.Event) {
	if ev.Seq > s.lastSeq {
		s.lastSeq = ev.Seq
	}
	if _, ok := s.own[ev.ID]; ok && ev.Seq != 0 {
		delete(s.own, ev.ID)
		// Applied before the store gave it a seq: a run loop's start
		// learns its own now.
		var d abi.IntentStarted
		if ev.Type == abi.SubjectIntentStarted && abi.DecodeIntentStarted(ev.Data, &d) == nil {
			if l := s.loops[d.RunLoopID]; l != nil && l.startSeq == 0 {
				l.startSeq = ev.Seq
			}
		}
		return
	}
	if !trusted(ev) {
		return
	}
	if abi.IsAgentMessageSubject(ev.Type) && len(s.unrouted) > 0 {
		// Routed by whichever agent took it (one sent into another
		// agent's task): no longer this one's to route.
		var m abi.UserMessage
		if abi.DecodeUserMessage(ev.Data, &m) == nil {
			delete(s.unrouted, m.MessageID)
		}
	}
	if !s.ownRecord(ev) {
		return
	}
	switch {
	case ev.Type == abi.SubjectUserMessage:
		var m abi.UserMessage
		if abi.DecodeUserMessage(ev.Data, &m) == nil && m.MessageID != "" && s.mine(&m) {
			if _, ok := s.seen[m.MessageID]; !ok {
				// A copy: a replay lends each event only for its call.
				c := copyEvent(ev)
				s.unrouted[m.MessageID] = &c
			}
		}
	case ev.Type == abi.AgentMessageSubject(s.agent):
		var m abi.UserMessage
		if abi.DecodeUserMessage(ev.Data, &m) == nil {
			c := copyEvent(ev)
			s.route(&c)
			s.see(m.MessageID)
			delete(s.unrouted, m.MessageID)
			if l := s.loops[ev.CorrelationID]; l != nil {
				l.join(ev.ID, m.Text)
				l.queries = 0
			}
		}
	case ev.Type == abi.SubjectIntentStarted:
		var d abi.IntentStarted
		if abi.DecodeIntentStarted(ev.Data, &d) == nil && d.Agent == s.agent && s.loops[d.RunLoopID] == nil {
			l := &runLoop{id: d.RunLoopID, goal: d.Goal, started: ev.Time, maxIter: d.MaxIterations, startSeq: ev.Seq, ask: d.Ask}
			if ev.CausationID != "" {
				s.opened[ev.CausationID] = l.id
				l.openedBy = ev.CausationID
			}
			if d.Goal != "" {
				l.join(ev.CausationID, d.Goal)
			}
			s.loops[l.id] = l
			s.open = append(s.open, l)
		}
	case ev.Type == abi.SubjectIntentEnded:
		var d abi.IntentEnded
		if abi.DecodeIntentEnded(ev.Data, &d) == nil {
			if l := s.loops[d.RunLoopID]; l != nil && l.status == "" {
				l.status, l.ended, l.endActions = d.Status, ev.Time, len(l.actions)
				for i, o := range s.open {
					if o == l {
						s.open = append(s.open[:i:i], s.open[i+1:]...)
						break
					}
				}
				s.ended = append(s.ended, l)
				s.trim()
			}
		}
	case ev.Type == abi.SubjectAgentAction:
		var d abi.ActionEvent
		l := s.loops[ev.CorrelationID]
		if abi.DecodeActionEvent(ev.Data, &d) != nil || s.actions[ev.ID] != nil {
			return
		}
		a := &action{id: ev.ID, typ: d.Type, tool: d.Tool, args: d.Args, text: d.Text, loop: l, started: ev.Time, status: abi.StatusDone, approvalOf: d.Approval}
		if d.Type == abi.ActionToolCall {
			a.status = abi.StatusInProgress
		}
		s.actions[a.id] = a
		if l == nil {
			s.free = append(s.free, a)
			s.trim()
			s.answeredUnrouted(ev.CausationID)
		}
		if l != nil {
			l.actions = append(l.actions, a)
			// A decision is one iteration, and each tool call of it past
			// the first one more: a thousand calls in one answer are no
			// cheaper than a thousand answers.
			if d.Tick != l.lastTick || l.iterations == 0 {
				l.iterations++
				l.lastTick, l.tickCalls = d.Tick, 0
			}
			if d.Type == abi.ActionToolCall {
				if l.tickCalls++; l.tickCalls > 1 {
					l.iterations++
				}
			}
			if d.Type == abi.ActionQuery {
				l.queries++
			}
			if d.Type == abi.ActionToolCall {
				l.interrupted = false
			}
			// A message sent outside the run loop that an action of it
			// answers ("use 200 instead") is one of its messages too.
			if m := s.routed[ev.CausationID]; m != nil && !l.joined[m.ID] {
				var um abi.UserMessage
				if abi.DecodeUserMessage(m.Data, &um) == nil {
					l.join(m.ID, um.Text)
				}
			}
		}
	case ev.Type == abi.SubjectToolResult:
		var d abi.ToolResultEvent
		if msgpack.Unmarshal(ev.Data, &d) != nil {
			return
		}
		a := s.actions[d.ActionID]
		if a == nil || a.status != abi.StatusInProgress {
			return
		}
		if d.ProcessID != "" && a.processID == "" {
			a.processID = d.ProcessID
			s.procs[d.ProcessID] = a
		}
		if d.ProcessID != "" && d.Status == abi.StatusDone {
			return // started: in progress until the process ends
		}
		if d.Status == abi.StatusInterrupted && a.loop != nil {
			a.loop.interrupted = true
		}
		a.status, a.ended = d.Status, ev.Time
		a.result = d.Error
		if a.result == "" && len(d.Result) > 0 {
			a.result = shortResult(d.Result)
		}
	case ev.Type == abi.SubjectToolInvoke:
		var d abi.ToolInvoke
		if msgpack.Unmarshal(ev.Data, &d) == nil {
			if a := s.actions[d.ActionID]; a != nil {
				a.invoked = true
			}
		}
	case ev.Type == abi.SubjectApprovalRequested, ev.Type == abi.SubjectApprovalDecided:
		s.applyApproval(ev)
	case ev.Type == abi.SubjectSandboxDenied:
		var d abi.SandboxDenied
		if msgpack.Unmarshal(ev.Data, &d) == nil {
			// It may come before the process's spawned event.
			if a := s.procOf(d.ProcessID, ev.CausationID); a != nil {
				a.denied(d)
			}
		}
	case abi.SubjectIn(ev.Type, abi.SubjectProcessAll):
		s.applyProcess(ev)
	}
}

// mine reports whether the user message m is this agent's to route.
func (s *state) mine(m *abi.UserMessage) bool {
	if s.owner != nil {
		return s.owner(m) == s.agent
	}
	return m.Agent == "" || m.Agent == s.agent
}

// ownRecord reports whether ev, if it is an agent's record (an action, a
// run loop's start or end, a tool call), is this agent's: with several
// agents on one bus, each folds its own, by who published it. What its
// source cannot say the fold checks by itself (a message routed to
// another agent is not routed to this one).
func (s *state) ownRecord(ev *abi.Event) bool {
	switch {
	case abi.SubjectIn(ev.Type, abi.SubjectAgentAll), abi.SubjectIn(ev.Type, abi.SubjectIntentAll), abi.SubjectIn(ev.Type, abi.SubjectToolAll):
		return ev.Source == abi.PrincipalAgent+"/"+s.agent || ev.Type == abi.SubjectIntentCancel
	}
	return true
}

// answeredUnrouted: an answer caused by a user message itself, not by
// its routing (the message named an agent that does not exist), settles
// it: a start does not route it again.
func (s *state) answeredUnrouted(cause string) {
	if cause == "" {
		return
	}
	for id, ev := range s.unrouted {
		if ev.ID == cause {
			delete(s.unrouted, id)
			s.see(id)
			return
		}
	}
}

// question is the newest open run loop whose last action asked the user
// something, nil for none.
func (s *state) question() *runLoop {
	for i := len(s.open) - 1; i >= 0; i-- {
		l := s.open[i]
		if n := len(l.actions); n > 0 && l.actions[n-1].typ == abi.ActionQuery {
			return l
		}
	}
	return nil
}

// see records that message id was routed.
func (s *state) see(id string) {
	if _, ok := s.seen[id]; !ok {
		s.seen[id] = struct{}{}
		s.seenOrder = append(s.seenOrder, id)
		s.trim()
	}
}

// route keeps ev, a routed message, for the actions that answer it.
func (s *state) route(ev *abi.Event) {
	if _, ok := s.routed[ev.ID]; !ok {
		s.routedOrder = append(s.routedOrder, ev.ID)
	}
	s.routed[ev.ID] = ev
	s.trim()
}

// trim cuts what ended to its windows: the oldest ended run loops go with
// their actions and processes, and the oldest of the rest.
func (s *state) trim() {
	for len(s.ended) > maxEndedLoops {
		l := s.ended[0]
		s.ended = s.ended[1:]
		s.forget(l)
		s.evicted++
	}
	for len(s.free) > maxFreeActions {
		a := s.free[0]
		s.free = s.free[1:]
		s.dropAction(a)
	}
	for len(s.seenOrder) > maxSeen {
		delete(s.seen, s.seenOrder[0])
		s.seenOrder = s.seenOrder[1:]
	}
	for len(s.routedOrder) > maxRouted {
		delete(s.routed, s.routedOrder[0])
		s.routedOrder = s.routedOrder[1:]
	}
	// Each window is a slice cut from its head: append copies what is
	// left to a fresh array when the old one is used up, so the heads cut
	// off are freed and no array outgrows twice its window.
}

// forget drops l, ended, and what only it holds.
func (s *state) forget(l *runLoop) {
	delete(s.loops, l.id)
	if l.openedBy != "" && s.opened[l.openedBy] == l.id {
		delete(s.opened, l.openedBy)
	}
	for _, a := range l.actions {
		s.dropAction(a)
	}
}

func (s *state) dropAction(a *action) {
	if s.actions[a.id] == a {
		delete(s.actions, a.id)
	}
	if a.processID != "" && s.procs[a.processID] == a {
		delete(s.procs, a.processID)
	}
}

// procOf is the action whose process is id, learnt from the first event
// of the process, which names the action as its cause; nil for a process
// of no action, and for the processes its process started (they carry
// its cause too).
func (s *state) procOf(id, cause string) *action {
	a := s.procs[id]
	if a == nil {
		if a = s.actions[cause]; a == nil || id == "" || a.processID != "" {
			return nil
		}
		a.processID = id
		s.procs[id] = a
	}
	return a
}

// applyProcess folds a kernel event of a process into the action that
// started it. The data is decoded once, as the event's own type, which
// names the process: a fold of the log reads a process event for every
// few of the others.
func (s *state) applyProcess(ev *abi.Event) {
	switch ev.Type {
	case abi.SubjectProcessSpawned:
		var d abi.ProcessSpawned
		if a := s.procDecoded(ev, &d, &d.ProcessID); a != nil {
			a.argv, a.pid, a.spawned = d.Argv, d.PID, ev.Time
		}
	case abi.SubjectProcessProgress:
		var d abi.ProcessProgress
		if a := s.procDecoded(ev, &d, &d.ProcessID); a != nil {
			a.progress = progressText(d.Values)
		}
	case abi.SubjectProcessCanceled:
		var d abi.ProcessCanceled
		if a := s.procDecoded(ev, &d, &d.ProcessID); a != nil && a.status == abi.StatusInProgress {
			a.status = abi.StatusCanceled
			a.result = d.Reason
		}
	case abi.SubjectProcessInterrupted:
		var d abi.ProcessInterrupted
		if a := s.procDecoded(ev, &d, &d.ProcessID); a != nil && a.status == abi.StatusInProgress {
			a.status, a.ended, a.result = abi.StatusInterrupted, ev.Time, d.Reason
			if a.loop != nil {
				a.loop.interrupted = true
			}
		}
	case abi.SubjectProcessExited:
		var d abi.ProcessExitedEvent
		a := s.procDecoded(ev, &d, &d.ProcessID)
		if a == nil {
			return
		}
		a.ended, a.exitCode = ev.Time, d.ExitCode
		switch {
		case a.status == abi.StatusCanceled:
		case d.ExitCode != nil && *d.ExitCode == 0:
			a.status, a.result = abi.StatusDone, "exit code 0"
		case d.ExitCode != nil:
			a.status, a.result = abi.StatusFailed, "exit code "+itoa(*d.ExitCode)
		default:
			a.status, a.result = abi.StatusFailed, "killed by "+d.Signal
		}
	default:
		var ref abi.ProcessRef
		if msgpack.Unmarshal(ev.Data, &ref) == nil {
			s.procOf(ref.ProcessID, ev.CausationID)
		}
	}
}

// procDecoded decodes ev's data into v, whose field id names the process,
// and returns the action of that process (procOf); nil if none, or if the
// data is no v — the process it names is still bound to its action then,
// as by any event of it.
func (s *state) procDecoded(ev *abi.Event, v any, id *string) *action {
	if msgpack.Unmarshal(ev.Data, v) != nil {
		var ref abi.ProcessRef
		if msgpack.Unmarshal(ev.Data, &ref) == nil {
			s.procOf(ref.ProcessID, ev.CausationID)
		}
		return nil
	}
	return s.procOf(*id, ev.CausationID)
}

// loopNamed is the run loop id names: its whole id, or the end of it (four
// characters or more) when one open run loop's id ends so, or else one
// run loop's of all.
func (s *state) loopNamed(id string) *runLoop {
	if l := s.loops[id]; l != nil || len(id) < 4 {
		return l
	}
	if l, n := endsWith(s.open, id); n > 0 {
		return l
	}
	var all []*runLoop
	for _, l := range s.loops {
		all = append(all, l)
	}
	l, _ := endsWith(all, id)
	return l
}

// endsWith is the one run loop of ls whose id ends with id (nil when more
// do), and how many do.
func endsWith(ls []*runLoop, id string) (*runLoop, int) {
	var found *runLoop
	n := 0
	for _, l := range ls {
		if strings.HasSuffix(l.id, id) {
			found = l
			n++
		}
	}
	if n > 1 {
		return nil, n
	}
	return found, n
}

// join adds a user message of the run loop, once per event id.
func (l *runLoop) join(id, text string) {
	if l.joined == nil {
		l.joined = map[string]bool{}
	}
	if id != "" {
		if l.joined[id] {
			return
		}
		l.joined[id] = true
	}
	l.messages = append(l.messages, text)
}

// conversation reports whether l ended done having called no tool: the
// agent only answered, and listings leave it out unless asked for all.
func (l *runLoop) conversation() bool {
	return l.status == abi.StatusDone && !slices.ContainsFunc(l.actions, func(a *action) bool { return a.typ == abi.ActionToolCall })
}

// waiting reports whether l waits for the user after an interruption:
// nothing in it runs, and nothing is asked of the policy for it until the
// user speaks.
func (l *runLoop) waiting() bool { return l.interrupted && !l.running() }

// active reports whether a run loop is open that does not wait for the
// user: the policy's heartbeat is for those.
func (s *state) active() bool {
	for _, l := range s.open {
		if !l.interrupted || l.running() {
			return true
		}
	}
	return false
}

// running reports whether an action of l is in progress, or waits for a
// person's decision to run again.
func (l *runLoop) running() bool {
	for _, a := range l.actions {
		if a.status == abi.StatusInProgress || a.rerunState == abi.ApprovalPending || a.rerun == asking {
			return true
		}
	}
	return false
}

// inProgress lists the actions of l still running.
func (l *runLoop) inProgress() []*action {
	var out []*action
	for _, a := range l.actions {
		if a.status == abi.StatusInProgress {
			out = append(out, a)
		}
	}
	return out
}

// view is l as a policy sees it: its latest actions.
func (l *runLoop) view() abi.RunLoopView {
	v := abi.RunLoopView{ID: l.id, Goal: l.goal, StartedAt: l.started, Iterations: l.iterations, Messages: l.messages, Interrupted: l.waiting()}
	const keep = 16
	acts := l.actions
	if len(acts) > keep {
		acts = acts[len(acts)-keep:]
	}
	for _, a := range acts {
		v.Actions = append(v.Actions, abi.ActionView{
			ID: a.id, Type: a.typ, Tool: a.tool, Args: a.args, Text: a.text, Status: a.status,
			ProcessID: a.processID, Progress: a.progress, Result: a.result, StartedAt: a.started, EndedAt: a.ended,
		})
	}
	return v
}

func shortResult(raw msgpack.RawMessage) string {
	var v any
	if msgpack.Unmarshal(raw, &v) != nil {
		return ""
	}
	s := strings.TrimSpace(strings.ReplaceAll(fmtValue(v), "\n", " "))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
