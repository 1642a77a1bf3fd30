package agent

import (
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/tools"
	"github.com/kairo-os/kairo/kernel"
)

// SubjectAgentError reports a tick whose policy failed or answered what the
// runtime cannot carry out; the tick is then a noop.
const SubjectAgentError = abi.SubjectAgentError

// emit publishes one of the agent's own events and applies it to the state
// at once, so the next tick sees it even before the bus brings it back. It
// returns a copy: the bus writes the sequence number into ev.
func (r *Runtime) emit(ev *abi.Event, data any) *abi.Event {
	c, _ := r.emitIf(ev, data, nil)
	return c
}

// emitIf is emit when ok, asked under r.mu just before the event is
// applied, says yes; else it publishes nothing and returns false. Two
// goroutines that may each write an action's result use it to write one.
func (r *Runtime) emitIf(ev *abi.Event, data any, ok func() bool) (*abi.Event, bool) {
	return r.emitOut(nil, ev, data, ok)
}

// emitOut is emitIf, with the event held in out until the tick flushes it
// when out is not nil (see outbox), else published at once.
func (r *Runtime) emitOut(out *outbox, ev *abi.Event, data any, ok func() bool) (*abi.Event, bool) {
	if !r.prepare(ev, data) {
		return ev, false
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	r.mu.Lock()
	if ok != nil && !ok() {
		r.mu.Unlock()
		return ev, false
	}
	r.st.apply(ev)
	r.st.own[ev.ID] = struct{}{}
	asked := false
	if out != nil && ev.Type == abi.SubjectIntentEnded {
		l := r.st.loops[ev.CorrelationID]
		asked = l != nil && l.ask != nil
	}
	r.mu.Unlock()
	c := *ev
	if out == nil {
		r.publishPrepared(ev)
	} else {
		out.evs = append(out.evs, ev)
		if asked {
			r.flush(out) // the asking agent's answer follows the end in the log
		}
	}
	if c.Type == abi.SubjectIntentEnded {
		r.endedAsked(&c)
	}
	return &c, true
}

// publishPrepared queues ev, prepared and applied, for the store; the bus
// keeps the order of what one goroutine publishes.
func (r *Runtime) publishPrepared(ev *abi.Event) {
	if _, err := r.k.Bus.PublishAsync(ev); err != nil && r.ctx.Err() == nil {
		r.log.Warn("publish", "type", ev.Type, "err", err)
	}
}

// publishRouted publishes the routed messages the tick's observations
// hold (see take), before anything the tick publishes.
func (r *Runtime) publishRouted(evs []*abi.Event) {
	for _, ev := range evs {
		r.publishPrepared(ev)
	}
}

// An outbox holds the events one tick emits — the messages routed to it,
// the run loop it opens, its actions, the loop's end, its record — until
// the tick queues them for the store together (flush), so that the
// committer takes them in one commit: queued one by one, a committer
// woken by the first took it alone, and the action waited for a second
// commit (docs/RATIONALE.md#a-message-wakes-the-tick). Only the tick's
// goroutine uses its outbox, and it flushes it before anything that may
// publish on another path (a tool call's goroutine, a cancel, the
// kernel's approvals, another agent's answer), so the log keeps the order
// in which the events were applied.
type outbox struct {
	evs []*abi.Event
}

// emitTo is emit for the tick's goroutine: the event is applied at once
// and held in out until the tick flushes it; nil out publishes at once.
func (r *Runtime) emitTo(out *outbox, ev *abi.Event, data any) *abi.Event {
	c, _ := r.emitOut(out, ev, data, nil)
	return c
}

// flush queues what out holds for the store, in one batch of the bus; it
// reports whether it queued anything.
func (r *Runtime) flush(out *outbox) bool {
	if out == nil || len(out.evs) == 0 {
		return false
	}
	evs := out.evs
	out.evs = nil // the bus holds the events until they are stored
	if _, err := r.k.Bus.PublishAsyncBatch(evs); err != nil && r.ctx.Err() == nil {
		r.log.Warn("publish", "type", evs[0].Type, "events", len(evs), "err", err)
	}
	return true
}

// tick is one step: x_t is what was observed since the last tick; with
// nothing observed and no run loop open but one waiting for the user, it is
// a noop without asking the policy (the rule layer before the policy).
func (r *Runtime) tick(tk Tick) {
	r.mu.Lock()
	x := r.takeObservations()
	// Under the same lock as x: a routed message the tick observes is
	// stored before its record.
	routed := r.routed
	r.routed = nil
	due := len(x) > 0 || (r.st.active() && time.Since(r.lastCall) >= r.cfg.Heartbeat)
	if w, ok := r.cfg.Policy.(Waiter); ok && !due {
		due = w.Waiting()
	}
	if !due {
		r.mu.Unlock()
		r.publishRouted(routed)
		r.ticked(tk, false)
		return
	}
	// What the tick emits waits in out and goes to the store in one
	// commit, the routed messages first.
	out := &outbox{evs: routed}
	defer func() {
		if r.flush(out) {
			// The committer, woken by the batch, runs at once on this
			// core, not after the ticker has armed its timers and parked.
			runtime.Gosched()
		}
	}()
	r.lastCall = time.Now()
	seq, pending := r.st.lastSeq, slices.Collect(maps.Keys(r.st.own))
	in := &abi.AgentInput{Agent: r.cfg.Agent, Hz: tk.Hz, BargeIn: r.cfg.BargeIn, Skills: r.skills, Agents: r.router.Others(r.cfg.Agent)}
	for _, l := range r.st.open {
		in.RunLoops = append(in.RunLoops, l.view())
	}
	in.Memory = r.mem.text(r.st.open)
	r.mu.Unlock()
	if d, ok := r.cfg.Tools.(Definer); ok {
		in.Tools = d.Definitions()
	}
	if s, ok := r.cfg.Tools.(SkillNamer); ok {
		in.Skills = s.SkillNames() // as the skills folder is now
	}

	batch := &abi.Batch{Time: tk.At, Tick: tk.N, Events: x, Agent: in}
	reply, err := r.cfg.Policy.Decide(r.ctx, batch)
	switch {
	case r.ctx.Err() != nil:
		return
	case err != nil:
		r.flush(out)
		r.reportPolicy(tk.N, x, fmt.Sprintf("the policy failed: %v", firstLine(err.Error())))
		// Nothing observed is lost: the next tick sees it again.
		r.mu.Lock()
		if len(x)+len(r.obs) <= maxRequeue {
			r.obs = append(x, r.obs...)
		}
		r.mu.Unlock()
	case reply.Error != "":
		r.record(tk, seq, pending, batch, reply, out)
		r.flush(out)
		r.reportPolicy(tk.N, x, "the policy could not decide: "+reply.Error)
	default:
		r.policyDecided()
		r.carryOut(tk, x, reply, out)
		r.record(tk, seq, pending, batch, reply, out)
	}
	r.ticked(tk, true)
}

// record publishes the tick's kairo.agent.tick, unless the tick was a
// heartbeat that changed nothing.
func (r *Runtime) record(tk Tick, seq uint64, pending []string, b *abi.Batch, reply *abi.Reply, out *outbox) {
	said := reply.Thought != "" || reply.Error != "" || slices.ContainsFunc(reply.Actions, func(a abi.Action) bool { return a.Type != abi.ActionNoop })
	if len(b.Events) == 0 && len(b.CallResults) == 0 && !said {
		return
	}
	rec := abi.TickRecord{Tick: tk.N, At: tk.At, Hz: tk.Hz, Seq: seq, Pending: pending, Results: len(b.CallResults)}
	if m := b.Agent.Memory; m != r.recorded {
		rec.Memory, rec.MemoryChanged, r.recorded = m, true, m
	}
	for i := range b.Events {
		rec.Observed = append(rec.Observed, b.Events[i].ID)
	}
	ev := &abi.Event{Type: abi.SubjectAgentTick}
	if r.prepare(ev, rec) {
		out.evs = append(out.evs, ev)
	}
}

// takeObservations is x_t: what was observed since the last tick — with
// BargeInQueue, up to and including the first user message, the rest
// waiting for later ticks; and while the policy has a decision of its own
// in progress, no user message at all. Called under r.mu.
func (r *Runtime) takeObservations() []abi.Event {
	x := r.obs
	if r.cfg.BargeIn != abi.BargeInQueue {
		r.obs = nil
		return x
	}
	busy := false
	if w, ok := r.cfg.Policy.(Waiter); ok {
		busy = w.Busy()
	}
	var now, later []abi.Event
	msgs := 0
	for _, ev := range x {
		if ev.Type == abi.AgentMessageSubject(r.cfg.Agent) {
			if busy || msgs > 0 {
				later = append(later, ev)
				continue
			}
			msgs++
		}
		now = append(now, ev)
	}
	r.obs = later
	return now
}

// maxRequeue bounds the observations kept for a policy that keeps failing.
const maxRequeue = 1024

func (r *Runtime) ticked(tk Tick, decided bool) {
	r.health.ticked(tk)
	if r.OnTick != nil {
		r.OnTick(tk, decided)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// carryOut publishes the tick's thought and actions, each in its run loop,
// and starts what they ask for. Its events wait in out (see outbox).
func (r *Runtime) carryOut(tk Tick, x []abi.Event, reply *abi.Reply, out *outbox) {
	// The message the tick answers: the last one routed to the agent.
	var trigger *abi.Event
	var msg abi.UserMessage
	for i := len(x) - 1; i >= 0; i-- {
		if x[i].Type == abi.AgentMessageSubject(r.cfg.Agent) && abi.DecodeUserMessage(x[i].Data, &msg) == nil {
			trigger = &x[i]
			break
		}
	}
	touched := map[string]bool{}
	var refusedAsks []refusedAsk
	defer func() {
		if len(refusedAsks) > 0 {
			r.flush(out)
			r.failAsks(refusedAsks)
		}
	}()
	var thoughtLoop string
	calls := 0
	var refused refusals
	for _, a := range reply.Actions {
		if a.Type == abi.ActionNoop {
			continue
		}
		var d abi.ActionData
		if len(a.Data) > 0 {
			if err := abi.DecodeActionData(a.Data, &d); err != nil {
				r.report(tk.N, fmt.Sprintf("action %s: its data is not an ActionData: %v", a.Type, err))
				continue
			}
		}
		d.Approval = "" // only the runtime's re-runs hold an approval
		switch a.Type {
		case abi.ActionSay, abi.ActionQuery, abi.ActionToolCall, abi.ActionCancel:
		default:
			r.report(tk.N, fmt.Sprintf("unknown action %q: want noop, say, query, tool_call or cancel", a.Type))
			continue
		}
		// An id the policy chose is stored in the agent's scope: a policy
		// cannot claim one the kernel derives, such as an approval's
		// decision (abi.ScopeEventID).
		id, ierr := abi.ScopeEventID("agent/"+r.cfg.Agent, a.ID)
		if ierr != nil {
			r.report(tk.N, fmt.Sprintf("action %s: %v", a.Type, ierr))
			continue
		}
		trig, tmsg := trigger, msg
		if a.CausationID != "" {
			r.mu.Lock()
			ev := r.st.routed[a.CausationID]
			r.mu.Unlock()
			if ev == nil {
				r.report(tk.N, fmt.Sprintf("action %s answers %s, which is no message routed to the agent", a.Type, a.CausationID))
				continue
			}
			trig = ev
			abi.DecodeUserMessage(ev.Data, &tmsg)
		}
		if tmsg.Ask != nil && trig != nil && trig.CorrelationID == "" && !r.askLive(tmsg.Ask) {
			r.report(tk.N, fmt.Sprintf("action %s answers an ask of %s whose task no longer waits for it", a.Type, tmsg.Ask.Agent))
			continue
		}
		loop, err := r.loopFor(a, &d, trig, &tmsg, out)
		if err != nil {
			r.report(tk.N, err.Error())
			if tmsg.Ask != nil && trig != nil {
				refusedAsks = append(refusedAsks, refusedAsk{trig, tmsg.Ask, err.Error()})
			}
			continue
		}
		cause := ""
		if trig != nil {
			cause = trig.ID
		}
		if a.Type == abi.ActionToolCall {
			if why := r.overCap(loop, calls); why != "" {
				refused.add(loop, cause, d.Tool, why)
				continue
			}
			calls++
		}
		if a.Type == abi.ActionCancel {
			// The actions in flight are canceled now, by the cancel; the
			// processes end, and (unless Keep) the run loop, in a
			// goroutine its tool calls wait for.
			r.flush(out)
			cev := r.emit(&abi.Event{Type: abi.SubjectAgentAction, CorrelationID: loop, CausationID: cause},
				abi.ActionEvent{Type: a.Type, ActionData: d, Tick: tk.N})
			reason := d.Reason
			if reason == "" {
				reason = "canceled by the user"
			}
			r.cancelActions(loop, reason, cev.ID)
			prev, done := r.beginHalt(loop)
			r.wg.Add(1)
			if d.Keep {
				touched[loop] = true
				thoughtLoop = loop
				go func() { defer r.wg.Done(); r.keepLoop(loop, reason, prev, done) }()
			} else {
				go func() { defer r.wg.Done(); r.cancelLoop(loop, reason, cause, cev.ID, prev, done) }()
			}
			continue
		}
		var forAsk *abi.Ask
		if a.Type == abi.ActionToolCall && loop != "" {
			forAsk = r.loopAsk(loop) // whose grants the call runs under, recorded with it
		}
		ev := r.emitTo(out, &abi.Event{ID: id, Type: abi.SubjectAgentAction, CorrelationID: loop, CausationID: cause},
			abi.ActionEvent{Type: a.Type, ActionData: d, Tick: tk.N, For: forAsk})
		if loop != "" {
			touched[loop] = true
			thoughtLoop = loop
		}
		switch {
		case a.Type == abi.ActionToolCall:
			r.mu.Lock()
			halt := r.halts[loop]
			r.mu.Unlock()
			r.flush(out) // the call's events follow its action
			r.wg.Add(1)
			go func() { defer r.wg.Done(); r.runTool(loop, ev.ID, d, halt) }()
		case a.Type == abi.ActionSay && d.Done && loop != "":
			r.endIfIdle(loop, "done", d.Text, out)
		}
	}
	if reply.Thought != "" {
		r.emitTo(out, &abi.Event{Type: abi.SubjectAgentThought, CorrelationID: thoughtLoop}, abi.Thought{Text: reply.Thought, Tick: tk.N})
	}
	if len(refused.list) > 0 {
		r.flush(out)
		r.refuse(&refused)
	}
	r.bound(touched, out)
}

// loopFor is the run loop an action belongs to: the one it names, else the
// one its message joined, else a new one for its message (opened once per
// tick), else the only one open.
func (r *Runtime) loopFor(a abi.Action, d *abi.ActionData, trigger *abi.Event, msg *abi.UserMessage, out *outbox) (string, error) {
	id := a.CorrelationID
	if a.Type == abi.ActionCancel && d.RunLoopID != "" {
		id = d.RunLoopID
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if msg.Ask != nil && trigger != nil {
		// An ask is answered in the run loop it opens, never in another
		// (a task of the agent's own, under its own grants): what the
		// agent does for another stays under that ask's grants.
		if a.Type == abi.ActionCancel && (id == "" || id != r.st.opened[trigger.ID]) {
			return "", fmt.Errorf("cancel answers an ask of %s: it may cancel only what that ask started", msg.Ask.Agent)
		}
		id = r.st.opened[trigger.ID]
		if l := r.st.loops[id]; id != "" && (l == nil || l.status != "") {
			return "", fmt.Errorf("action %s answers an ask whose run loop %s has ended", a.Type, id)
		}
		if id != "" {
			return id, nil
		}
		return r.openLoop(trigger, msg, out), nil
	}
	if id != "" {
		if l := r.st.loops[id]; l == nil || l.status != "" {
			return "", fmt.Errorf("action %s names run loop %s, which is not open", a.Type, id)
		}
		return id, nil
	}
	if l := r.processLoop(a, d); l != "" {
		return l, nil
	}
	switch {
	case trigger != nil && trigger.CorrelationID != "":
		return trigger.CorrelationID, nil
	case trigger != nil && r.st.opened[trigger.ID] != "":
		id = r.st.opened[trigger.ID]
		if l := r.st.loops[id]; l == nil || l.status != "" {
			return "", fmt.Errorf("action %s answers a message whose run loop %s has ended", a.Type, id)
		}
		return id, nil
	case trigger != nil && a.Type != abi.ActionCancel:
		return r.openLoop(trigger, msg, out), nil
	case len(r.st.open) == 1:
		return r.st.open[0].id, nil
	case a.Type == abi.ActionCancel:
		return "", fmt.Errorf("cancel names no run loop and %d are open: say which", len(r.st.open))
	}
	return "", nil
}

// openLoop opens a run loop for the message trigger and returns its id.
// Called under r.mu, which it lets go while it emits to out.
func (r *Runtime) openLoop(trigger *abi.Event, msg *abi.UserMessage, out *outbox) string {
	id := abi.NewID()
	r.mu.Unlock()
	r.emitTo(out, &abi.Event{Type: abi.SubjectIntentStarted, CorrelationID: id, CausationID: trigger.ID},
		abi.IntentStarted{RunLoopID: id, Agent: r.cfg.Agent, Goal: msg.Text, MessageID: msg.MessageID, MaxIterations: r.cfg.MaxIterations, Ask: msg.Ask})
	r.mu.Lock()
	return id
}

// processLoop is the open run loop of the process a tool call names by its
// processId ("process.kill" of a task's process belongs to that task, not
// to a new one); "" when the call names none or its run loop has ended.
// The caller holds r.mu.
func (r *Runtime) processLoop(a abi.Action, d *abi.ActionData) string {
	if a.Type != abi.ActionToolCall || !strings.HasPrefix(d.Tool, "process.") || d.Tool == abi.MethodProcessSpawn {
		return ""
	}
	var args struct {
		ProcessID string `json:"processId"`
	}
	if json.Unmarshal([]byte(d.Args), &args) != nil || args.ProcessID == "" {
		return ""
	}
	if p := r.st.procs[args.ProcessID]; p != nil && p.loop != nil && p.loop.status == "" {
		return p.loop.id
	}
	return ""
}

// bound ends the run loops that reached their iteration limit, with a say
// of what was done, and lowers the rate while queries go unanswered.
// What the tick holds in out is queued first, before any of that.
func (r *Runtime) bound(touched map[string]bool, out *outbox) {
	var over []*runLoop
	queries := 0
	r.mu.Lock()
	for id := range touched {
		if l := r.st.loops[id]; l != nil && l.status == "" && l.iterations >= max(l.maxIter, 1) {
			over = append(over, l)
		}
	}
	for _, l := range r.st.open {
		queries = max(queries, l.queries)
	}
	lower := queries >= r.cfg.QueryBackoff && !r.backoff
	if lower {
		r.backoff = true
	}
	r.mu.Unlock()
	if lower {
		hz := max(r.cfg.MinHz, r.ticker.Hz()/2)
		r.ticker.SetHz(hz)
		r.log.Info("queries unanswered; ticking slower until the user answers", "queries", queries, "hz", hz)
	}
	if len(over) > 0 {
		r.flush(out)
	}
	for _, l := range over {
		r.mu.Lock()
		summary := summarize(l)
		r.mu.Unlock()
		text := fmt.Sprintf("I stopped after %d steps, the limit for one task. Done so far: %s", l.iterations, summary)
		r.emit(&abi.Event{Type: abi.SubjectAgentAction, CorrelationID: l.id}, abi.ActionEvent{Type: abi.ActionSay, ActionData: abi.ActionData{Text: text}})
		r.stopProcesses(l.id, "the run loop reached its iteration limit", "")
		r.withdrawApprovals(l.id, withdrawReason("max_iterations", ""), true)
		r.emit(&abi.Event{Type: abi.SubjectIntentEnded, CorrelationID: l.id}, abi.IntentEnded{RunLoopID: l.id, Status: "max_iterations", Summary: summary})
	}
}

// summarize says what a run loop did, in a line. Called under r.mu.
func summarize(l *runLoop) string {
	var parts []string
	for _, a := range l.actions {
		if a.typ != abi.ActionToolCall {
			continue
		}
		what := describeCall(a)
		parts = append(parts, fmt.Sprintf("%s (%s)", what, strings.ReplaceAll(a.status, "_", " ")))
	}
	if len(parts) == 0 {
		return "nothing was run"
	}
	return strings.Join(parts, "; ")
}

// commandOf is the command line a tool call ran, or "".
func commandOf(a *action) string {
	var args tools.SpawnArgs
	switch {
	case json.Unmarshal([]byte(a.args), &args) == nil && args.Command != "":
		return args.Command
	case args.Skill != "":
		return strings.TrimSpace(args.Skill + " " + strings.Join(args.Args, " "))
	case len(a.argv) > 0:
		return strings.Join(a.argv, " ")
	}
	return ""
}

// endIfIdle ends a run loop whose policy said it is done, unless something
// in it still runs. Its end waits in out, unless approvals are withdrawn
// first.
func (r *Runtime) endIfIdle(id, status, summary string, out *outbox) {
	r.mu.Lock()
	l := r.st.loops[id]
	idle := l != nil && l.status == "" && len(l.inProgress()) == 0
	var withdraw []string
	if idle {
		withdraw = pendingOf(l, withdrawsReruns(status))
	}
	r.mu.Unlock()
	if idle {
		if len(withdraw) > 0 {
			r.flush(out) // the kernel's decisions follow what the tick did
			r.withdraw(withdraw, withdrawReason(status, ""))
		}
		r.emitTo(out, &abi.Event{Type: abi.SubjectIntentEnded, CorrelationID: id}, abi.IntentEnded{RunLoopID: id, Status: status, Summary: summary})
	}
}

// runTool carries out one tool call: kairo.tool.invoke, the call through
// the agent's Tools, then kairo.tool.result — one of each for every call,
// whatever happens.
//
// A call of a run loop whose processes are being stopped (halt) waits until
// they are gone; a call canceled meanwhile has its result already and is
// not made, and one canceled while it ran is not answered twice: what it
// started anyway ends at once.
func (r *Runtime) runTool(loop, actionID string, d abi.ActionData, halt <-chan struct{}) {
	if halt != nil {
		select {
		case <-halt:
		case <-r.ctx.Done():
			return
		}
	}
	inFlight := func() bool {
		a := r.st.actions[actionID]
		return a != nil && a.status == abi.StatusInProgress
	}
	r.mu.Lock()
	pending := inFlight()
	r.mu.Unlock()
	if !pending || !r.gate(loop, actionID, d) {
		return
	}
	r.mu.Lock()
	a := r.st.actions[actionID]
	once := a != nil && a.status == abi.StatusInProgress && !a.invoked
	if once {
		a.invoked = true // the call runs once, however often it is started
	}
	r.mu.Unlock()
	if !once {
		return
	}
	r.emit(&abi.Event{Type: abi.SubjectToolInvoke, CorrelationID: loop, CausationID: actionID},
		abi.ToolInvoke{ActionID: actionID, Tool: d.Tool, Args: d.Args})
	start := time.Now()
	var res abi.ToolResultEvent
	if d.Tool == abi.ToolAgentAsk {
		var pending bool
		if res, pending = r.runAsk(loop, actionID, d); pending {
			return // answered when the asked run loop ends
		}
	} else {
		res = r.cfg.Tools.Call(r.ctx, tools.Invocation{ActionID: actionID, CorrelationID: loop, Tool: d.Tool, Args: d.Args, Session: r.sessionFor(loop), Approval: d.Approval})
	}
	res.ActionID, res.Tool = actionID, d.Tool
	if ask := r.loopAsk(loop); ask != nil && ask.Grants == abi.GrantsIntersection && strings.Contains(res.Error, "permission denied") {
		// The refusal names this agent; what bounds it is the asker too.
		res.Error += fmt.Sprintf(" (%s acts for %s here, held to what both agents' grants allow)", r.cfg.Agent, strings.Join(ask.Within, ", "))
	}
	if res.Status == "" {
		res.Status = abi.StatusDone
		if res.Error != "" {
			res.Status = abi.StatusFailed
		}
	}
	res.Duration = time.Since(start)
	// Recorded while the call is in flight, and also when the process it
	// started has ended already (its exit, applied first, ended the
	// action): every invoke has its result. Not after a cancel.
	recordable := func() bool {
		a := r.st.actions[actionID]
		return a != nil && (a.status == abi.StatusInProgress ||
			res.ProcessID != "" && a.processID == res.ProcessID && a.status != abi.StatusCanceled)
	}
	ev, ok := r.emitIf(&abi.Event{Type: abi.SubjectToolResult, CorrelationID: loop, CausationID: actionID}, res, recordable)
	if !ok {
		if s, found := r.k.Proc.Get(res.ProcessID); found && res.ProcessID != "" {
			s.Terminate(killGrace)
		}
		return
	}
	// A tool that answered or failed is news for the policy, observed at
	// once as a routed message is; a process's start is not (its exit is).
	if res.Status != abi.StatusDone || res.ProcessID == "" {
		r.mu.Lock()
		r.obs = append(r.obs, *ev)
		r.mu.Unlock()
	}
}

// invoke calls a kernel method as the agent.
func (r *Runtime) invoke(method string, params any) (msgpack.RawMessage, *abi.Error) {
	raw, err := msgpack.Marshal(params)
	if err != nil {
		return nil, abi.Errorf(abi.CodeInternal, "encode %s params: %v", method, err)
	}
	return r.k.Invoke(r.ctx, method, &kernel.Call{Session: r.sess, Params: raw})
}

// killGrace is how long a process canceled after its action was gets
// between SIGTERM and SIGKILL.
const killGrace = 2 * time.Second

// cancelActions gives every action of a run loop still in flight its
// canceled result, caused by cause (the cancel; "" for each action itself):
// the log says at once that it was canceled, not when its process is gone.
func (r *Runtime) cancelActions(loop, reason, cause string) {
	type flight struct{ id, tool, processID string }
	r.mu.Lock()
	var open []flight
	if l := r.st.loops[loop]; l != nil {
		for _, a := range l.inProgress() {
			open = append(open, flight{a.id, a.tool, a.processID})
		}
	}
	r.mu.Unlock()
	for _, a := range open {
		c := cause
		if c == "" {
			c = a.id
		}
		r.emitIf(&abi.Event{Type: abi.SubjectToolResult, CorrelationID: loop, CausationID: c},
			abi.ToolResultEvent{ActionID: a.id, Tool: a.tool, Status: abi.StatusCanceled, Error: reason, ProcessID: a.processID},
			func() bool { x := r.st.actions[a.id]; return x != nil && x.status == abi.StatusInProgress })
	}
}

// stopProcesses cancels what is in flight in a run loop and ends its
// processes; it returns once they have exited, with how many there were.
func (r *Runtime) stopProcesses(loop, reason, cause string) int {
	r.cancelActions(loop, reason, cause)
	out, aerr := r.invoke(abi.MethodIntentCancel, abi.CancelParams{CorrelationID: loop, Reason: reason})
	var res abi.CancelResult
	if aerr == nil {
		msgpack.Unmarshal(out, &res)
	} else {
		r.log.Warn(abi.MethodIntentCancel, "runLoop", loop, "err", aerr.Message)
	}
	return len(res.ProcessIDs)
}

// beginHalt registers that a run loop's processes are being stopped: its
// tool calls made from now on wait for done, so the cancel of its
// correlation never takes a process started after it. prev is the halt
// before, which this one waits for.
func (r *Runtime) beginHalt(loop string) (prev, done chan struct{}) {
	done = make(chan struct{})
	r.mu.Lock()
	prev = r.halts[loop]
	r.halts[loop] = done
	r.mu.Unlock()
	return prev, done
}

func (r *Runtime) endHalt(loop string, done chan struct{}) {
	r.mu.Lock()
	if r.halts[loop] == done {
		delete(r.halts, loop)
	}
	r.mu.Unlock()
	close(done)
}

// waitHalt waits for the halt before; false when the runtime stops.
func (r *Runtime) waitHalt(prev chan struct{}) bool {
	if prev == nil {
		return true
	}
	select {
	case <-prev:
		return true
	case <-r.ctx.Done():
		return false
	}
}

// keepLoop ends a run loop's processes and keeps it open (a cancel with
// Keep): the tool calls after the cancel run once they are gone.
func (r *Runtime) keepLoop(loop, reason string, prev, done chan struct{}) {
	defer r.endHalt(loop, done)
	if !r.waitHalt(prev) {
		return
	}
	if _, aerr := r.invoke(abi.MethodIntentCancel, abi.CancelParams{CorrelationID: loop, Reason: reason}); aerr != nil {
		r.log.Warn(abi.MethodIntentCancel, "runLoop", loop, "err", aerr.Message)
	}
	r.withdrawApprovals(loop, withdrawReason("", reason), false)
}

// cancelLoop cancels a run loop: every tool call still in flight gets a
// canceled result caused by the cancel (cancelID), its processes die, and
// a closing say and kairo.intent.ended, caused by cause, end it.
func (r *Runtime) cancelLoop(loop, reason, cause, cancelID string, prev, done chan struct{}) {
	defer r.endHalt(loop, done)
	if !r.waitHalt(prev) {
		return
	}
	r.mu.Lock()
	l := r.st.loops[loop]
	open := l != nil && l.status == ""
	r.mu.Unlock()
	if !open {
		return
	}
	if reason == "" {
		reason = "canceled by the user"
	}
	n := r.stopProcesses(loop, reason, cancelID)
	// Tool calls accepted while the processes ended wait for this halt:
	// they are canceled too, never made.
	r.cancelActions(loop, reason, cancelID)
	r.withdrawApprovals(loop, withdrawReason("canceled", reason), true)
	r.mu.Lock()
	summary := summarize(l)
	goal := l.goal
	r.mu.Unlock()
	text := fmt.Sprintf("Stopped %q (%s): %d process(es) ended. %s.", goal, reason, n, summary)
	r.emit(&abi.Event{Type: abi.SubjectAgentAction, CorrelationID: loop, CausationID: cause},
		abi.ActionEvent{Type: abi.ActionSay, ActionData: abi.ActionData{Text: text}})
	r.emit(&abi.Event{Type: abi.SubjectIntentEnded, CorrelationID: loop, CausationID: cause},
		abi.IntentEnded{RunLoopID: loop, Status: "canceled", Summary: summary})
}

// exitNote is the milestone a finished process of a run loop makes: a
// kairo.agent.note with its exit, duration and last lines; nil for a
// process of no run loop. r.mu is held.
func (r *Runtime) exitNote(d *abi.ProcessExitedEvent) *abi.Note {
	a := r.st.procs[d.ProcessID]
	if a == nil || a.loop == nil {
		return nil
	}
	return &abi.Note{RunLoopID: a.loop.id, ProcessID: d.ProcessID, Argv: a.argv, Status: a.status, ExitCode: d.ExitCode,
		Duration: time.Duration(d.DurationMs) * time.Millisecond, LastLines: noteLines(d.LastLines)}
}

// noteLines is the text of the last keepLines lines of a process's output.
func noteLines(lines []abi.OutputLine) []string {
	lines = lines[max(0, len(lines)-keepLines):]
	if len(lines) == 0 {
		return nil
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.Text
	}
	return out
}
