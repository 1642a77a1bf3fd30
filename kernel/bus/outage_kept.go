package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus/internal/hook"
)

// Facts kept through an outage.
//
// A process's exit happens whether or not the store can be reached, and
// nobody publishes it again: refused, it would be lost, and the run loop
// that waits for it would stay open for good. So the kernel publishes what
// it observes — kairo.process.>, kairo.sandbox.denied — with PublishKept:
// an event the store cannot take because it is away (IsUnreachable) or
// full (IsDiskFull) is kept by the bus, in memory and bounded by MaxKept,
// and appended, in order and with its ID, before anything else once the
// store takes events again. A publisher that can try again itself (a
// client's events.publish, an approval) is refused as before: it has
// someone to tell.
//
// The bus, not the kernel, keeps them, since only the bus can put them
// where they belong: it appends them under the lock that orders every
// append (b.mu), first thing in the next append — the unreachable probe's
// right after the outage's record, the full probe's just before
// kairo.system.store.writable — so nothing published after a kept fact is
// stored before it, and no goroutine or timer is added: the probes that
// already wait for the store to return bring them in. The same IDs make
// a try that was stored though its answer was lost a duplicate, never a
// second copy.

// MaxKept bounds the facts the bus keeps while its store is away. Past
// it, facts are dropped (refused as any event is) and counted, and
// [SubjectStoreDropped] says how many once the store is back.
const MaxKept = 4096

// SubjectStoreDropped is published once the store takes events again if
// facts were dropped during the outage because [MaxKept] were kept already.
const SubjectStoreDropped = abi.SubjectSystemStoreDropped

// StoreDropped is the data of [SubjectStoreDropped].
type StoreDropped struct {
	Store   string    `msgpack:"store"`
	Since   time.Time `msgpack:"since"`   // the first drop
	Dropped uint64    `msgpack:"dropped"` // facts not kept, so never stored
	Kept    int       `msgpack:"kept"`    // facts kept and stored before this report
}

// ErrKept is what PublishKept's error matches ([errors.Is]) when the event
// was not stored yet but kept, to be appended once the store is back.
var ErrKept = errors.New("kept by the bus until the store takes events again")

// keptState is the queue of kept facts. Its mu is taken under b.mu.
type keptState struct {
	n       atomic.Int32 // len(q), and 1 more with a report due; read without mu by every append
	mu      sync.Mutex
	q       []*abi.Event
	dropped uint64
	since   time.Time // of the first drop
	report  string    // the ID of SubjectStoreDropped, the same on every try
	store   string    // the store's Describe and the bus's host, for the report
	host    string
}

// PublishKept publishes ev, a fact the kernel observed, as Publish does,
// but keeps it when the store is away or full instead of losing it: the
// error then matches [ErrKept] (and [IsUnreachable] or [IsDiskFull]), and the
// event is appended once the store takes events again. Any other error,
// and a fact past [MaxKept], is the store's refusal, as Publish returns it.
// An abandoned wait (ctx) leaves the event to the bus: stored, or kept.
func (b *Bus) PublishKept(ctx context.Context, ev *abi.Event) (Result, error) {
	a, err := b.PublishKeptAsync(ev)
	if err != nil {
		return Result{}, err
	}
	return a.Wait(ctx)
}

// PublishKeptAsync is PublishKept without the wait: the Ack's Wait
// returns what PublishKept would.
func (b *Bus) PublishKeptAsync(ev *abi.Event) (*Ack, error) {
	now := clockNow()
	if err := b.prepareAt(ev, now); err != nil {
		return nil, err
	}
	if b.kick != nil {
		return b.enqueue(ev, true)
	}
	// A store without group commit: append here, as appendInline does.
	b.mu.Lock()
	defer b.mu.Unlock()
	evs, dup, keep := []*abi.Event{ev}, []bool{false}, []bool{true}
	if err := b.appendLocked(evs, nil, dup, now); err != nil {
		b.keepLocked(evs, keep, err)
		return &Ack{err: (&batch{err: err, keep: keep}).keptErr(0)}, nil
	}
	return &Ack{res: Result{Seq: ev.Seq, Duplicate: dup[0]}}, nil
}

// keptErr is the error of the i-th event of a failed batch: wrapped in
// ErrKept if the bus kept it.
func (bt *batch) keptErr(i int) error {
	if bt.keep == nil || !bt.keep[i] {
		return bt.err
	}
	return fmt.Errorf("%w: %w", ErrKept, bt.err)
}

// keepLocked keeps the events of a failed append that keep marks, if the
// store was away or full, in order and up to MaxKept (fewer in tests);
// keep is left true for those kept only. The caller holds b.mu.
func (b *Bus) keepLocked(evs []*abi.Event, keep []bool, err error) {
	outage := IsUnreachable(err) || IsDiskFull(err)
	k := &b.kept
	k.mu.Lock()
	defer k.mu.Unlock()
	kept := 0
	for i, ev := range evs {
		switch {
		case !keep[i]:
		case !outage:
			keep[i] = false
		case len(k.q) >= hook.MaxKept:
			keep[i] = false
			if k.dropped == 0 {
				k.since = time.Now()
				k.report = newIDAt(k.since)
				k.store, k.host = b.store.Describe(), b.opts.Host
			}
			k.dropped++
		default:
			ev.Seq = 0
			k.q = append(k.q, ev)
			kept++
		}
	}
	k.setN()
	if kept > 0 && IsUnreachable(err) {
		// Kept is not refused: the outage's record counts them apart.
		b.unreach.mu.Lock()
		b.unreach.refused -= min(b.unreach.refused, uint64(kept))
		b.unreach.total -= min(b.unreach.total, uint64(kept))
		b.unreach.kept += uint64(kept)
		b.unreach.mu.Unlock()
	}
}

// appendKeptLocked appends the kept facts, then the report of those
// dropped, before anything else; it costs one atomic load when none are
// kept. An outage error leaves them kept and is the caller's too: nothing
// may pass them. Another error drops them (counted), since the store
// would refuse them again forever. The caller holds b.mu.
func (b *Bus) appendKeptLocked() error {
	if b.kept.n.Load() == 0 {
		return nil
	}
	evs := b.kept.pendingLocked()
	if len(evs) == 0 {
		return nil
	}
	dup := make([]bool, len(evs))
	err := b.store.Append(evs, nil, dup)
	if err != nil && (IsUnreachable(err) || IsDiskFull(err)) {
		return err
	}
	// Stored, or refused for good: either way they are gone from here,
	// and so is the report, which the store would refuse again too.
	b.kept.clearLocked()
	if err == nil {
		b.deliverLocked(evs, dup)
	}
	return nil
}

// pendingLocked is what is due: the kept facts, then the report of those
// dropped. The caller holds b.mu, which keeps it as it is until
// clearLocked.
func (k *keptState) pendingLocked() []*abi.Event {
	if k.n.Load() == 0 {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	evs := k.q[:len(k.q):len(k.q)]
	for _, ev := range evs {
		ev.Seq = 0 // a failed try may have set it
	}
	if k.dropped > 0 {
		data, _ := msgpack.Marshal(StoreDropped{Store: k.store, Since: k.since, Dropped: k.dropped, Kept: len(k.q)})
		evs = append(evs, &abi.Event{ID: k.report, Type: SubjectStoreDropped, Source: "kernel", Time: k.since, Data: data, Host: k.host})
	}
	return evs
}

// clearLocked forgets what pendingLocked returned, once it is stored.
func (k *keptState) clearLocked() {
	if k.n.Load() == 0 {
		return
	}
	k.mu.Lock()
	k.q, k.dropped, k.since, k.report = nil, 0, time.Time{}, ""
	k.setN()
	k.mu.Unlock()
}

// setN publishes what is due to appendKeptLocked's fast path. The caller
// holds k.mu.
func (k *keptState) setN() {
	n := len(k.q)
	if k.dropped > 0 {
		n++
	}
	k.n.Store(int32(n))
}

// Kept reports how many facts the bus keeps for its store, and how many
// it dropped since the store last took its report of them.
func (b *Bus) Kept() (kept int, dropped uint64) {
	b.kept.mu.Lock()
	defer b.kept.mu.Unlock()
	return len(b.kept.q), b.kept.dropped
}
