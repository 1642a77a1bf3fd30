package agent

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// Overrun says what the ticker does when a tick's work ran past the next
// tick's time.
type Overrun string

const (
	// OverrunSkip drops the ticks that are already late and runs the
	// latest one due: the agent stays in step with wall time and never
	// runs ticks back to back.
	OverrunSkip Overrun = "skip"
	// OverrunCatchUp runs every late tick, back to back, until it is in
	// step again: no tick number is ever missed.
	OverrunCatchUp Overrun = "catch_up"
)

// Tick is one tick as the ticker hands it over.
type Tick struct {
	N  uint64    // the tick number: ticks since the ticker started, at the rates it ran at
	At time.Time // when it was due
	// Woke is when the ticker woke for it; Woke - At is the jitter.
	Woke time.Time
	Hz   float64
	// Skipped counts the ticks dropped just before this one (OverrunSkip).
	Skipped uint64
	// Early: a Wake brought the tick forward from its time in the
	// schedule; At is then when it was woken for, not that time.
	Early bool
}

// Ticker runs a function at a fixed rate, self-driven: it computes each
// tick's time from the start and the rate — never by adding periods, so
// sleeping late never accumulates into drift — sleeps until then, and runs
// the function; a tick never starts while the previous one runs.
//
// [Ticker.Wake] brings the next tick forward, to at once, but never before
// the time of the tick before it: tick n runs at the earliest when tick
// n-1 was due, so there are never more ticks than the rate allows, and
// the numbers keep counting the schedule's periods.
type Ticker struct {
	overrun Overrun
	// Spin is how long before a tick the ticker stops trusting Go's
	// timers, which wake a sleeping thread with about a millisecond's
	// granularity: without it a tick can be a millisecond late. Within
	// it the ticker sleeps on a timer of the kernel's (a timerfd, which
	// the runtime's poller wakes it for to the microsecond) until
	// fineLead before the tick and yields in a loop for the rest; where
	// there is no such timer, it yields in a loop for the whole of Spin,
	// which costs Spin × Hz of one core. Set it before Run.
	Spin time.Duration

	mu         sync.Mutex
	hz         float64
	period     time.Duration
	origin     time.Time // when tick originTick was due
	originTick uint64
	changed    chan struct{} // SetHz wakes a sleeping Run
	wake       chan struct{} // Wake brings the next tick forward
}

// NewTicker returns a ticker at hz ticks a second.
func NewTicker(hz float64, overrun Overrun) (*Ticker, error) {
	if err := checkHz(hz); err != nil {
		return nil, err
	}
	switch overrun {
	case OverrunSkip, OverrunCatchUp:
	case "":
		overrun = OverrunSkip
	default:
		return nil, fmt.Errorf("overrun policy %q: want %q or %q", overrun, OverrunSkip, OverrunCatchUp)
	}
	return &Ticker{overrun: overrun, hz: hz, period: periodOf(hz), changed: make(chan struct{}, 1), wake: make(chan struct{}, 1)}, nil
}

// MaxHz bounds the rate: past it a tick's own overhead is the period.
const MaxHz = 10000

func checkHz(hz float64) error {
	if !(hz > 0 && hz <= MaxHz) {
		return fmt.Errorf("rate %v Hz: want more than 0 and at most %d", hz, MaxHz)
	}
	return nil
}

func periodOf(hz float64) time.Duration { return time.Duration(float64(time.Second) / hz) }

// Hz is the current rate.
func (k *Ticker) Hz() float64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.hz
}

// SetHz changes the rate from the next tick on. The tick numbers go on
// counting; the next tick is due one new period after the last one was.
func (k *Ticker) SetHz(hz float64) error {
	if err := checkHz(hz); err != nil {
		return err
	}
	k.mu.Lock()
	if !k.origin.IsZero() {
		// Re-anchor at the tick that is due next under the old rate
		// minus one period: the last one that was due.
		n := k.originTick + uint64(max(0, time.Since(k.origin))/k.period)
		k.origin = k.origin.Add(time.Duration(n-k.originTick) * k.period)
		k.originTick = n
	}
	k.hz, k.period = hz, periodOf(hz)
	k.mu.Unlock()
	select {
	case k.changed <- struct{}{}:
	default:
	}
	return nil
}

// Wake asks for the next tick now rather than at its time (see [Ticker]);
// a Wake while a tick runs is for the tick after it. Safe from any
// goroutine; it never blocks.
func (k *Ticker) Wake() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// due returns when tick n is due.
func (k *Ticker) due(n uint64) time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.origin.Add(time.Duration(n-k.originTick) * k.period)
}

// latest is the number of the last tick due at now.
func (k *Ticker) latest(now time.Time) uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.originTick + uint64(max(0, now.Sub(k.origin))/k.period)
}

// fineLead is how long before a tick the ticker stops sleeping on the
// kernel's timer and yields in a loop: the timer's own lateness, which
// was 40-90 µs on a loaded 2-core machine. A message that wakes the tick
// finds the ticker asleep, and on a core at once, in all but this part of
// a period.
const fineLead = 100 * time.Microsecond

// Run runs fn for tick 0 at once, then for each tick as it falls due or
// is woken for, until ctx ends. fn runs on Run's goroutine.
func (k *Ticker) Run(ctx context.Context, fn func(Tick)) {
	k.mu.Lock()
	k.origin, k.originTick = time.Now(), 0
	k.mu.Unlock()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// spin is the part of Spin waited by yielding in a loop: all of it,
	// unless the kernel's timer waits for most of it.
	spin := k.Spin
	var fine *fineTimer
	if spin > fineLead {
		if fine = newFineTimer(); fine != nil {
			defer fine.stop()
			spin = fineLead
		}
	}
	var n uint64
	for {
		at := k.due(n)
		early := false
		// woken brings the tick forward: to now, or to the time of the
		// tick before it if that is still ahead.
		woken := func() {
			if early {
				return
			}
			early = true
			at = time.Now()
			if n > 0 {
				if floor := k.due(n - 1); at.Before(floor) {
					at = floor
				}
			}
		}
	wait:
		for {
			left := time.Until(at)
			var fired <-chan struct{}
			switch {
			case left <= spin:
				break wait
			case fine != nil && left <= k.Spin:
				// The kernel's timer, and Go's for the tick itself in
				// case the poller is not polled meanwhile (every P busy).
				fine.set(left - spin)
				fired = fine.c
				timer.Reset(left)
			default:
				timer.Reset(left - k.Spin)
			}
			select {
			case <-ctx.Done():
				return
			case <-k.changed:
				// The rate changed while asleep: work out the due time
				// again (never a number already run: it may have run
				// early). A Wake still brings it forward.
				timer.Stop()
				n = max(n, k.latest(time.Now())+1)
				at = k.due(n)
				if early {
					early = false
					woken()
				}
			case <-k.wake:
				timer.Stop()
				woken()
			case <-timer.C:
			case <-fired:
				timer.Stop()
			}
		}
		if ctx.Err() != nil {
			return
		}
		for time.Now().Before(at) {
			select {
			case <-k.wake:
				woken()
			default:
				runtime.Gosched()
			}
		}
		now := time.Now()
		var skipped uint64
		if k.overrun == OverrunSkip {
			if last := k.latest(now); last > n {
				skipped, n = last-n, last
				at, early = k.due(n), false
			}
		}
		// A Wake from before this tick is answered by it.
		select {
		case <-k.wake:
		default:
		}
		fn(Tick{N: n, At: at, Woke: now, Hz: k.Hz(), Skipped: skipped, Early: early})
		n++
	}
}
