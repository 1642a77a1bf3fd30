package bus

import (
	"context"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus/internal/hook"
)

// Follower is implemented by stores that several writers share (the
// JetStream store of kernel/bus/jetstream, when the buses of several hosts
// append to one stream).
// Follow watches for the events the others append, makes them part of the
// store (LastSeq counts them, Scan reads them) and calls notify with the
// store's new LastSeq. notify runs on a goroutine of Follow's, one call at
// a time, and must not block for long; Follow's goroutines end when ctx
// ends. [New] calls Follow once, and the bus delivers those events to its
// subscribers in seq order with its own.
type Follower interface {
	Follow(ctx context.Context, notify func(lastSeq uint64))
}

// followState is the bus's following of the other writers of its store.
type followState struct {
	ctx    context.Context // the bus's reads of their events; ends on Close
	cancel context.CancelFunc
	kick   chan struct{} // the store learnt of new events
	done   chan struct{} // closed when the follower goroutine has ended
}

// startFollowing makes the bus deliver the events other writers append to
// its store, when the store can tell of them.
func (b *Bus) startFollowing() {
	f, ok := b.store.(Follower)
	if !ok {
		return
	}
	fs := &b.follow
	fs.ctx, fs.cancel = context.WithCancel(context.Background())
	fs.kick = make(chan struct{}, 1)
	fs.done = make(chan struct{})
	go b.follower()
	// The store's goroutine only kicks ours: it never waits for b.mu, which
	// an append holds through its round trips to the store.
	f.Follow(fs.ctx, func(uint64) {
		select {
		case fs.kick <- struct{}{}:
		default:
		}
	})
}

// stopFollowing ends the follower goroutine and waits for it.
func (b *Bus) stopFollowing() {
	if b.follow.cancel == nil {
		return
	}
	b.follow.cancel()
	<-b.follow.done
}

func (b *Bus) follower() {
	defer close(b.follow.done)
	for {
		select {
		case <-b.follow.ctx.Done():
			return
		case <-b.follow.kick:
		}
		b.deliverFollowed()
	}
}

// deliverFollowed hands the events the store learnt of since the last
// delivery to the live subscribers. It reads them without b.mu, so that
// publishes on this bus do not wait for the store's round trips.
func (b *Bus) deliverFollowed() {
	b.mu.Lock()
	// The store's LastSeq, not the notified one: under b.mu no append of
	// this bus is under way, so everything up to it is stored for good.
	from, to := b.delivered+1, b.store.LastSeq()
	if to < from || len(b.subs) == 0 || to-from >= hook.MaxFollowRead {
		if to >= from {
			b.deliverStoredLocked(to)
		}
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	evs, err := b.readStored(from, to)
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.delivered >= to:
		// An append of this bus came first and delivered them itself: it
		// placed its events after to.
	case err != nil:
		b.lagLocked(to)
	default:
		b.offerStoredLocked(evs, to)
	}
}

// deliverStoredLocked hands the stored events after b.delivered, up to
// seq to, to the live subscribers: events another writer appended, which
// this bus did not. The caller holds b.mu, so they come in sequence order
// with the bus's own.
func (b *Bus) deliverStoredLocked(to uint64) {
	from := b.delivered + 1
	switch {
	case len(b.subs) == 0:
		// Whoever subscribes later starts after to, or reads the store.
		b.followed.Add(to - from + 1)
		b.delivered = to
	case to-from >= hook.MaxFollowRead:
		b.lagLocked(to)
	default:
		evs, err := b.readStored(from, to)
		if err != nil {
			b.lagLocked(to)
			return
		}
		b.offerStoredLocked(evs, to)
	}
}

// readStored reads the events from seq from to seq to from the store.
func (b *Bus) readStored(from, to uint64) ([]*abi.Event, error) {
	ctx := b.follow.ctx
	if ctx == nil { // a store without Follow: only an append finds a gap
		ctx = context.Background()
	}
	var evs []abi.Event
	err := b.store.Scan(ctx, Query{FromSeq: from, ToSeq: to}, func(ev *abi.Event) error {
		evs = append(evs, *ev) // the store may reuse ev
		return nil
	})
	if err != nil {
		return nil, err
	}
	ptrs := make([]*abi.Event, len(evs))
	for i := range evs {
		ptrs[i] = &evs[i]
	}
	return ptrs, nil
}

// offerStoredLocked offers the live subscribers the stored events of evs
// after b.delivered, the last of them at seq to or before.
func (b *Bus) offerStoredLocked(evs []*abi.Event, to uint64) {
	i := 0
	for i < len(evs) && evs[i].Seq <= b.delivered {
		i++
	}
	evs = evs[i:]
	dup := make([]bool, len(evs))
	for _, s := range b.subs {
		s.offer(evs, dup)
	}
	b.followed.Add(to - b.delivered) // a shared store's seqs are dense
	b.delivered = to
}

// lagLocked makes every live subscriber read the events after b.delivered,
// up to seq to, from the store itself, as after an overflow: too many to
// hold at once, or the store did not answer the bus (a subscriber retries,
// or ends with the store's error).
func (b *Bus) lagLocked(to uint64) {
	for _, s := range b.subs {
		s.lag()
	}
	b.followed.Add(to - b.delivered)
	b.delivered = to
}
