package bus

import (
	"context"
	"fmt"
	"sync"

	"github.com/kairo-os/kairo/abi"
)

// Handler receives events in sequence order, in batches. The slice and the
// events are only valid during the call; copy what must outlive it. A
// handler that returns an error ends its subscription with that error.
// A slow handler slows only its own subscription.
type Handler func(evs []abi.Event) error

// SubscribeOptions says where a subscription starts.
type SubscribeOptions struct {
	// FromSeq 0 starts with the next event published. Otherwise delivery
	// starts at that sequence number: stored events first, then live ones.
	FromSeq uint64
}

// Subscription is a running subscription. Its goroutine is owned by the bus
// and stops on Close, on an error, or when the bus closes.
type Subscription struct {
	bus     *Bus
	id      uint64
	pattern *Pattern
	handler Handler
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	err     error

	// next is the sequence number the handler expects next; owned by run.
	next uint64

	mu      sync.Mutex
	buf     []abi.Event
	limit   int
	lagging bool // buf overflowed: what follows next-1 must come from the store
	wake    chan struct{}
}

// Subscribe starts delivering events whose subject matches pattern to h.
// The subscription ends when ctx ends, on Close, or when h returns an error.
func (b *Bus) Subscribe(ctx context.Context, pattern string, opts SubscribeOptions, h Handler) (*Subscription, error) {
	p, err := CompilePattern(pattern)
	if err != nil {
		return nil, err
	}
	if b.closed.Load() {
		return nil, ErrClosed
	}
	s := &Subscription{
		bus:     b,
		pattern: p,
		handler: h,
		done:    make(chan struct{}),
		limit:   b.opts.SubscriberBuffer,
		wake:    make(chan struct{}, 1),
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	b.mu.Lock()
	b.nextSubID++
	s.id = b.nextSubID
	if opts.FromSeq == 0 || opts.FromSeq > b.delivered {
		// From now (or from a future sequence number): live at once.
		s.next = max(opts.FromSeq, b.delivered+1)
	} else {
		s.next = opts.FromSeq
		s.lagging = true // start by reading the store
	}
	b.subs = append(b.subs[:len(b.subs):len(b.subs)], s)
	b.wg.Add(1)
	b.mu.Unlock()
	go s.run()
	return s, nil
}

// ID is unique among the bus's subscriptions.
func (s *Subscription) ID() uint64 { return s.id }

// Pattern is the subject pattern the subscription matches.
func (s *Subscription) Pattern() string { return s.pattern.String() }

// Done is closed when the subscription has ended.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err is why the subscription ended: nil after Close or when its context
// ended, the handler's error, or a store error. Valid after Done.
func (s *Subscription) Err() error {
	<-s.done
	return s.err
}

// Close ends the subscription and waits for its handler to return.
func (s *Subscription) Close() {
	s.cancel()
	<-s.done
}

// offer is called by the bus, under bus.mu, with freshly stored events.
func (s *Subscription) offer(evs []*abi.Event, dup []bool) {
	s.mu.Lock()
	if s.lagging {
		s.mu.Unlock()
		return
	}
	added := false
	for i, ev := range evs {
		if dup[i] || !s.pattern.Match(ev.Type) {
			continue
		}
		if len(s.buf) >= s.limit {
			// Overflow: drop the buffer's tail and let run catch up from the
			// store, which holds everything.
			s.lagging = true
			break
		}
		s.buf = append(s.buf, *ev)
		added = true
	}
	s.mu.Unlock()
	if added || s.lagging {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

func (s *Subscription) run() {
	b := s.bus
	defer b.wg.Done()
	defer close(s.done)
	defer s.remove()
	defer s.cancel() // release the context when the handler or the store fails
	spare := make([]abi.Event, 0, 256)
	for {
		s.mu.Lock()
		batch, lag := s.buf, s.lagging
		s.buf = spare[:0]
		s.mu.Unlock()
		if len(batch) > 0 {
			// Events the store already gave us during a catch-up come again
			// live; skip them by sequence number.
			i := 0
			for i < len(batch) && batch[i].Seq < s.next {
				i++
			}
			if i < len(batch) {
				if err := s.deliver(batch[i:]); err != nil {
					s.err = err
					return
				}
			}
		}
		spare = batch
		if lag {
			if err := s.catchUp(); err != nil {
				s.err = err
				return
			}
			if s.ctx.Err() != nil {
				return // catchUp gave up without rejoining: still lagging
			}
			continue
		}
		select {
		case <-s.wake:
		case <-s.ctx.Done():
			return
		}
	}
}

func (s *Subscription) deliver(evs []abi.Event) error {
	if err := s.ctx.Err(); err != nil {
		return nil // closed: not an error of the subscription
	}
	if err := s.handler(evs); err != nil {
		return err
	}
	s.next = evs[len(evs)-1].Seq + 1
	s.bus.deliveredN.Add(uint64(len(evs)))
	return nil
}

// catchUp reads the store from s.next until it has seen everything the bus
// delivered live, then rejoins the live stream under bus.mu so no event
// falls between the two.
func (s *Subscription) catchUp() error {
	b := s.bus
	b.catchUps.Add(1)
	const page = 1024
	evs := make([]abi.Event, 0, page)
	flush := func() error {
		if len(evs) == 0 {
			return nil
		}
		err := s.deliver(evs)
		evs = evs[:0]
		return err
	}
	for {
		if s.ctx.Err() != nil {
			return nil
		}
		hi := b.store.LastSeq()
		if s.next <= hi {
			err := b.store.Scan(s.ctx, Query{FromSeq: s.next, ToSeq: hi, Pattern: s.pattern}, func(ev *abi.Event) error {
				evs = append(evs, *ev)
				if len(evs) == cap(evs) {
					return flush()
				}
				return nil
			})
			if err == nil {
				err = flush()
			}
			if err != nil {
				if s.ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("subscription %d catching up from seq %d: %w", s.id, s.next, err)
			}
			// Everything up to hi was scanned, matched or not.
			s.next = max(s.next, hi+1)
		}
		b.mu.Lock()
		if b.delivered < s.next {
			s.mu.Lock()
			s.lagging = false
			s.mu.Unlock()
			b.mu.Unlock()
			return nil
		}
		b.mu.Unlock()
	}
}

func (s *Subscription) remove() {
	b := s.bus
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, x := range b.subs {
		if x == s {
			n := make([]*Subscription, 0, len(b.subs)-1)
			n = append(n, b.subs[:i]...)
			b.subs = append(n, b.subs[i+1:]...)
			break
		}
	}
}
