package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/manifests"
)

// Approvals: a tool marked "always" waits for a person before it runs; a
// skill marked "on-deny" runs sandboxed, and when the sandbox refused it
// something a person is asked to run it again with exactly that grant,
// once. What was asked and decided is in the log (kairo.approval.*), so a
// restart finds a pending request still pending, and an approved call
// that had not run runs — once: the call's kairo.tool.invoke, and the
// re-run's action id derived from its approval, are what the log checks.

// applyApproval folds an approval event into the action it is for.
func (s *state) applyApproval(ev *abi.Event) {
	switch ev.Type {
	case abi.SubjectApprovalRequested:
		var r abi.ApprovalRequest
		if msgpack.Unmarshal(ev.Data, &r) != nil {
			return
		}
		a := s.actions[r.ActionID]
		if a == nil {
			return
		}
		switch r.Mode {
		case abi.ApprovalAlways:
			if a.approval == "" {
				a.approval, a.approvalState = r.ID, abi.ApprovalPending
				a.progress = "waiting for approval: kairo approve " + r.ID
			}
		case abi.ApprovalOnDeny:
			if a.rerun == "" || a.rerun == asking {
				a.rerun, a.rerunState = r.ID, abi.ApprovalPending
			}
		}
	case abi.SubjectApprovalDecided:
		var d abi.ApprovalDecision
		if msgpack.Unmarshal(ev.Data, &d) != nil {
			return
		}
		a := s.actions[d.ActionID]
		if a == nil {
			return
		}
		state := abi.ApprovalDenied
		switch {
		case d.Withdrawn:
			state = abi.ApprovalWithdrawn
		case d.Approved:
			state = abi.ApprovalApproved
		}
		switch d.ID {
		case a.approval:
			if a.approvalState == abi.ApprovalPending {
				a.approvalState = state
				a.progress = ""
			}
		case a.rerun:
			if a.rerunState == abi.ApprovalPending {
				a.rerunState = state
			}
		}
	}
}

// denied records a refusal of a's process; a later event for the same
// operation and object carries the count so far and replaces the earlier.
func (a *action) denied(d abi.SandboxDenied) {
	for i, x := range a.denials {
		if x.Op == d.Op && x.Object == d.Object {
			a.denials[i] = d
			return
		}
	}
	if len(a.denials) < 64 {
		a.denials = append(a.denials, d)
	}
}

// modeOf is the approval mode of a call of tool with args: the tool's,
// and for a call that runs an installed skill (process.spawn of a skill),
// the stricter of that and the skill's.
func (r *Runtime) modeOf(tool, args string) string {
	if r.cfg.Approval == nil {
		return manifests.ApprovalNever
	}
	m := r.cfg.Approval(tool)
	if s := skillOf(tool, args); s != "" && tool != "skill."+s {
		m = manifests.StricterApproval(m, r.cfg.Approval("skill."+s))
	}
	return m
}

// skillOf is the installed skill a call of tool with args runs: NAME of
// skill.NAME, or the skill a process.spawn names; "" for none.
func skillOf(tool, args string) string {
	if name, ok := strings.CutPrefix(tool, "skill."); ok {
		return name
	}
	if tool == abi.MethodProcessSpawn {
		var a struct {
			Skill string `json:"skill"`
		}
		if json.Unmarshal([]byte(args), &a) == nil {
			return a.Skill
		}
	}
	return ""
}

// gate reports whether the tool call actionID may run now. A call of a
// tool marked "always" asks for an approval the first time and runs once
// it is approved (decided); a re-run holds its approval already.
func (r *Runtime) gate(loop, actionID string, d abi.ActionData) bool {
	if d.Approval != "" || r.modeOf(d.Tool, d.Args) != manifests.ApprovalAlways {
		return true
	}
	r.mu.Lock()
	a := r.st.actions[actionID]
	state := ""
	if a != nil {
		state = a.approvalState
	}
	r.mu.Unlock()
	switch state {
	case abi.ApprovalApproved:
		return true
	case abi.ApprovalPending, abi.ApprovalDenied:
		return false
	}
	out, aerr := r.invoke(abi.MethodApprovalRequest, abi.ApprovalRequest{
		ActionID: actionID, CorrelationID: loop, Tool: d.Tool, Args: d.Args, Mode: abi.ApprovalAlways,
		Reason: d.Tool + " needs a person's approval before it runs",
	})
	if aerr == nil {
		r.asked(actionID, out)
	}
	// A runtime stopping as it asked leaves the call to the next start:
	// asked, it waits there; not asked, it is interrupted.
	if aerr != nil && r.ctx.Err() == nil {
		r.emitIf(&abi.Event{Type: abi.SubjectToolResult, CorrelationID: loop, CausationID: actionID},
			abi.ToolResultEvent{ActionID: actionID, Tool: d.Tool, Status: abi.StatusFailed, Error: "it needs approval, which could not be asked for: " + aerr.Message},
			func() bool { x := r.st.actions[actionID]; return x != nil && x.status == abi.StatusInProgress })
	}
	return false // the decision, when it comes, runs it or fails it
}

// decided acts on a decision of an approval of one of the agent's
// actions: an approved call runs, a denied one fails with who said no, an
// approved re-run runs again with the approval's grants.
func (r *Runtime) decided(ev *abi.Event) {
	var d abi.ApprovalDecision
	if msgpack.Unmarshal(ev.Data, &d) != nil {
		return
	}
	r.mu.Lock()
	a := r.st.actions[d.ActionID]
	if a == nil || a.loop == nil {
		r.mu.Unlock()
		return
	}
	loop, always, rerun := a.loop.id, d.ID == a.approval, d.ID == a.rerun
	data := abi.ActionData{Tool: a.tool, Args: a.args}
	pending := a.status == abi.StatusInProgress && !a.invoked
	r.mu.Unlock()
	switch {
	case always && d.Approved && pending:
		r.startTool(loop, d.ActionID, data)
	case always && !d.Approved && pending:
		why := "not approved by " + d.By
		if d.Reason != "" {
			why += ": " + d.Reason
		}
		r.emitIf(&abi.Event{Type: abi.SubjectToolResult, CorrelationID: loop, CausationID: d.ActionID},
			abi.ToolResultEvent{ActionID: d.ActionID, Tool: data.Tool, Status: abi.StatusFailed, Error: why},
			func() bool {
				x := r.st.actions[d.ActionID]
				return x != nil && x.status == abi.StatusInProgress && !x.invoked
			})
		r.mu.Lock()
		r.obs = append(r.obs, *ev)
		r.mu.Unlock()
	case rerun && d.Approved:
		r.rerunWith(loop, d.ActionID, d.ID, ev.ID)
	case rerun && d.Withdrawn:
		// Its run loop ended: nobody waits for the answer.
	case rerun:
		r.mu.Lock()
		r.obs = append(r.obs, *ev) // the policy hears the no
		r.mu.Unlock()
	}
}

// startTool runs a tool call in a goroutine of the runtime's.
func (r *Runtime) startTool(loop, actionID string, d abi.ActionData) {
	r.mu.Lock()
	halt := r.halts[loop]
	r.mu.Unlock()
	r.wg.Add(1)
	go func() { defer r.wg.Done(); r.runTool(loop, actionID, d, halt) }()
}

// rerunWith runs the refused call actionID again, as an action of its own
// whose id is the approval's: a decision delivered twice, or a restart,
// finds it in the log and runs nothing twice.
func (r *Runtime) rerunWith(loop, actionID, approval, cause string) {
	id := approval + "-run"
	r.mu.Lock()
	a, done := r.st.actions[actionID], r.st.actions[id] != nil
	r.mu.Unlock()
	if a == nil || done {
		return
	}
	d := abi.ActionData{Tool: a.tool, Args: a.args, Approval: approval}
	ev := r.emit(&abi.Event{ID: id, Type: abi.SubjectAgentAction, CorrelationID: loop, CausationID: cause},
		abi.ActionEvent{Type: abi.ActionToolCall, ActionData: d})
	if ev == nil {
		return
	}
	r.startTool(loop, id, d)
}

// maybeAskRerun asks for the re-run of a's call with what the sandbox
// refused it, when its tool is marked on-deny: once its process has ended
// and a refusal is known, whichever comes last.
func (r *Runtime) maybeAskRerun(a *action) {
	r.mu.Lock()
	ask := a.typ == abi.ActionToolCall && a.approvalOf == "" && a.rerun == "" && len(a.denials) > 0 &&
		a.processEnded() && a.loop != nil && skillOf(a.tool, a.args) != ""
	var req abi.ApprovalRequest
	if ask {
		g := proc.GrantsFor(a.denials)
		ask = !g.Empty()
		var lines []string
		for _, d := range a.denials {
			if d.Grant != "" {
				lines = append(lines, d.Op+" "+d.Object)
			}
		}
		req = abi.ApprovalRequest{
			ActionID: a.id, CorrelationID: a.loop.id, Tool: a.tool, Args: a.args, Mode: abi.ApprovalOnDeny,
			Skill: skillOf(a.tool, a.args), Grants: g,
			Reason: "the sandbox refused " + strings.Join(lines, ", ") + "; run it again with that allowed?",
		}
		a.rerun = asking // until the request comes back
	}
	r.mu.Unlock()
	if !ask || r.modeOf(req.Tool, req.Args) != manifests.ApprovalOnDeny {
		if ask {
			r.mu.Lock()
			a.rerun = ""
			r.mu.Unlock()
		}
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		out, aerr := r.invoke(abi.MethodApprovalRequest, req)
		var ap abi.Approval
		if aerr == nil {
			aerr = decodeInto(out, &ap)
		}
		r.mu.Lock()
		if aerr != nil {
			a.rerun = ""
			r.mu.Unlock()
			r.log.Warn("ask for a re-run", "action", a.id, "err", aerr.Message)
			return
		}
		if a.rerun == asking { // else its event, applied meanwhile, set it
			a.rerun, a.rerunState = ap.ID, abi.ApprovalPending
		}
		// Its run loop was canceled while the request was on its way.
		late, status := withdrawsReruns(a.loop.status) && a.rerunState == abi.ApprovalPending, a.loop.status
		r.mu.Unlock()
		if late {
			r.withdraw([]string{ap.ID}, withdrawReason(status, ""))
		}
	}()
}

func decodeInto(raw msgpack.RawMessage, v any) *abi.Error {
	if err := msgpack.Unmarshal(raw, v); err != nil {
		return abi.Errorf(abi.CodeInternal, "decode: %v", err)
	}
	return nil
}

// chatAnswer takes a user's "yes" or "no" as the decision of the agent's
// one pending approval; false when the message is no answer, or there is
// not exactly one to answer (it is then routed as any message).
func (r *Runtime) chatAnswer(ev *abi.Event, m *abi.UserMessage) bool {
	yes, ok := kernel.ChatAnswer(m.Text)
	if !ok {
		return false
	}
	type ask struct {
		id    string
		a     *action
		rerun bool
	}
	var pending []ask
	r.mu.Lock()
	named := r.st.loopNamed(m.RunLoopID)
	for _, l := range r.st.open {
		if m.RunLoopID != "" && l != named {
			continue // a message into a task decides only what that task asks
		}
		for _, a := range l.actions {
			if a.approvalState == abi.ApprovalPending {
				pending = append(pending, ask{a.approval, a, false})
			}
			if a.rerunState == abi.ApprovalPending {
				pending = append(pending, ask{a.rerun, a, true})
			}
		}
	}
	r.mu.Unlock()
	if len(pending) != 1 {
		return false
	}
	p := pending[0]
	id := m.MessageID
	if id == "" {
		id = ev.ID
	}
	out, aerr := r.invoke(abi.MethodApprovalDecide, abi.ApprovalDecision{ID: p.id, Approved: yes, MessageID: id})
	if aerr != nil {
		r.log.Warn("the chat's answer to an approval", "approval", p.id, "err", aerr.Message)
		return false
	}
	// The sender hears what its answer did, in the approval's run loop.
	var res abi.Approval
	msgpack.Unmarshal(out, &res)
	r.mu.Lock()
	text := decidedText(p.a, p.rerun, yes)
	loop := p.a.loop.id
	r.mu.Unlock()
	if res.Already && res.Decided != nil {
		word := "denied"
		if res.Decided.Approved {
			word = "approved"
		}
		text = fmt.Sprintf("%s was %s before, by %s; your answer changed nothing.", p.id, word, res.Decided.By)
	}
	r.answerAside(ev, *m, loop, text)
	return true
}

// resumeApprovals, after the state is rebuilt: an approved call that had
// not run runs, an approved re-run not made is made, and a refused call of
// an on-deny tool whose request never went out is asked for.
func (r *Runtime) resumeApprovals() {
	type todo struct {
		loop, id, approval string
		data               abi.ActionData
		rerun              bool
	}
	var xs []todo
	var ask []*action
	r.mu.Lock()
	for _, l := range r.st.open {
		for _, a := range l.actions {
			switch {
			case a.approvalState == abi.ApprovalApproved && a.status == abi.StatusInProgress && !a.invoked:
				xs = append(xs, todo{loop: l.id, id: a.id, data: abi.ActionData{Tool: a.tool, Args: a.args}})
			case a.rerunState == abi.ApprovalApproved && r.st.actions[a.rerun+"-run"] == nil:
				xs = append(xs, todo{loop: l.id, id: a.id, approval: a.rerun, rerun: true})
			case a.rerun == "" && len(a.denials) > 0 && a.processEnded():
				ask = append(ask, a)
			}
		}
	}
	r.mu.Unlock()
	for _, x := range xs {
		if x.rerun {
			r.rerunWith(x.loop, x.id, x.approval, x.approval+"-decided")
		} else {
			r.startTool(x.loop, x.id, x.data)
		}
	}
	for _, a := range ask {
		r.maybeAskRerun(a)
	}
	r.withdrawStale()
}

// asking stands for the id of a re-run's approval while its request is on
// its way to the kernel.
const asking = "asking"

// waitsForApproval reports whether a, in progress, waits for a person
// rather than for a process: not interrupted by a restart.
func (a *action) waitsForApproval() bool {
	return a.approvalState == abi.ApprovalPending || (a.approvalState == abi.ApprovalApproved && !a.invoked)
}

// processEnded reports whether a's process has ended by itself (not by a
// cancel): what a re-run would repeat.
func (a *action) processEnded() bool {
	return a.processID != "" && a.status != abi.StatusInProgress && a.status != abi.StatusCanceled
}
