package kernel

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/checkpoint"
)

// The approval table holds what is live — every pending approval — and a
// window of what ended: the maxDecidedApprovals decided last. A decision
// is spent (an approved re-run's grants) within moments of being made,
// and a person reading `kairo approvals --all` reads a page, not years;
// what leaves the window stays in the log. The window bounds the table at
// (256 + 256) approvals of at most 64 KiB of arguments each.
// Why: docs/RATIONALE.md#a-start-reads-what-is-live.
const maxDecidedApprovals = 256

// approvalFoldVersion is the version of the approvals' checkpoint: a
// change of what the fold keeps, or of how it reads an event, bumps it, so
// that a checkpoint of the old fold is refused and the log folded again.
const approvalFoldVersion = 1

// approvalCheckpointEvery is how often the approvals' checkpoint folds the
// log's new events and is saved, besides at Close.
const approvalCheckpointEvery = time.Minute

// approvalTable is the fold of the approval events: the live table's and
// the checkpoint's. It takes no lock; its owner does.
type approvalTable struct {
	byID     map[string]*approvalEntry
	order    []*approvalEntry // requested, oldest first
	decidedN int              // of order, those decided
	dropped  int              // decided ones the window dropped
	onDrop   func(a *abi.Approval)
}

type approvalEntry struct {
	a     abi.Approval
	timer *time.Timer
	// The seqs of the request and the decision: what a checkpoint's
	// approved grants are checked against. 0: not known.
	reqSeq, decSeq uint64
	// deciding is open while decideApproval has published a decision it
	// has not applied yet: the agent, which learns of it from the bus,
	// may try to spend the approval in between (spendApproval waits).
	deciding chan struct{}
}

// add records a request, stored at seq, as pending (idempotent by id).
func (t *approvalTable) add(r abi.ApprovalRequest, at time.Time, seq uint64) *approvalEntry {
	if e := t.byID[r.ID]; e != nil {
		return e
	}
	if t.byID == nil {
		t.byID = map[string]*approvalEntry{}
	}
	e := &approvalEntry{a: abi.Approval{ApprovalRequest: r, State: abi.ApprovalPending, RequestedAt: at}, reqSeq: seq}
	t.byID[r.ID] = e
	t.order = append(t.order, e)
	return e
}

// decided records d, stored at seq, as its approval's decision and returns
// the approval; nil when it was decided before or is not in the table.
// Past the window it drops the decided one decided first.
func (t *approvalTable) decided(d abi.ApprovalDecision, seq uint64) *approvalEntry {
	e := t.byID[d.ID]
	if e == nil || e.a.State != abi.ApprovalPending {
		return nil
	}
	e.a.State = abi.ApprovalDenied
	switch {
	case d.Withdrawn:
		e.a.State = abi.ApprovalWithdrawn
	case d.Approved:
		e.a.State = abi.ApprovalApproved
	}
	e.a.Decided = &d
	e.decSeq = seq
	t.decidedN++
	if t.decidedN > maxDecidedApprovals {
		t.dropFirstDecided()
	}
	return e
}

// dropFirstDecided drops the decided approval decided first (the lowest
// seq; one of seq 0, decided by this kernel and not yet stored, never).
func (t *approvalTable) dropFirstDecided() {
	at := -1
	for i, e := range t.order {
		if e.a.State != abi.ApprovalPending && e.decSeq != 0 && (at < 0 || e.decSeq < t.order[at].decSeq) {
			at = i
		}
	}
	if at < 0 {
		return
	}
	e := t.order[at]
	t.order = slices.Delete(t.order, at, at+1)
	delete(t.byID, e.a.ID)
	t.decidedN--
	t.dropped++
	if t.onDrop != nil {
		t.onDrop(&e.a)
	}
}

// apply folds ev, an approval or spawn event of the log, as the kernel
// of host wrote it.
func (t *approvalTable) apply(ev *abi.Event, host string) {
	// Another host's approvals are its own kernel's: its agent asked, and
	// only its agent acts on the decision.
	if ev.Host != host {
		return
	}
	switch ev.Type {
	case abi.SubjectApprovalRequested:
		var r abi.ApprovalRequest
		if ev.Source == approvalSource && msgpack.Unmarshal(ev.Data, &r) == nil && r.ID != "" {
			t.add(r, ev.Time, ev.Seq)
		}
	case abi.SubjectApprovalDecided:
		var d abi.ApprovalDecision
		if ev.Source == approvalSource && msgpack.Unmarshal(ev.Data, &d) == nil {
			t.decided(d, ev.Seq)
		}
	case abi.SubjectProcessSpawned:
		var d abi.ProcessSpawned
		if msgpack.Unmarshal(ev.Data, &d) == nil && d.Approval != "" {
			if e := t.byID[d.Approval]; e != nil {
				e.a.UsedBy = d.ProcessID
			}
		}
	}
}

// savedApproval is an approval as a checkpoint keeps it.
type savedApproval struct {
	A      abi.Approval `msgpack:"a"`
	ReqSeq uint64       `msgpack:"req"`
	DecSeq uint64       `msgpack:"dec,omitempty"`
}

// EncodeMsgpack writes the table as a checkpoint keeps it: its approvals,
// oldest requested first.
func (t *approvalTable) EncodeMsgpack(enc *msgpack.Encoder) error {
	out := make([]savedApproval, len(t.order))
	for i, e := range t.order {
		out[i] = savedApproval{A: e.a, ReqSeq: e.reqSeq, DecSeq: e.decSeq}
	}
	return enc.Encode(out)
}

// DecodeMsgpack reads what EncodeMsgpack wrote.
func (t *approvalTable) DecodeMsgpack(dec *msgpack.Decoder) error {
	var in []savedApproval
	if err := dec.Decode(&in); err != nil {
		return err
	}
	*t = approvalTable{byID: make(map[string]*approvalEntry, len(in)), onDrop: t.onDrop}
	for _, s := range in {
		if t.byID[s.A.ID] != nil {
			return fmt.Errorf("approval %s twice", s.A.ID)
		}
		e := &approvalEntry{a: s.A, reqSeq: s.ReqSeq, decSeq: s.DecSeq}
		t.byID[s.A.ID] = e
		t.order = append(t.order, e)
		if s.A.State != abi.ApprovalPending {
			t.decidedN++
		}
	}
	return nil
}

var approvalSubjects = []*abi.Pattern{abi.MustCompilePattern(abi.SubjectApprovalAll), abi.MustCompilePattern(abi.SubjectProcessSpawned)}

// LoadApprovals rebuilds the approval table from the log — from the
// approvals' checkpoint and the events after it, when the kernel has a
// checkpoint folder ([Config.Checkpoints]) and the log agrees with it: a
// request with no decision is pending again, with what is left of its time
// (one whose time ran out while the daemon was down is denied now), and an
// approval whose grants a spawn spent stays spent. The daemon calls it
// once, before it serves; from then on the checkpoint is saved every
// approvalCheckpointEvery and at Close.
func (k *Kernel) LoadApprovals(ctx context.Context) error {
	f := k.approvalFold()
	if err := f.Start(ctx); err != nil {
		return fmt.Errorf("load approvals: %w", err)
	}
	ap := k.approvals
	ap.mu.Lock()
	defer ap.mu.Unlock()
	ap.read = f.Read()
	f.State(func(t *approvalTable) {
		if t.dropped > 0 {
			k.logger().Info("decided approvals older than the kernel's window are left in the log", "left", t.dropped, "window", maxDecidedApprovals)
		}
		for _, e := range t.order {
			if ap.byID[e.a.ID] != nil {
				continue
			}
			c := &approvalEntry{a: e.a, reqSeq: e.reqSeq, decSeq: e.decSeq} // the live table's own
			if ap.byID == nil {
				ap.byID = map[string]*approvalEntry{}
			}
			ap.byID[c.a.ID] = c
			ap.order = append(ap.order, c)
			if c.a.State != abi.ApprovalPending {
				ap.decidedN++
			}
		}
	})
	for _, e := range ap.order {
		if e.a.State == abi.ApprovalPending && e.timer == nil {
			ap.armLocked(e)
		}
	}
	if f.Path != "" && ap.keep == nil && !ap.closed {
		ap.keep = f.Keep(approvalCheckpointEvery)
	}
	return nil
}

// approvalFold is the fold of the approvals kept in their checkpoint.
func (k *Kernel) approvalFold() *checkpoint.Fold[approvalTable] {
	f := &checkpoint.Fold[approvalTable]{
		Bus: k.Bus, Version: approvalFoldVersion, Subjects: approvalSubjects, Logger: k.opts.Logger,
		Apply:  func(t *approvalTable, ev *abi.Event) { t.apply(ev, k.Bus.Host()) },
		Verify: k.verifyApprovals,
	}
	if k.opts.Checkpoints != "" {
		f.Path = filepath.Join(k.opts.Checkpoints, "approvals.ckp")
	}
	return f
}

// verifyApprovals checks what a checkpoint says grants authority — an
// approved request with grants no spawn spent — against the events it
// names: the request and the decision must be in the log as the kernel
// wrote them. A checkpoint is a cache; a grant the log never recorded is
// not taken from one.
func (k *Kernel) verifyApprovals(ctx context.Context, t *approvalTable) error {
	for _, e := range t.order {
		a := &e.a
		if a.State != abi.ApprovalApproved || a.Grants.Empty() || a.UsedBy != "" {
			continue
		}
		var r abi.ApprovalRequest
		if err := k.readOwn(ctx, e.reqSeq, a.ID, abi.SubjectApprovalRequested, &r); err != nil {
			return fmt.Errorf("approval %s: %w", a.ID, err)
		}
		var d abi.ApprovalDecision
		if err := k.readOwn(ctx, e.decSeq, a.ID+decidedSuffix, abi.SubjectApprovalDecided, &d); err != nil {
			return fmt.Errorf("approval %s: %w", a.ID, err)
		}
		sameGrants, _ := msgpack.Marshal(r.Grants)
		itsGrants, _ := msgpack.Marshal(a.Grants)
		if r.ID != a.ID || r.Skill != a.Skill || r.Requester != a.Requester || string(sameGrants) != string(itsGrants) || !d.Approved || d.Withdrawn || d.ID != a.ID {
			return fmt.Errorf("approval %s: approved with grants, which its events at %d and %d do not say", a.ID, e.reqSeq, e.decSeq)
		}
	}
	return nil
}

// readOwn decodes into v the event at seq, which must be id, of subject,
// from this host's kernel.
func (k *Kernel) readOwn(ctx context.Context, seq uint64, id, subject string, v any) error {
	var err error
	found := false
	if seq > 0 {
		err = k.Bus.Replay(ctx, bus.Query{FromSeq: seq, ToSeq: seq, Limit: 1}, func(ev *abi.Event) error {
			found = ev.Seq == seq && ev.ID == id && ev.Type == subject && ev.Source == approvalSource && ev.Host == k.Bus.Host()
			if found {
				return msgpack.Unmarshal(ev.Data, v)
			}
			return bus.ErrStop
		})
	}
	switch {
	case err != nil && !errors.Is(err, bus.ErrStop):
		return err
	case !found:
		return fmt.Errorf("the log has no %s %s at %d", subject, id, seq)
	}
	return nil
}
