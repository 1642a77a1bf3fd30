// Package bus is Kairo's event bus, the system's single source of truth.
//
// Subjects are NATS-style ("kairo.process.exited"; patterns use "*" for one
// token and ">" for the rest). [Bus.Publish] appends to the store and is
// acknowledged only after the append; then the event is delivered to every
// matching subscriber. A subscriber that falls behind never blocks
// publishers and never loses events: when its bounded buffer overflows it
// reads the store from where it was and rejoins the live stream once caught
// up. Publishing an ID that is already stored is a no-op that returns the
// stored sequence number. On a store the buses of several hosts share,
// each delivers the others' events too, in sequence order with its own.
package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kairo-os/kairo/abi"
)

// Config configures a [Bus]. The zero value is useful.
type Config struct {
	// SubscriberBuffer is how many events a live subscriber may have pending
	// before it falls back to reading the store. Default 8192.
	SubscriberBuffer int
	// MaxPending bounds the events waiting for a group commit; publishers
	// wait while it is reached. Default 65536.
	MaxPending int
	// Source is set on published events that have none. Default "kairo".
	Source string
	// Host is set on every event published through this bus, whatever
	// the publisher said: the kairo that published it, when several
	// share one store. Empty on a store of one host.
	Host string
	// MaxClientBytes bounds the bytes of events held, together, for every
	// subscription opened with a Budget (the clients'): buffered, or on
	// their way to a handler that has not returned. Default 64 MiB.
	MaxClientBytes int64
	// Logger receives what the bus reports besides its events: messages
	// of a shared store that it skipped. Default: nothing is logged.
	Logger *slog.Logger
}

func (o *Config) fill() {
	if o.SubscriberBuffer <= 0 {
		o.SubscriberBuffer = 8192
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 65536
	}
	if o.Source == "" {
		o.Source = "kairo"
	}
	if o.MaxClientBytes <= 0 {
		o.MaxClientBytes = 64 << 20
	}
}

// MaxEventData bounds the data of one event. Everything the bus stores it
// also hands to every subscriber and keeps in the log for good, so an event
// is a message, not a file: a larger payload belongs in a file the event
// names. A plugin's output (host/wasm InstanceConfig.MaxOutput) fits in it, as do the
// kernel's own events.
const MaxEventData = 4 << 20

// ErrClosed is returned by calls on a closed bus.
var ErrClosed = errors.New("bus is closed")

// Bus fans events out from a [Store] to subscribers.
type Bus struct {
	store Store
	opts  Config

	// mu orders appends with delivery and guards the subscriber list, so a
	// subscriber joining the live stream sees every event after the ones it
	// read from the store, exactly once. On a store other writers share,
	// their events are delivered under it too, before any of this bus's
	// that the store placed after them (follow.go): every subscriber sees
	// every event once, in seq order, whoever wrote it.
	mu        sync.Mutex
	subs      []*Subscription // copy-on-write
	delivered uint64          // last seq handed to live subscribers
	nextSubID uint64
	one       [1]*abi.Event // appendInline's arguments, kept here so they
	oneDup    [1]bool       // do not escape to the heap on every publish
	// ids names the events of a store without group commit (the ring)
	// under mu, where their append is serialised anyway: no lock of the
	// ID generator's own for each.
	ids abi.IDBlock
	// published and duplicates count under mu, where they are decided.
	published, duplicates uint64

	// Group commit (stores with GroupCommit): publishers add to cur, one
	// flusher goroutine appends each batch in one store call.
	qmu     sync.Mutex
	qcond   *sync.Cond // signalled when a batch is taken
	cur     *batch
	pending int
	kick    chan struct{}
	stop    chan struct{}
	flushed chan struct{}
	closed  atomic.Bool

	// mask, when set, masks each event's data before it is stored
	// (SetMask).
	mask atomic.Pointer[func([]byte) []byte]

	deliveredN, catchUps atomic.Uint64
	followed             atomic.Uint64  // other writers' events
	wg                   sync.WaitGroup // subscription goroutines

	clientBytes atomic.Int64 // held for budgeted subscriptions, at most opts.MaxClientBytes

	full    fullState        // the store's disk filled up (full.go)
	unreach unreachableState // the store could not be reached (unreachable.go)
	kept    keptState        // facts kept through an outage (outage_kept.go)
	follow  followState      // other writers of a shared store (follow.go)
	skips   skipState        // what the store skipped (skipped.go)
}

type batch struct {
	evs  []*abi.Event
	envs [][]byte // nil unless the store is an EnvEncoder
	dup  []bool
	keep []bool // PublishKept's events, kept if the store is away; nil if none
	err  error
	done chan struct{}
}

// New returns a bus over store. Close the bus to stop it; it closes the store.
func New(store Store, opts Config) *Bus {
	opts.fill()
	b := &Bus{store: store, opts: opts, delivered: store.LastSeq()}
	b.full.stop = make(chan struct{})
	b.qcond = sync.NewCond(&b.qmu)
	if store.GroupCommit() {
		b.kick = make(chan struct{}, 1)
		b.stop = make(chan struct{})
		b.flushed = make(chan struct{})
		go b.flusher()
	}
	b.startFollowing()
	b.startSkipReports()
	return b
}

// Store returns the bus's store.
func (b *Bus) Store() Store { return b.store }

// LastSeq is the sequence number of the last stored event.
func (b *Bus) LastSeq() uint64 { return b.store.LastSeq() }

// Result is the outcome of a publish.
type Result struct {
	Seq       uint64
	Duplicate bool // the event's ID was already stored at Seq
}

// Publish stores ev and returns once it is durable in the store, then
// delivers it. It fills an empty ID, Time and Source, and sets ev.Seq.
func (b *Bus) Publish(ctx context.Context, ev *abi.Event) (Result, error) {
	if b.kick == nil { // no group commit: append here, no Ack to allocate
		// One clock reading serves the event and the append: it is not
		// free, and on the ring it is a tenth of a publish.
		now := clockNow()
		if err := b.prepareAt(ev, now); err != nil {
			return Result{}, err
		}
		return b.appendInline(ev, now)
	}
	a, err := b.PublishAsync(ev)
	if err != nil {
		return Result{}, err
	}
	return a.Wait(ctx)
}

// PublishBatch stores evs in order and returns once all are durable, with
// one [Result] per event. Events published together share one clock reading
// for the times the bus fills in and, on the ring, one lock and one wake-up
// of each subscriber; on a group-commit store they are queued together and
// go to the store in one commit ([Bus.PublishAsyncBatch]). On error no
// event of evs is acknowledged.
func (b *Bus) PublishBatch(ctx context.Context, evs []*abi.Event) ([]Result, error) {
	res := make([]Result, len(evs))
	if len(evs) == 0 {
		return res, nil
	}
	now := clockNow()
	for _, ev := range evs { // all checked before any is stored
		if err := b.prepareAt(ev, now); err != nil {
			return nil, err
		}
	}
	if b.kick == nil {
		dup := make([]bool, len(evs))
		b.mu.Lock()
		defer b.mu.Unlock()
		if err := b.appendLocked(evs, nil, dup, now); err != nil {
			return nil, err
		}
		for i, ev := range evs {
			res[i] = Result{Seq: ev.Seq, Duplicate: dup[i]}
		}
		return res, nil
	}
	acks, err := b.queueBatch(evs, now)
	if err != nil {
		return nil, err
	}
	for i, a := range acks {
		var err error
		if res[i], err = a.Wait(ctx); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// Ack is the pending acknowledgement of an asynchronous publish.
type Ack struct {
	b   *batch
	i   int
	res Result
	err error
}

// Wait blocks until the event is durable (or the append failed) or ctx ends.
// An event whose wait was abandoned may still be stored.
func (a *Ack) Wait(ctx context.Context) (Result, error) {
	if a.b == nil {
		return a.res, a.err
	}
	select {
	case <-a.b.done:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	if a.b.err != nil {
		return Result{}, a.b.keptErr(a.i)
	}
	return Result{Seq: a.b.evs[a.i].Seq, Duplicate: a.b.dup[a.i]}, nil
}

// Done is closed when the acknowledgement is ready.
func (a *Ack) Done() <-chan struct{} {
	if a.b == nil {
		return closedChan
	}
	return a.b.done
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// PublishAsync queues ev for the store and returns at once; the [Ack] says when
// it is durable. Several publishers' events go to the store in one batch
// (docs/RATIONALE.md#group-commit).
// The caller must not modify ev until the Ack is done.
func (b *Bus) PublishAsync(ev *abi.Event) (*Ack, error) {
	if err := b.prepare(ev); err != nil {
		return nil, err
	}
	return b.enqueue(ev, false)
}

// enqueue hands a prepared event to the store: appended at once without
// group commit, else queued for the flusher; keep marks a PublishKept's.
func (b *Bus) enqueue(ev *abi.Event, keep bool) (*Ack, error) {
	var env []byte
	if enc, ok := b.store.(EnvEncoder); ok {
		var err error
		if env, err = enc.EncodeEnv(ev); err != nil {
			return nil, err
		}
	}
	if b.kick == nil {
		res, err := b.appendInline(ev, clockNow())
		return &Ack{res: res, err: err}, nil
	}
	b.qmu.Lock()
	bt, fresh, err := b.batchLocked()
	if err != nil {
		b.qmu.Unlock()
		return nil, err
	}
	i := len(bt.evs)
	bt.evs = append(bt.evs, ev)
	if env != nil {
		bt.envs = append(bt.envs, env)
	}
	bt.dup = append(bt.dup, false)
	if keep && bt.keep == nil {
		bt.keep = make([]bool, i, cap(bt.evs))
	}
	if bt.keep != nil {
		bt.keep = append(bt.keep, keep)
	}
	b.pending++
	b.qmu.Unlock()
	b.kickFresh(fresh)
	return &Ack{b: bt, i: i}, nil
}

// batchLocked waits, with b.qmu held, while the queue is full, and returns
// the batch being filled; fresh when it opened it, and the committer must
// be kicked (kickFresh) once b.qmu is let go. ErrClosed once the bus is
// closed.
func (b *Bus) batchLocked() (bt *batch, fresh bool, err error) {
	for b.pending >= b.opts.MaxPending && !b.closed.Load() {
		b.qcond.Wait()
	}
	if b.closed.Load() {
		return nil, false, ErrClosed
	}
	if b.cur == nil {
		b.cur, fresh = &batch{done: make(chan struct{})}, true
	}
	return b.cur, fresh, nil
}

// kickFresh wakes the committer for a batch just opened.
func (b *Bus) kickFresh(fresh bool) {
	if fresh {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

// SetMask makes the bus pass each event's data through mask before it
// checks and stores it: the kernel's mask of the secrets it gave
// (kernel/secrets). mask returns its argument when it changes nothing.
func (b *Bus) SetMask(mask func([]byte) []byte) { b.mask.Store(&mask) }

// prepare checks ev and fills what the publisher left empty.
func (b *Bus) prepare(ev *abi.Event) error {
	var now time.Time
	if ev.ID == "" || ev.Time.IsZero() {
		now = clockNow() // one clock reading for both: it is not free
	}
	return b.prepareAt(ev, now)
}

// prepareAt is prepare with the clock already read.
func (b *Bus) prepareAt(ev *abi.Event, now time.Time) error {
	if b.closed.Load() {
		return ErrClosed
	}
	if err := abi.ValidateSubject(ev.Type); err != nil {
		return err
	}
	if m := b.mask.Load(); m != nil {
		ev.Data = (*m)(ev.Data)
	}
	if err := abi.CheckEventLimits(ev); err != nil {
		return abi.Errorf(abi.CodeInvalidParams, "%v", err)
	}
	if len(ev.Data) > MaxEventData {
		return abi.Errorf(abi.CodeInvalidParams, "event %s: data of %d bytes is over the bus's maximum event size of %d bytes (bus.MaxEventData); put a large payload in a file and name it in the event", ev.Type, len(ev.Data), MaxEventData)
	}
	if ev.Time.IsZero() {
		ev.Time = now
	}
	if ev.ID == "" && b.kick != nil {
		// Encoded before it is queued, so named now; a store without
		// group commit names it as it appends (appendLocked).
		ev.ID = abi.NewIDAt(now)
	}
	if ev.Source == "" {
		ev.Source = b.opts.Source
	}
	ev.Host = b.opts.Host // no publisher speaks for another host
	ev.Seq = 0
	return nil
}

// appendInline is the path of stores without group commit (the ring): append
// and deliver under one lock, no hand-off to another goroutine. now is a
// clock reading taken before the append began.
func (b *Bus) appendInline(ev *abi.Event, now time.Time) (Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	evs, dup := b.one[:], b.oneDup[:]
	evs[0], dup[0] = ev, false
	defer func() { evs[0] = nil }()
	if err := b.appendLocked(evs, nil, dup, now); err != nil {
		return Result{}, err
	}
	return Result{Seq: ev.Seq, Duplicate: dup[0]}, nil
}

func (b *Bus) flusher() {
	defer close(b.flushed)
	for {
		select {
		case <-b.kick:
		case <-b.stop:
			// Drain what was queued before Close so nothing acknowledged
			// later is lost and no publisher waits forever.
			b.flushOnce()
			return
		}
		for b.flushOnce() {
		}
	}
}

// flushOnce appends the current batch, if any, and reports whether it did.
func (b *Bus) flushOnce() bool {
	b.qmu.Lock()
	bt := b.cur
	b.cur = nil
	if bt != nil {
		b.pending -= len(bt.evs)
		b.qcond.Broadcast()
	}
	b.qmu.Unlock()
	if bt == nil {
		return false
	}
	b.mu.Lock()
	bt.err = b.appendLocked(bt.evs, bt.envs, bt.dup, clockNow())
	if bt.err != nil && bt.keep != nil {
		b.keepLocked(bt.evs, bt.keep, bt.err)
	}
	b.mu.Unlock()
	close(bt.done)
	return true
}

// appendLocked stores evs and delivers the new ones; the caller holds b.mu,
// which orders appends with deliveries on every path. start is a clock
// reading taken no later than the append begins: an outage began no later
// than the append it failed, and an event still without an ID (a store
// without group commit) is named from it.
func (b *Bus) appendLocked(evs []*abi.Event, envs [][]byte, dup []bool, start time.Time) error {
	for _, ev := range evs {
		if ev.ID == "" {
			ev.ID = b.ids.NewAt(start)
		}
	}
	if err := b.refuseUnreachable(evs); err != nil {
		return err
	}
	err := b.appendKeptLocked()
	if err == nil {
		err = b.store.Append(evs, envs, dup)
	}
	if err != nil {
		if IsDiskFull(err) {
			return b.noteFull(evs, err)
		}
		if IsUnreachable(err) {
			return b.noteUnreachable(evs, err, start)
		}
		return fmt.Errorf("append to %s store: %w", b.store.Describe(), err)
	}
	b.deliverLocked(evs, dup)
	return nil
}

// deliverLocked hands freshly stored events to live subscribers. It never
// waits for a subscriber: one whose buffer is full is marked lagging and
// reads the store later. On a shared store it may read the store first,
// for the other writers' events placed before these (one comparison per
// event when there are none).
func (b *Bus) deliverLocked(evs []*abi.Event, dup []bool) {
	var fresh uint64
	from := 0 // evs[from:] are not offered yet
	for i, ev := range evs {
		if dup[i] {
			continue
		}
		if ev.Seq > b.delivered+1 {
			// A shared store placed other writers' events before this
			// one, learnt of during the append: they go first.
			for _, s := range b.subs {
				s.offer(evs[from:i], dup[from:i])
			}
			b.deliverStoredLocked(ev.Seq - 1)
			from = i
		}
		fresh++
		b.delivered = ev.Seq
	}
	b.duplicates += uint64(len(evs)) - fresh
	b.published += fresh
	if fresh == 0 {
		return
	}
	for _, s := range b.subs {
		s.offer(evs[from:], dup[from:])
	}
}

// Replay calls fn for each stored event matching q, in sequence order.
func (b *Bus) Replay(ctx context.Context, q Query, fn func(*abi.Event) error) error {
	if b.closed.Load() {
		return ErrClosed
	}
	return b.store.Scan(ctx, q, fn)
}

// Stats are the bus's counters.
type Stats struct {
	Published, Duplicates, Delivered, CatchUps uint64
	// Followed counts the events other writers of a shared store appended,
	// which the bus delivers live as it does its own (Follower).
	Followed      uint64
	Subscriptions int
	// Lagging counts subscriptions that overflowed their buffer and have
	// not yet caught up from the store.
	Lagging int
	// ClientBytes is what budgeted subscriptions hold (Config.MaxClientBytes).
	ClientBytes int64
	// RefusedFull and RefusedUnreachable count the events refused since
	// New because the store's disk was full or the store could not be
	// reached; unlike Full's and Unreachable's counts, never reset. A fact
	// kept through an outage (PublishKept) is not refused.
	RefusedFull, RefusedUnreachable uint64
}

// Stats returns the bus's counters.
func (b *Bus) Stats() Stats {
	b.mu.Lock()
	n, lagging := len(b.subs), 0
	for _, s := range b.subs {
		if s.isLagging() {
			lagging++
		}
	}
	// Under b.mu, which every refusal holds: a refusal then kept is seen
	// as neither, so the counts never go down.
	b.full.mu.Lock()
	full := b.full.total
	b.full.mu.Unlock()
	b.unreach.mu.Lock()
	unreach := b.unreach.total
	b.unreach.mu.Unlock()
	published, duplicates := b.published, b.duplicates
	b.mu.Unlock()
	return Stats{
		RefusedFull:        full,
		RefusedUnreachable: unreach,
		Lagging:            lagging,
		Published:          published,
		Duplicates:         duplicates,
		Delivered:          b.deliveredN.Load(),
		CatchUps:           b.catchUps.Load(),
		Followed:           b.followed.Load(),
		Subscriptions:      n,
		ClientBytes:        b.clientBytes.Load(),
	}
}

// Close stops accepting publishes, flushes what was queued, ends every
// subscription and closes the store.
func (b *Bus) Close() error {
	// Publishers check closed under qmu before they queue, so everything
	// queued before this point is in cur when the flusher drains it.
	b.qmu.Lock()
	if b.closed.Swap(true) {
		b.qmu.Unlock()
		return nil
	}
	b.qcond.Broadcast()
	b.qmu.Unlock()
	if b.kick != nil {
		close(b.stop)
		<-b.flushed
	}
	close(b.full.stop)
	b.full.mu.Lock()
	probe := b.full.done // of the last probe, which may still be ending
	b.full.mu.Unlock()
	if probe != nil {
		<-probe
	}
	b.unreach.stopProbe()
	b.stopSkipReports()
	b.stopFollowing()
	b.mu.Lock()
	subs := b.subs
	b.mu.Unlock()
	for _, s := range subs {
		s.cancel()
	}
	b.wg.Wait()
	return b.store.Close()
}
