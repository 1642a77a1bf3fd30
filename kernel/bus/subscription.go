package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/kairo-os/kairo/abi"
)

// Handler receives events in sequence order, in batches. The slice and the
// events are only valid during the call; copy what must outlive it. A
// handler that returns an error ends its subscription with that error.
// A slow handler slows only its own subscription
// (docs/RATIONALE.md#slow-subscribers).
type Handler func(evs []abi.Event) error

// SubscribeConfig says where a subscription starts.
type SubscribeConfig struct {
	// FromSeq 0 starts with the next event published. Otherwise delivery
	// starts at that sequence number: stored events first, then live ones.
	FromSeq uint64
	// Budget, when set, bounds the subscription with the others of the
	// same client: the events buffered for it, or on their way to its
	// handler, count in bytes against the budget and the bus's
	// MaxClientBytes. Past a bound its buffer is freed at once and it
	// catches up from the store, as any slow subscriber does; if even a
	// page of the store cannot be held for it, it ends with a
	// *BehindError, and the client resubscribes from the sequence number
	// the error names. Without a budget (the kernel's own subscribers) a
	// subscription is bounded by Config.SubscriberBuffer alone.
	Budget *Budget
	// Match, when set, narrows the pattern: only the events whose subject
	// it also accepts are delivered. It is called on every publish, under
	// the bus's lock or on the subscription's goroutine, so it must be
	// quick and must not call the bus.
	Match func(subject string) bool
	// Linger, when set, holds each delivery back that long after the
	// first event of it arrived, so that the handler runs once for what
	// came meanwhile rather than once for each: for a subscriber that is
	// not in a hurry (the trace export), whose wakeups would otherwise
	// compete with the publishers for the CPU. The buffer's bound still
	// holds: past it, the subscription reads the store, as a slow one does.
	Linger time.Duration
}

// BudgetConfig bounds the subscriptions of one client together. Zero
// fields take the defaults.
type BudgetConfig struct {
	// MaxSubscriptions bounds how many are open at once. Default 64.
	MaxSubscriptions int
	// MaxBytes bounds the bytes of events held for them together. Default
	// 8 MiB.
	MaxBytes int64
	// MaxEvents bounds the events held for any one of them. Default 1024.
	MaxEvents int
}

// Budget is what one client's subscriptions may hold: how many are open,
// and the events buffered for them or on their way to their handlers,
// counted in bytes here and in the bus's [Config.MaxClientBytes].
type Budget struct {
	bus  *Bus
	opts BudgetConfig

	mu    sync.Mutex
	subs  int
	bytes int64
}

// ErrTooManySubscriptions refuses a subscription past its Budget's
// MaxSubscriptions.
var ErrTooManySubscriptions = errors.New("too many subscriptions")

// BehindError ends a budgeted subscription that fell behind while its
// client held all its budget allows, so that not even a page of the store
// could be read for it. Nothing was lost: the events from Next on are in
// the store.
type BehindError struct {
	Bound string // what it fell past: "1024 events", "the 8388608 bytes ..."
	Next  uint64 // the first sequence number not delivered
}

// Error says how far the subscription fell behind and where to resubscribe.
func (e *BehindError) Error() string {
	return fmt.Sprintf("fell behind by more than %s; resubscribe from seq %d", e.Bound, e.Next)
}

// NewBudget returns a budget for one client's subscriptions.
func (b *Bus) NewBudget(opts BudgetConfig) *Budget {
	if opts.MaxSubscriptions <= 0 {
		opts.MaxSubscriptions = 64
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 8 << 20
	}
	if opts.MaxEvents <= 0 {
		opts.MaxEvents = 1024
	}
	return &Budget{bus: b, opts: opts}
}

// Subscriptions is how many subscriptions of the budget are open.
func (g *Budget) Subscriptions() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.subs
}

// Bytes is what the budget's subscriptions hold.
func (g *Budget) Bytes() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.bytes
}

func (g *Budget) open() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.subs >= g.opts.MaxSubscriptions {
		return fmt.Errorf("%w: %d are open, the most one client may hold", ErrTooManySubscriptions, g.subs)
	}
	g.subs++
	return nil
}

func (g *Budget) closed() {
	g.mu.Lock()
	g.subs--
	g.mu.Unlock()
}

// take charges n bytes to the budget and to the bus, both or neither. It
// returns "" on success, else the bound that refused.
func (g *Budget) take(n int64) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.bytes+n > g.opts.MaxBytes {
		return fmt.Sprintf("the %d bytes one client's subscriptions may hold", g.opts.MaxBytes)
	}
	all, max := &g.bus.clientBytes, g.bus.opts.MaxClientBytes
	for {
		cur := all.Load()
		if cur+n > max {
			return fmt.Sprintf("the %d bytes the kernel holds for all clients' subscriptions", max)
		}
		if all.CompareAndSwap(cur, cur+n) {
			break
		}
	}
	g.bytes += n
	return ""
}

func (g *Budget) give(n int64) {
	if n == 0 {
		return
	}
	g.mu.Lock()
	g.bytes -= n
	g.mu.Unlock()
	g.bus.clientBytes.Add(-n)
}

// eventSize is what holding a copy of ev costs, as the budgets count it.
func eventSize(ev *abi.Event) int64 {
	return int64(unsafe.Sizeof(*ev)) + int64(len(ev.ID)+len(ev.Type)+len(ev.Source)+len(ev.Data)+len(ev.CorrelationID)+len(ev.CausationID))
}

// behindErr is a budget's refusal inside the subscription's goroutine.
type behindErr struct{ bound string }

func (e behindErr) Error() string { return "fell behind by more than " + e.bound }

// Subscription is a running subscription. Its goroutine is owned by the bus
// and stops on Close, on an error, or when the bus closes.
type Subscription struct {
	bus     *Bus
	id      uint64
	pattern *abi.Pattern
	match   func(string) bool // SubscribeConfig.Match; nil: the pattern alone
	linger  time.Duration     // SubscribeConfig.Linger
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

	budget *Budget // nil for the kernel's own subscribers
	held   int64   // bytes of buf charged to budget, under mu
	behind string  // the bound a budgeted subscription fell past, under mu

	// ring, when set, is the bus's in-memory ring, which the subscription
	// reads runs of events from itself rather than being handed a copy of
	// each (subscription_ring.go); buf and lagging are then unused.
	ring     *MemoryStore
	sleeping atomic.Bool   // run waits for a wake-up: the next publish sends one
	pos      atomic.Uint64 // next, for Stats
	lagged   atomic.Bool   // more than limit events were pending: reading "the store"
}

// Subscribe starts delivering events whose subject matches pattern to h.
// The subscription ends when ctx ends, on Close, or when h returns an error.
func (b *Bus) Subscribe(ctx context.Context, pattern string, opts SubscribeConfig, h Handler) (*Subscription, error) {
	p, err := abi.CompilePattern(pattern)
	if err != nil {
		return nil, err
	}
	if b.closed.Load() {
		return nil, ErrClosed
	}
	s := &Subscription{
		bus:     b,
		pattern: p,
		match:   opts.Match,
		linger:  opts.Linger,
		handler: h,
		done:    make(chan struct{}),
		limit:   b.opts.SubscriberBuffer,
		wake:    make(chan struct{}, 1),
		budget:  opts.Budget,
	}
	if g := opts.Budget; g != nil {
		if g.bus != b {
			return nil, errors.New("subscribe: the budget belongs to another bus")
		}
		if err := g.open(); err != nil {
			return nil, err
		}
		s.limit = min(s.limit, g.opts.MaxEvents)
	}
	if m, ok := b.store.(*MemoryStore); ok && opts.Budget == nil && len(m.ring) > s.limit {
		// The ring holds more than the buffer would: reading it loses
		// nothing a buffer would have kept.
		s.ring = m
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
		if s.ring == nil {
			s.lagging = true // start by reading the store
		} else {
			s.lagged.Store(true) // counted as a catch-up, as the buffer's is
			b.catchUps.Add(1)
		}
	}
	s.pos.Store(s.next)
	b.subs = append(b.subs[:len(b.subs):len(b.subs)], s)
	b.wg.Add(1)
	b.mu.Unlock()
	go s.run()
	return s, nil
}

// ID is unique among the bus's subscriptions.
func (s *Subscription) ID() uint64 { return s.id }

// matches reports whether the subscription delivers events of subject.
func (s *Subscription) matches(subject string) bool {
	return s.pattern.Match(subject) && (s.match == nil || s.match(subject))
}

// Pattern is the subject pattern the subscription matches.
func (s *Subscription) Pattern() string { return s.pattern.String() }

// Done is closed when the subscription has ended.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err is why the subscription ended: nil after Close or when its context
// ended, the handler's error, a store error, or a [*BehindError] for a
// budgeted subscription that fell behind. Valid after Done.
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
	if s.ring != nil {
		s.poke()
		return
	}
	s.mu.Lock()
	if s.lagging || s.behind != "" {
		s.mu.Unlock()
		return
	}
	added := false
	for i, ev := range evs {
		if dup[i] || !s.matches(ev.Type) {
			continue
		}
		if s.budget != nil {
			if !s.charge(ev) {
				break
			}
			s.buf = append(s.buf, *ev)
			added = true
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

// lag makes the subscription read what follows from the store, as after an
// overflow; called by the bus, under bus.mu.
func (s *Subscription) lag() {
	if s.ring != nil { // it reads the store anyway
		s.poke()
		return
	}
	s.mu.Lock()
	s.lagging = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// charge counts ev against a budgeted subscription's bounds, under s.mu.
// Past one, the subscription lags: its buffer is freed at once, and what
// it held is read from the store again when its handler is ready.
func (s *Subscription) charge(ev *abi.Event) bool {
	n := eventSize(ev)
	if len(s.buf) < s.limit && s.budget.take(n) == "" {
		s.held += n
		return true
	}
	s.lagging = true
	s.budget.give(s.held)
	s.held, s.buf = 0, nil
	return false
}

func (s *Subscription) run() {
	b := s.bus
	defer b.wg.Done()
	defer close(s.done)
	defer s.remove()
	defer s.cancel() // release the context when the handler or the store fails
	if s.budget != nil {
		defer s.release()
	}
	if s.ring != nil {
		s.err = s.readRing()
		return
	}
	spare := make([]abi.Event, 0, 256)
	for {
		s.mu.Lock()
		batch, lag, held := s.buf, s.lagging, s.held
		s.buf, s.held = spare[:0], 0
		s.mu.Unlock()
		var err error
		if len(batch) > 0 {
			// Events the store already gave us during a catch-up come again
			// live; skip them by sequence number.
			i := 0
			for i < len(batch) && batch[i].Seq < s.next {
				i++
			}
			if i < len(batch) {
				err = s.deliver(batch[i:])
			}
		}
		if held > 0 {
			clear(batch) // what the events point to is not held any longer
			s.budget.give(held)
		}
		if err != nil {
			s.err = err
			return
		}
		spare = batch
		if lag {
			if err := s.catchUp(); err != nil {
				var be behindErr
				if errors.As(err, &be) {
					s.mu.Lock()
					s.behind = be.bound
					s.mu.Unlock()
					return
				}
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
		if s.linger > 0 && !s.wait(s.linger) {
			return
		}
	}
}

// wait waits d, or until the subscription ends; false when it ended.
func (s *Subscription) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// release frees what a budgeted subscription holds when it ends, and says
// why it ended if it fell behind.
func (s *Subscription) release() {
	s.mu.Lock()
	bound := s.behind
	s.budget.give(s.held)
	s.held, s.buf = 0, nil
	s.mu.Unlock()
	s.budget.closed()
	if bound != "" && s.err == nil {
		s.err = &BehindError{Bound: bound, Next: s.next}
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
	page := 1024
	if s.budget != nil {
		page = min(page, s.budget.opts.MaxEvents)
	}
	evs := make([]abi.Event, 0, page)
	var held int64 // charged for evs to a budget
	flush := func() error {
		if len(evs) == 0 {
			return nil
		}
		err := s.deliver(evs)
		clear(evs)
		evs = evs[:0]
		if held > 0 {
			s.budget.give(held)
			held = 0
		}
		return err
	}
	defer func() {
		if held > 0 {
			s.budget.give(held)
		}
	}()
	for {
		if s.ctx.Err() != nil {
			return nil
		}
		hi := b.store.LastSeq()
		if s.next <= hi {
			err := b.store.Scan(s.ctx, Query{FromSeq: s.next, ToSeq: hi, Pattern: s.pattern}, func(ev *abi.Event) error {
				if s.match != nil && !s.match(ev.Type) {
					return nil
				}
				if s.budget != nil {
					// A page waiting on a slow client is held like a
					// buffer: charged, and past the bounds it ends the
					// subscription, once the events before it are out.
					n := eventSize(ev)
					bound := s.budget.take(n)
					if bound != "" {
						if err := flush(); err != nil {
							return err
						}
						if bound = s.budget.take(n); bound != "" {
							return behindErr{bound}
						}
					}
					held += n
				}
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
				var be behindErr
				if errors.As(err, &be) {
					return err
				}
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
