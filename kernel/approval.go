package kernel

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sandbox"
	"github.com/vmihailenco/msgpack/v5"
)

// approvalSource is the source of the kernel's approval events.
const approvalSource = abi.PrincipalKernel + "/approval"

// Bounds of the approval table: pending ones past maxPendingApprovals are
// refused (a policy that asks for a thousand runs at once asks for too
// many); decided ones are kept, the newest decided, up to
// maxDecidedApprovals (approval_fold.go).
const (
	maxPendingApprovals = 256
	maxApprovalArgs     = 64 << 10
	maxApprovalReason   = 1024
	maxApprovalGrants   = 64
	// DefaultApprovalTimeout is how long a request waits for a person
	// before it is denied, unless [Config.ApprovalTimeout] says otherwise.
	DefaultApprovalTimeout = 10 * time.Minute
)

// The ids the kernel derives for an approval of action X: "ap-X", or
// "ap-X-rerun" on deny; its decision's event is that id and "-decided".
// An actionId that ends in either suffix is refused, so no two of them
// are one id, and one is short enough that the longest still fits
// abi.MaxIDLen. No client stores an id without its scope ([abi.ScopeEventID]),
// so none holds one of these first.
const (
	approvalPrefix = "ap-"
	rerunSuffix    = "-rerun"
	decidedSuffix  = "-decided"
	maxActionIDLen = abi.MaxIDLen - len(approvalPrefix) - len(rerunSuffix) - len(decidedSuffix)
)

// approvals is the kernel's table of approvals: a fold of the
// kairo.approval events (and of the spawns that spent an approval's
// grants), rebuilt from the log by LoadApprovals and kept by the methods
// as they publish.
type approvals struct {
	k       *Kernel
	timeout time.Duration

	mu sync.Mutex
	approvalTable
	closed bool
	keep   func() // stops the checkpoint's saves; nil without one
	read   uint64 // events LoadApprovals read from the log
}

func (k *Kernel) registerApprovals() {
	t := k.opts.ApprovalTimeout
	if t <= 0 {
		t = DefaultApprovalTimeout
	}
	k.approvals = &approvals{k: k, timeout: t}
	k.approvals.onDrop = func(a *abi.Approval) {
		k.logger().Info("a decided approval left the kernel's window; the log keeps it", "approval", a.ID, "state", a.State, "window", maxDecidedApprovals)
	}
	for _, m := range []Method{
		{Name: abi.MethodApprovalRequest, Summary: "ask a person to approve an action (the agent and the host)", Handler: k.approvalRequest},
		{Name: abi.MethodApprovalDecide, Summary: "approve or deny a pending approval (the operator)", Handler: k.approvalDecide},
		{Name: abi.MethodApprovalList, Summary: "the pending approvals, or all recent ones", Handler: k.approvalList, Quick: true},
	} {
		k.Register(m)
	}
}

// add records a request as pending (idempotent by id).
func (ap *approvals) add(r abi.ApprovalRequest, at time.Time) *approvalEntry {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	return ap.approvalTable.add(r, at, 0)
}

// remove takes back e, a request whose event could not be stored.
func (ap *approvals) remove(e *approvalEntry) {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	if ap.byID[e.a.ID] == e && e.a.State == abi.ApprovalPending {
		delete(ap.byID, e.a.ID)
		ap.order = slices.DeleteFunc(ap.order, func(x *approvalEntry) bool { return x == e })
	}
}

// decided records d, the first decision of its approval, stored at seq; a
// later one changes nothing.
func (ap *approvals) decided(d abi.ApprovalDecision, seq uint64) {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	if e := ap.approvalTable.decided(d, seq); e != nil && e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
}

// armLocked starts e's timeout: past its Expires it is denied, by
// "timeout".
func (ap *approvals) armLocked(e *approvalEntry) {
	if ap.closed {
		return
	}
	id := e.a.ID
	e.timer = time.AfterFunc(time.Until(e.a.Expires), func() {
		ap.k.decideApproval(context.Background(), abi.ApprovalDecision{
			ID: id, By: "timeout", Reason: "nobody decided within " + ap.timeout.String(),
		})
	})
}

// close stops every timeout; the pending approvals stay pending in the log.
func (ap *approvals) close() {
	ap.mu.Lock()
	ap.closed = true
	for _, e := range ap.order {
		if e.timer != nil {
			e.timer.Stop()
			e.timer = nil
		}
	}
	keep := ap.keep
	ap.keep = nil
	ap.mu.Unlock()
	if keep != nil {
		keep()
	}
}

func (k *Kernel) approvalRequest(ctx context.Context, c *Call) (any, error) {
	var r abi.ApprovalRequest
	if err := c.Decode(&r); err != nil {
		return nil, err
	}
	caller := c.Session.Caller()
	switch caller.Kind {
	case KindAgent, KindHost, KindOperator:
	default:
		return nil, abi.Errorf(abi.CodePermissionDenied, "permission denied: %s may not ask for approvals; the agent and the host do", caller)
	}
	if err := checkApprovalRequest(&r); err != nil {
		return nil, err
	}
	r.ID = approvalPrefix + r.ActionID
	if r.Mode == abi.ApprovalOnDeny {
		r.ID += rerunSuffix
	}
	r.Requester = caller.Source()
	ap := k.approvals
	ap.mu.Lock()
	if e := ap.byID[r.ID]; e != nil {
		a := e.a
		ap.mu.Unlock()
		return a, nil // asked again: the same approval
	}
	pending := 0
	for _, e := range ap.order {
		if e.a.State == abi.ApprovalPending {
			pending++
		}
	}
	ap.mu.Unlock()
	if pending >= maxPendingApprovals {
		return nil, abi.Errorf(abi.CodeUnavailable, "%d approvals are pending already, the most the kernel holds; decide some (kairo approvals) first", pending)
	}
	now := time.Now()
	r.Expires = now.Add(ap.timeout)
	raw, err := msgpack.Marshal(r)
	if err != nil {
		return nil, err
	}
	// The event's id is the approval's: asked twice, the log holds it once.
	ev := &abi.Event{ID: r.ID, Type: abi.SubjectApprovalRequested, Source: approvalSource, Time: now,
		CorrelationID: r.CorrelationID, CausationID: r.ActionID, Data: raw}
	// In the table before the event is out: whoever sees the event may
	// decide at once.
	// The publish is waited for even when the caller leaves: an event
	// stored while its caller gave up must be in the table too.
	e := ap.add(r, now)
	res, err := k.Bus.Publish(context.WithoutCancel(ctx), ev)
	if err != nil {
		ap.remove(e)
		return nil, err
	}
	if res.Duplicate {
		// Asked before, and decided so long ago that it left the window:
		// the log holds its decision, which a new entry would hide.
		ap.remove(e)
		return nil, abi.Errorf(abi.CodeInvalidParams, "approval %s was asked for before and has left the kernel's window of the %d newest decided; `kairo events replay %s` shows its decision; ask with a new actionId", r.ID, maxDecidedApprovals, abi.SubjectApprovalDecided)
	}
	ap.mu.Lock()
	e.reqSeq = res.Seq
	if e.a.State == abi.ApprovalPending && e.timer == nil {
		ap.armLocked(e)
	}
	a := e.a
	ap.mu.Unlock()
	return a, nil
}

// checkApprovalRequest refuses a request the kernel should not show a
// person: unbounded, unnamed or granting what no manifest could.
func checkApprovalRequest(r *abi.ApprovalRequest) error {
	bad := func(format string, args ...any) error {
		return abi.Errorf(abi.CodeInvalidParams, "approval.request: "+format, args...)
	}
	switch {
	case r.ActionID == "" || len(r.ActionID) > maxActionIDLen:
		return bad("actionId must name the action, in at most %d bytes", maxActionIDLen)
	case strings.HasSuffix(r.ActionID, rerunSuffix) || strings.HasSuffix(r.ActionID, decidedSuffix):
		// "ap-X-rerun" would be X's re-run and "ap-X-decided" X's decision.
		return bad("actionId %q ends in %q or %q, which the kernel adds to approvals' ids; choose another", r.ActionID, rerunSuffix, decidedSuffix)
	case r.Tool == "" || len(r.Tool) > abi.MaxIDLen:
		return bad("tool must name the tool, in at most %d bytes", abi.MaxIDLen)
	case r.Mode != abi.ApprovalAlways && r.Mode != abi.ApprovalOnDeny:
		return bad("mode %q: want %q or %q", r.Mode, abi.ApprovalAlways, abi.ApprovalOnDeny)
	case len(r.Args) > maxApprovalArgs:
		return bad("args are %d bytes, more than %d", len(r.Args), maxApprovalArgs)
	case len(r.Reason) > maxApprovalReason:
		return bad("reason is %d bytes, more than %d", len(r.Reason), maxApprovalReason)
	case len(r.CorrelationID) > abi.MaxIDLen || len(r.Skill) > abi.MaxIDLen:
		return bad("correlationId and skill are at most %d bytes", abi.MaxIDLen)
	}
	g := r.Grants
	if n := len(g.Read) + len(g.Write) + len(g.Exec) + len(g.ConnectTCP) + len(g.BindTCP) + len(g.Hosts); n > maxApprovalGrants {
		return bad("%d grants, more than %d", n, maxApprovalGrants)
	}
	if !g.Empty() && (r.Mode != abi.ApprovalOnDeny || r.Skill == "") {
		return bad("grants are asked for the re-run of a refused skill only: give mode %q and the skill", abi.ApprovalOnDeny)
	}
	for _, ps := range [][]string{g.Read, g.Write, g.Exec} {
		for _, p := range ps {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p || len(p) > abi.MaxPathLen {
				return bad("grant path %q: want a clean absolute path", p)
			}
		}
	}
	for _, p := range slices.Concat(g.ConnectTCP, g.BindTCP) {
		if p == 0 {
			return bad("grant port 0 is not a port")
		}
	}
	for _, h := range g.Hosts {
		if err := manifests.CheckEgressEntry(h); err != nil {
			return bad("grant host: %v", err)
		}
	}
	return nil
}

func (k *Kernel) approvalDecide(ctx context.Context, c *Call) (any, error) {
	var d abi.ApprovalDecision
	if err := c.Decode(&d); err != nil {
		return nil, err
	}
	caller := c.Session.Caller()
	ap := k.approvals
	ap.mu.Lock()
	e := ap.byID[d.ID]
	var a abi.Approval
	if e != nil {
		a = e.a
	}
	ap.mu.Unlock()
	if e == nil {
		return nil, abi.Errorf(abi.CodeNotFound, "no approval %q among the pending ones and the %d decided last; approval.list (kairo approvals) shows them, `kairo events replay %s` the older decisions", d.ID, maxDecidedApprovals, abi.SubjectApprovalDecided)
	}
	switch {
	case d.Withdrawn:
		// What a run loop asked for is taken back by who asked, when the
		// run loop ends: nobody is left to run the action for.
		if a.Requester != caller.Source() {
			return nil, abi.Errorf(abi.CodePermissionDenied, "permission denied: approval %s was asked for by %s; only the requester withdraws it, not %s", d.ID, a.Requester, caller)
		}
		if d.Approved || d.MessageID != "" {
			return nil, abi.Errorf(abi.CodeInvalidParams, "a withdrawal neither approves nor names a message: leave approved and messageId empty")
		}
	case caller.Kind == KindOperator:
		if d.MessageID != "" {
			return nil, abi.Errorf(abi.CodeInvalidParams, "messageId is the agent's, for a decision taken from the chat; leave it empty")
		}
	case caller.Kind == KindAgent:
		// The agent passes on the user's "yes" or "no" from the chat: the
		// kernel reads that message itself.
		if err := k.chatDecision(ctx, caller, &a, &d); err != nil {
			return nil, err
		}
	default:
		return nil, abi.Errorf(abi.CodePermissionDenied, "permission denied: only the operator decides approvals, not %s", caller)
	}
	if len(d.Reason) > maxApprovalReason {
		return nil, abi.Errorf(abi.CodeInvalidParams, "reason is %d bytes, more than %d", len(d.Reason), maxApprovalReason)
	}
	d.By = caller.Source()
	return k.decideApproval(ctx, d)
}

// decisionStored, when set (by the tests), runs between the store of a
// decision and its application: the window a subscriber may act in.
var decisionStored func()

// decideApproval records d as its approval's decision, unless one was
// recorded before: then it answers that one, with Already set. The
// decided event's id is derived from the approval's, so a decision
// delivered twice — from two doors at once, or retried — is stored once.
func (k *Kernel) decideApproval(ctx context.Context, d abi.ApprovalDecision) (abi.Approval, error) {
	ap := k.approvals
	ap.mu.Lock()
	e := ap.byID[d.ID]
	if e == nil {
		ap.mu.Unlock()
		return abi.Approval{}, abi.Errorf(abi.CodeNotFound, "no approval %q", d.ID)
	}
	if e.a.State != abi.ApprovalPending {
		a := e.a
		ap.mu.Unlock()
		a.Already = true
		return a, nil
	}
	d.ActionID = e.a.ActionID
	loop := e.a.CorrelationID
	deciding := make(chan struct{})
	if e.deciding == nil {
		e.deciding = deciding
	}
	ap.mu.Unlock()
	settled := func() {
		ap.mu.Lock()
		if e.deciding == deciding {
			e.deciding = nil
			close(deciding)
		}
		ap.mu.Unlock()
	}
	raw, err := msgpack.Marshal(d)
	if err != nil {
		settled()
		return abi.Approval{}, err
	}
	ev := &abi.Event{ID: d.ID + decidedSuffix, Type: abi.SubjectApprovalDecided, Source: approvalSource,
		CorrelationID: loop, CausationID: d.ID, Data: raw}
	res, err := k.Bus.Publish(context.WithoutCancel(ctx), ev) // as in approvalRequest
	if err != nil {
		settled()
		return abi.Approval{}, err
	}
	if decisionStored != nil {
		decisionStored()
	}
	ap.decided(d, res.Seq)
	settled()
	ap.mu.Lock()
	a := e.a
	ap.mu.Unlock()
	a.Already = res.Duplicate || a.Decided == nil || a.Decided.By != d.By || a.Decided.Approved != d.Approved || a.Decided.Withdrawn != d.Withdrawn
	return a, nil
}

// chatDecision checks a decision the agent passes on from the chat: d
// names a user message the operator (or an input plugin the operator
// installed) sent after the request, which says yes or no as d does.
func (k *Kernel) chatDecision(ctx context.Context, caller Caller, a *abi.Approval, d *abi.ApprovalDecision) error {
	if a.Requester != caller.Source() {
		return abi.Errorf(abi.CodePermissionDenied, "permission denied: %s may pass on the chat's decisions of its own requests only", caller)
	}
	if d.MessageID == "" {
		return abi.Errorf(abi.CodePermissionDenied, "permission denied: the agent decides an approval only from the user's message (messageId); the operator decides with kairo approve or kairo deny")
	}
	pat, err := abi.CompilePattern(abi.SubjectUserMessage)
	if err != nil {
		return err
	}
	var found *abi.UserMessage
	var src string
	err = k.Bus.Replay(ctx, bus.Query{Since: a.RequestedAt, Pattern: pat, Limit: 10000}, func(ev *abi.Event) error {
		var m abi.UserMessage
		if msgpack.Unmarshal(ev.Data, &m) == nil && (m.MessageID == d.MessageID || ev.ID == d.MessageID) {
			found, src = &m, ev.Source
			return bus.ErrStop
		}
		return nil
	})
	if err != nil {
		return err
	}
	if found == nil {
		return abi.Errorf(abi.CodePermissionDenied, "permission denied: no user message %q after the request %s", d.MessageID, a.ID)
	}
	// A plugin's message is the user's only when the plugin spoke for
	// itself, not for a writer it relayed (host/wasm, writer.go).
	_, _, relayed := abi.Relayed(src)
	if relayed || !strings.HasPrefix(src, abi.PrincipalOperator+"/") && !strings.HasPrefix(src, abi.PrincipalPlugin+"/") {
		return abi.Errorf(abi.CodePermissionDenied, "permission denied: message %q is from %s, not the user", d.MessageID, src)
	}
	yes, ok := ChatAnswer(found.Text)
	if !ok || yes != d.Approved {
		return abi.Errorf(abi.CodePermissionDenied, "permission denied: message %q does not say %s", d.MessageID, map[bool]string{true: "yes", false: "no"}[d.Approved])
	}
	d.Reason = "answered " + strings.TrimSpace(found.Text) + " in the chat"
	return nil
}

// ChatAnswer reads a chat message as an answer to an approval: "yes",
// "y", "approve", "ok" are yes; "no", "n", "deny" are no; anything else is
// not an answer.
func ChatAnswer(text string) (yes, ok bool) {
	switch strings.ToLower(strings.TrimRight(strings.TrimSpace(text), ".!")) {
	case "yes", "y", "approve", "approved", "ok":
		return true, true
	case "no", "n", "deny", "denied":
		return false, true
	}
	return false, false
}

func (k *Kernel) approvalList(ctx context.Context, c *Call) (any, error) {
	var p abi.ApprovalListParams
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	switch caller := c.Session.Caller(); caller.Kind {
	case KindOperator, KindAgent, KindHost:
	default:
		return nil, abi.Errorf(abi.CodePermissionDenied, "permission denied: %s may not list approvals", caller)
	}
	return abi.ApprovalListResult{Approvals: k.Approvals(p.All)}, nil
}

// Approvals lists the pending approvals, oldest first; with all, every one
// the kernel keeps.
func (k *Kernel) Approvals(all bool) []abi.Approval {
	ap := k.approvals
	ap.mu.Lock()
	defer ap.mu.Unlock()
	out := []abi.Approval{}
	for _, e := range ap.order {
		if all || e.a.State == abi.ApprovalPending {
			out = append(out, e.a)
		}
	}
	return out
}

// spendApproval gives the grants of approval id to one spawn of skill by
// caller: it must be an approved on-deny request of that caller for that
// skill whose grants no spawn spent yet. release gives them back if the
// spawn fails; used records the process that spent them.
func (k *Kernel) spendApproval(caller Caller, id, skill string) (g abi.Grants, used func(processID string), release func(), err error) {
	ap := k.approvals
	ap.mu.Lock()
	defer ap.mu.Unlock()
	// A decision stored but not applied yet: the caller learnt of it from
	// the bus before its publisher applied it. Waited for, a while.
	if e := ap.byID[id]; e != nil && e.a.State == abi.ApprovalPending && e.deciding != nil {
		ch := e.deciding
		ap.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
		}
		ap.mu.Lock()
	}
	e := ap.byID[id]
	switch {
	case e == nil:
		return g, nil, nil, abi.Errorf(abi.CodeNotFound, "no approval %q", id)
	case e.a.Requester != caller.Source() && caller.Kind != KindOperator:
		return g, nil, nil, abi.Errorf(abi.CodePermissionDenied, "permission denied: approval %s was asked for by %s, not %s", id, e.a.Requester, caller)
	case e.a.State != abi.ApprovalApproved:
		return g, nil, nil, abi.Errorf(abi.CodePermissionDenied, "permission denied: approval %s is %s, not approved", id, e.a.State)
	case e.a.Skill != skill:
		return g, nil, nil, abi.Errorf(abi.CodePermissionDenied, "permission denied: approval %s is for the skill %q, not %q", id, e.a.Skill, skill)
	case e.a.UsedBy != "":
		return g, nil, nil, abi.Errorf(abi.CodePermissionDenied, "permission denied: approval %s was spent by %s; an approval's grants hold for one run", id, e.a.UsedBy)
	}
	e.a.UsedBy = "spawning"
	used = func(pid string) { ap.mu.Lock(); e.a.UsedBy = pid; ap.mu.Unlock() }
	release = func() { ap.mu.Lock(); e.a.UsedBy = ""; ap.mu.Unlock() }
	return e.a.Grants, used, release, nil
}

// withGrants widens spec's policy by an approval's grants g, and nothing
// else.
func withGrants(spec *proc.Spec, g abi.Grants) {
	base := spec.Policy
	if base == nil {
		return
	}
	spec.Policy = func(work, tmp string) (*sandbox.Policy, error) {
		p, err := base(work, tmp)
		if err != nil {
			return nil, err
		}
		p.Read = appendNew(p.Read, g.Read...)
		p.Write = appendNew(p.Write, g.Write...)
		p.Exec = appendNew(p.Exec, g.Exec...)
		p.ConnectTCP = appendNew(p.ConnectTCP, g.ConnectTCP...)
		p.BindTCP = appendNew(p.BindTCP, g.BindTCP...)
		p.Hosts = appendNew(p.Hosts, g.Hosts...)
		return p, nil
	}
}

func appendNew[T comparable](s []T, more ...T) []T {
	s = slices.Clip(s)
	for _, v := range more {
		if !slices.Contains(s, v) {
			s = append(s, v)
		}
	}
	return s
}
