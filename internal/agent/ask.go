package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// An agent asks another with the tool agent.ask. The chain is events
// only: the asking action; the ask delivered to the asked agent as
// kairo.agent.{id}.message caused by that action; the run loop it opens
// there (its kairo.intent.started carries the ask); that run loop's end;
// and the asking action's kairo.tool.result, caused by that end, with the
// asked agent's last answer. A cancel of the asking run loop gives the
// action its canceled result, and the asked agent, which follows the bus,
// cancels the run loop it opened for it.

// runAsk carries out an agent.ask call of run loop loop. It delivers the
// ask and returns pending, the result to come when the asked run loop
// ends; or it refuses it at once with a result saying why.
func (r *Runtime) runAsk(loop, actionID string, d abi.ActionData) (res abi.ToolResultEvent, pending bool) {
	refuse := func(format string, args ...any) (abi.ToolResultEvent, bool) {
		return abi.ToolResultEvent{Status: abi.StatusFailed, Error: "agent.ask: " + fmt.Sprintf(format, args...)}, false
	}
	var args abi.AgentAskArgs
	if err := json.Unmarshal([]byte(d.Args), &args); err != nil || args.Agent == "" || strings.TrimSpace(args.Text) == "" {
		return refuse(`give the agent to ask and what to ask it: {"agent": "ID", "text": "..."}`)
	}
	rt := r.router
	switch _, known := rt.Spec(args.Agent); {
	case args.Agent == r.cfg.Agent:
		return refuse("an agent does not ask itself; do it, or ask another agent (%s)", rt.list())
	case !known:
		return refuse("there is no agent %q; the agents are %s", args.Agent, rt.list())
	}
	r.mu.Lock()
	l := r.st.loops[loop]
	if l == nil || l.status != "" {
		r.mu.Unlock()
		return refuse("an ask belongs to an open task")
	}
	asks := 0
	for _, a := range l.actions {
		if a.typ == abi.ActionToolCall && a.tool == abi.ToolAgentAsk {
			asks++
		}
	}
	ask := rt.ask(r.cfg.Agent, l, actionID, args.Agent)
	r.mu.Unlock()
	switch {
	case ask.Depth > rt.maxDepth:
		return refuse("asks go at most %d deep ([router] max_ask_depth), and this one would be the %d. in its chain", rt.maxDepth, ask.Depth)
	case asks > rt.maxAsks:
		return refuse("a task asks at most %d times ([router] max_asks); this is its %d. ask", rt.maxAsks, asks)
	}
	if !rt.deliver(args.Agent, ask, args.Text) {
		return refuse("the agent %q is not running", args.Agent)
	}
	return abi.ToolResultEvent{}, true
}

// receiveAsk receives an ask: it is routed to this agent as a message caused by
// the asking action, and observed at once, as a user's is. False when the
// agent is stopping.
func (r *Runtime) receiveAsk(ask *abi.Ask, text string) bool {
	if r.ctx.Err() != nil {
		return false
	}
	m := abi.UserMessage{Text: text, MessageID: abi.NewID(), Agent: r.cfg.Agent, Ask: ask}
	r.mu.Lock()
	r.st.see(m.MessageID)
	r.mu.Unlock()
	routed := r.emit(&abi.Event{Type: abi.AgentMessageSubject(r.cfg.Agent), CausationID: ask.ActionID}, m)
	r.mu.Lock()
	r.obs = append(r.obs, *routed)
	r.mu.Unlock()
	r.ticker.Wake()
	return true
}

// askLive reports whether the action that asked is still waiting for its
// answer: a policy that gets to an ask after its asker was canceled opens
// no run loop for it.
func (r *Runtime) askLive(ask *abi.Ask) bool {
	asker := r.router.Runtime(ask.Agent)
	if asker == nil {
		return false
	}
	asker.mu.Lock()
	defer asker.mu.Unlock()
	a := asker.st.actions[ask.ActionID]
	return a != nil && a.status == abi.StatusInProgress
}

// endedAsked answers the ask of a run loop that ended (ev, its
// kairo.intent.ended): the asking action's result is this agent's last
// answer in it, or why it ended otherwise.
func (r *Runtime) endedAsked(ev *abi.Event) {
	var d abi.IntentEnded
	if abi.DecodeIntentEnded(ev.Data, &d) != nil {
		return
	}
	r.mu.Lock()
	delete(r.askSessions, d.RunLoopID)
	l := r.st.loops[d.RunLoopID]
	if l == nil || l.ask == nil {
		r.mu.Unlock()
		return
	}
	ask, answer := l.ask, lastAnswer(l)
	r.mu.Unlock()
	res := abi.ToolResultEvent{Status: abi.StatusDone}
	if d.Status == "done" {
		res.Result, _ = msgpack.Marshal(answer)
	} else {
		res.Status = abi.StatusFailed
		why := answer
		if why == "" {
			why = d.Summary
		}
		res.Error = fmt.Sprintf("%s's task ended %s: %s", r.cfg.Agent, strings.ReplaceAll(d.Status, "_", " "), why)
		if d.Status == abi.StatusCanceled {
			res.Status = abi.StatusCanceled
		}
	}
	r.router.answer(ask, ev.ID, res)
}

// lastAnswer is what a run loop said last. Called under r.mu.
func lastAnswer(l *runLoop) string {
	for i := len(l.actions) - 1; i >= 0; i-- {
		if a := l.actions[i]; a.typ == abi.ActionSay || a.typ == abi.ActionQuery {
			return a.text
		}
	}
	return ""
}

// answered records the answer to an ask of this agent's: the asking
// action's result, caused by the end of the run loop that answered it
// (cause), observed at once. Nothing when the action has its result
// already (it was canceled meanwhile).
func (r *Runtime) answered(ask *abi.Ask, cause string, res abi.ToolResultEvent) {
	res.ActionID, res.Tool = ask.ActionID, abi.ToolAgentAsk
	r.mu.Lock()
	if a := r.st.actions[ask.ActionID]; a != nil {
		res.Duration = time.Since(a.started)
	}
	r.mu.Unlock()
	ev, ok := r.emitIf(&abi.Event{Type: abi.SubjectToolResult, CorrelationID: ask.RunLoopID, CausationID: cause}, res, func() bool {
		a := r.st.actions[ask.ActionID]
		return a != nil && a.status == abi.StatusInProgress
	})
	if ok {
		r.mu.Lock()
		r.obs = append(r.obs, *ev)
		r.mu.Unlock()
	}
}

// askerCanceled follows the results of other agents' actions: one that
// canceled an ask this agent answers cancels the run loop it opened for
// it. An interrupted ask (the daemon stopped) leaves it to the person, as
// every interrupted run loop is.
func (r *Runtime) askerCanceled(ev *abi.Event) {
	var d abi.ToolResultEvent
	if msgpack.Unmarshal(ev.Data, &d) != nil || d.Tool != abi.ToolAgentAsk || d.Status != abi.StatusCanceled {
		return
	}
	r.mu.Lock()
	var loop, asker string
	for _, l := range r.st.open {
		if l.ask != nil && l.ask.ActionID == d.ActionID && ev.Source == abi.PrincipalAgent+"/"+l.ask.Agent {
			loop, asker = l.id, l.ask.Agent
			break
		}
	}
	r.mu.Unlock()
	if loop == "" {
		return
	}
	reason := fmt.Sprintf("the task of %s that asked for it was canceled", asker)
	if d.Error != "" {
		reason += " (" + d.Error + ")"
	}
	id := ev.ID
	prev, done := r.beginHalt(loop)
	r.wg.Add(1)
	go func() { defer r.wg.Done(); r.cancelLoop(loop, reason, id, id, prev, done) }()
}

// refusedAsk is an ask whose answer the runtime refused (an action that
// would have left the ask's run loop).
type refusedAsk struct {
	routed *abi.Event
	ask    *abi.Ask
	why    string
}

// failAsks answers the asks a tick's answer was refused for, whose run
// loop never opened: the asker learns why at once rather than waiting.
func (r *Runtime) failAsks(refused []refusedAsk) {
	for _, x := range refused {
		r.mu.Lock()
		opened := r.st.opened[x.routed.ID]
		r.mu.Unlock()
		if opened != "" {
			continue
		}
		r.router.answer(x.ask, x.routed.ID, abi.ToolResultEvent{Status: abi.StatusFailed,
			Error: fmt.Sprintf("%s could not do it for %s: %s", r.cfg.Agent, x.ask.Agent, x.why)})
	}
}

// loopAsk is the ask run loop loop answers, nil for none.
func (r *Runtime) loopAsk(loop string) *abi.Ask {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.st.loops[loop]; l != nil {
		return l.ask
	}
	return nil
}

// sessionFor is the kernel session a tool call of run loop loop runs in:
// the agent's; for a run loop that answers an ask, one of its own, bounded
// by the grants of whom it answers. The kernel lets a session steer only
// the processes it started, so what an ask's run loop starts it may stop,
// and the agent's other processes it may not.
func (r *Runtime) sessionFor(loop string) *session {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.st.loops[loop]
	if l == nil || l.ask == nil {
		return r.sess
	}
	s := r.askSessions[loop]
	if s == nil {
		s = r.sess.bounded(r.router.authority(r.cfg.Agent, l.ask))
		r.askSessions[loop] = s
	}
	return s
}
