package bus

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// SubjectStoreUnreachable records when the store stopped answering; it is
// stored once the store is back, just before [SubjectStoreReachable], since
// nothing can be stored while it is away.
const SubjectStoreUnreachable = abi.SubjectSystemStoreUnreachable

// SubjectStoreReachable is published once the store takes events again
// after it could not be reached: since when, for how long, and how many
// events the bus refused meanwhile.
const SubjectStoreReachable = abi.SubjectSystemStoreReachable

// StoreUnreachable is the data of [SubjectStoreUnreachable]; the event's time
// is Since.
type StoreUnreachable struct {
	Store string    `msgpack:"store"`
	Since time.Time `msgpack:"since"`
	Cause string    `msgpack:"cause"` // the first failed append's error
}

// StoreReachable is the data of [SubjectStoreReachable]; the event's time is
// Back.
type StoreReachable struct {
	Store   string        `msgpack:"store"`
	Since   time.Time     `msgpack:"since"`
	Back    time.Time     `msgpack:"back"`
	Down    time.Duration `msgpack:"down"`
	Refused uint64        `msgpack:"refused"` // events refused while it was away
	// Kept counts the kernel's facts kept meanwhile (PublishKept), stored
	// right after this record.
	Kept uint64 `msgpack:"kept,omitempty"`
}

// StoreUnreachableError is what a publish gets while the bus cannot reach
// its store (a NATS cluster that is down or cut off).
type StoreUnreachableError struct {
	Store string
	Since time.Time
	Err   error
}

// Error says the event was not stored, since when the store is away, and
// that publishing resumes by itself once it is back.
func (e *StoreUnreachableError) Error() string {
	return fmt.Sprintf("the event store (%s) cannot be reached since %s: the event was not stored; publishing resumes by itself once the store answers again (subscriptions stay open): %v",
		e.Store, e.Since.Format(time.TimeOnly), e.Err)
}

// Unwrap is the store's own error: one [IsUnreachable] recognises.
func (e *StoreUnreachableError) Unwrap() error { return e.Err }

// ErrUnreachable is matched ([errors.Is]) by the errors of a store that
// could not be reached: a driver whose store lives across a network wraps
// such errors so that the bus, which knows no network, can tell an outage
// from a refusal. The bus refuses publishes at once while it lasts and
// records it once the store is back ([StoreUnreachable], [StoreReachable]).
var ErrUnreachable = errors.New("the event store cannot be reached")

// IsUnreachable reports whether err says the store could not be reached
// (it matches [ErrUnreachable]). Such an append may be retried with the same
// IDs once the store is back.
func IsUnreachable(err error) bool { return errors.Is(err, ErrUnreachable) }

// unreachableState is the bus's view of a store it cannot reach. Its mu
// is taken under b.mu, never the other way round.
type unreachableState struct {
	down    atomic.Bool // appends are refused without trying the store
	mu      sync.Mutex
	since   time.Time // zero while the store answers
	cause   error     // the first failed append's
	refused uint64
	total   uint64    // every refusal since New, never reset: Stats
	kept    uint64    // facts kept (outage_kept.go), not refused
	ids     [2]string // of the probe's two events, the same on every try
	probing bool
	stop    chan struct{} // closed by stopProbe; nil until a probe starts
	done    chan struct{} // closed when the probe ends
	stopped bool
}

// stopProbe ends the probe, if one runs, and waits for it. Close calls
// it, without b.mu, once b.closed is set.
func (u *unreachableState) stopProbe() {
	u.mu.Lock()
	done := u.done
	if !u.stopped {
		u.stopped = true
		if u.stop != nil {
			close(u.stop)
		}
	}
	u.mu.Unlock()
	if done != nil {
		<-done
	}
}

// refuseUnreachable refuses evs at once while the store is away: the probe
// alone tries it. The caller holds b.mu. While the store answers it costs
// one atomic load, inlined into every append.
func (b *Bus) refuseUnreachable(evs []*abi.Event) error {
	if !b.unreach.down.Load() {
		return nil
	}
	return b.refuseWhileDown(evs)
}

func (b *Bus) refuseWhileDown(evs []*abi.Event) error {
	u := &b.unreach
	u.mu.Lock()
	defer u.mu.Unlock()
	u.refused += uint64(len(evs))
	u.total += uint64(len(evs))
	return &StoreUnreachableError{Store: b.store.Describe(), Since: u.since, Err: u.cause}
}

// noteUnreachable records an append the store could not take because it
// could not be reached, and starts the probe that reports it back. The
// outage began no later than start, when that append began: its failure
// comes only after the store's timeout, which the record must not take
// for a store that answered. The caller holds b.mu.
func (b *Bus) noteUnreachable(evs []*abi.Event, err error, start time.Time) error {
	u := &b.unreach
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.since.IsZero() {
		u.since, u.cause = start, err
		u.ids = [2]string{newIDAt(u.since), newIDAt(u.since)}
	}
	u.down.Store(true)
	u.refused += uint64(len(evs))
	u.total += uint64(len(evs))
	if !u.probing && !u.stopped && !b.closed.Load() {
		u.probing = true
		if u.stop == nil {
			u.stop = make(chan struct{})
		}
		u.done = make(chan struct{})
		go b.probeReachable(u.stop, u.done)
	}
	return &StoreUnreachableError{Store: b.store.Describe(), Since: u.since, Err: err}
}

// reachInterval spaces the probe's tries while the store cannot be
// reached. A try costs little (a connection that is down fails it at
// once), and the first try after the store returns is when publishing
// resumes: failover is the cluster's election plus at most this.
var reachInterval = 100 * time.Millisecond

// probeReachable tries, every reachInterval, to store SubjectStoreUnreachable
// and SubjectStoreReachable in one append: the first events stored once
// the store is back. It appends under b.mu itself rather than through the
// group commit, which could split the two. Their IDs stay the same across
// tries, so a try that was stored though its acknowledgement was lost is
// not stored twice. It ends with the bus: at stop (stopProbe), at b.stop
// on a group-commit store, else at its next tick.
func (b *Bus) probeReachable(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(reachInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
		case <-b.stop:
		case <-t.C:
		}
		if b.probeOnce() {
			return
		}
	}
}

// probeOnce makes one try and reports whether the probe is over: the store
// took the two events, or the bus is closed. It holds b.mu, which
// serialises appends, for the try, and u.mu only around it, so that
// Unreachable answers while a try waits for the store.
func (b *Bus) probeOnce() bool {
	u := &b.unreach
	b.mu.Lock()
	defer b.mu.Unlock()
	u.mu.Lock()
	if b.closed.Load() || u.stopped {
		u.probing = false
		u.mu.Unlock()
		return true
	}
	back := time.Now()
	gone, _ := msgpack.Marshal(StoreUnreachable{Store: b.store.Describe(), Since: u.since, Cause: u.cause.Error()})
	came, _ := msgpack.Marshal(StoreReachable{Store: b.store.Describe(), Since: u.since, Back: back, Down: back.Sub(u.since), Refused: u.refused, Kept: u.kept})
	// Appended as they are, not through prepare: they carry the bus's
	// host themselves.
	evs := []*abi.Event{
		{ID: u.ids[0], Type: SubjectStoreUnreachable, Source: "kernel", Time: u.since, Data: gone, Host: b.opts.Host},
		{ID: u.ids[1], Type: SubjectStoreReachable, Source: "kernel", Time: back, Data: came, Host: b.opts.Host},
	}
	u.mu.Unlock()
	// What the kernel saw meanwhile (outage_kept.go) is stored in the
	// same append, right after the record of the outage.
	evs = append(evs, b.kept.pendingLocked()...)
	dup := make([]bool, len(evs))
	err := b.store.Append(evs, nil, dup)
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case err == nil:
		u.since, u.cause, u.refused, u.kept, u.probing = time.Time{}, nil, 0, 0, false
		u.down.Store(false)
		b.kept.clearLocked()
		b.deliverLocked(evs, dup)
		return true
	case errors.Is(err, ErrClosed):
		u.probing = false
		return true
	case !IsUnreachable(err):
		// The store answers, though it refused (a full stream): let
		// publishes try it again, and keep trying to record the outage.
		u.down.Store(false)
	}
	return false
}

// Unreachable reports since when the bus has not reached its store, and
// how many events it refused; a zero time while the store answers.
func (b *Bus) Unreachable() (since time.Time, refused uint64) {
	b.unreach.mu.Lock()
	defer b.unreach.mu.Unlock()
	return b.unreach.since, b.unreach.refused
}
