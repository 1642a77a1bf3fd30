package bus

import (
	"fmt"

	"github.com/kairo-os/kairo/abi"
)

// A subscription of a bus over a MemoryStore larger than its buffer bound
// reads the ring itself (docs/RATIONALE.md#the-in-memory-ring): the
// publisher neither copies each event into a buffer of the subscription
// nor takes its lock, and wakes it only when it sleeps. Everything else is
// as for a buffered subscription: more than Config.SubscriberBuffer events
// pending is lagging, counted as a catch-up and reported by Stats until it
// has read them all, and an event gone from the ring before it was read
// ends the subscription with a *GapError, as a catch-up from the store
// does.

// ringPage is how many events a ring subscription hands its handler at
// most, and ringRun how many slots of the ring it reads under the ring's
// lock at a time, so that a publisher waiting for it waits at most for the
// copy of a few kilobytes.
const (
	ringPage = 1024
	ringRun  = 64
)

// readRing delivers the events of the ring from s.next on, and waits for
// more when it has read them all; it returns when the subscription ends.
func (s *Subscription) readRing() error {
	b := s.bus
	page := make([]abi.Event, 0, ringPage)
	for {
		if s.ctx.Err() != nil {
			return nil
		}
		evs, next, last := page[:0], s.next, uint64(0)
		var gap error
		for gap == nil {
			evs, next, last, gap = s.ring.readRun(next, s.pattern, evs)
			if next > last || len(evs) == cap(evs) {
				break
			}
		}
		if (gap != nil || last >= s.next && last-s.next >= uint64(s.limit)) && !s.lagged.Load() {
			// More than a buffer's worth was pending when it looked: what a
			// buffered subscription counts as falling behind.
			s.lagged.Store(true)
			b.catchUps.Add(1)
		}
		if s.match != nil {
			kept := evs[:0]
			for i := range evs {
				if s.match(evs[i].Type) {
					kept = append(kept, evs[i])
				}
			}
			evs = kept
		}
		if len(evs) > 0 {
			if err := s.deliver(evs); err != nil {
				return err
			}
		}
		s.next = next // every event before it was read, matched or not
		s.pos.Store(next)
		if gap != nil {
			return fmt.Errorf("subscription %d catching up from seq %d: %w", s.id, next, gap)
		}
		if next <= last {
			continue
		}
		if s.lagged.Load() {
			s.lagged.Store(false)
		}
		// Caught up. The flag goes up before the ring is looked at again,
		// and a publisher looks at the flag after its append: one of the
		// two sees the other's write (the ring's lock orders them), so no
		// event is left waiting for a wake-up that never comes.
		s.sleeping.Store(true)
		if s.ring.LastSeq() >= s.next {
			s.sleeping.Store(false)
			continue
		}
		select {
		case <-s.wake:
		case <-s.ctx.Done():
			return nil
		}
		s.sleeping.Store(false)
		if s.linger > 0 && !s.wait(s.linger) {
			return nil
		}
	}
}

// poke wakes a ring subscription that sleeps; called by the bus, under
// bus.mu, after each append. A subscription that is reading costs one
// load.
func (s *Subscription) poke() {
	if s.sleeping.Load() && s.sleeping.CompareAndSwap(true, false) {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// isLagging reports whether the subscription fell behind by more than its
// buffer and has not yet read what it missed; the caller holds bus.mu.
func (s *Subscription) isLagging() bool {
	if s.ring != nil {
		pos := s.pos.Load()
		return s.lagged.Load() || pos <= s.bus.delivered && s.bus.delivered-pos >= uint64(s.limit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lagging
}
