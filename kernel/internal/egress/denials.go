package egress

import (
	"sync"
	"time"
)

// Denial is one refused request, or several to the same host and port
// coalesced: the kernel publishes it as kairo.sandbox.denied.
type Denial struct {
	Host   string // the host name or IP literal the tree asked for, as asked
	Port   int
	Method string // "CONNECT" for a tunnel, else the HTTP method
	Reason string // one line, the same the tree read in the 403
	// Count is how many refusals this report stands for: 1 for the first
	// of a (host, port), then the refusals coalesced since the last report.
	Count int
}

// maxDenialKeys bounds the coalescing table: a tree that tries many
// distinct hosts has the excess counted under one overflow entry.
const maxDenialKeys = 1024

type denialKey struct {
	host string
	port int
}

type denialEntry struct {
	last    Denial    // the most recent refusal, Count unused
	pending int       // refusals not reported yet
	until   time.Time // end of the window opened by the last report
}

// reporter coalesces denials per (host, port): the first in a window is
// reported at once, the rest are counted and reported as one Denial when
// the window ends. All callbacks come from its one goroutine, in order,
// so a slow callback never holds up the proxy.
type reporter struct {
	fn     func(Denial)
	window time.Duration

	mu      sync.Mutex // guards entries, due
	entries map[denialKey]*denialEntry
	due     []Denial // reports ready for the goroutine

	wake chan struct{} // capacity 1: something is due
	stop chan struct{}
	done chan struct{}
}

func newReporter(fn func(Denial), window time.Duration) *reporter {
	return &reporter{
		fn:      fn,
		window:  window,
		entries: map[denialKey]*denialEntry{},
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// add records one refusal.
func (r *reporter) add(d Denial) {
	if r.fn == nil {
		return
	}
	now := time.Now()
	k := denialKey{d.Host, d.Port}
	r.mu.Lock()
	e := r.entries[k]
	if e == nil && len(r.entries) >= maxDenialKeys {
		k = denialKey{"*", 0}
		d = Denial{Host: "*", Method: d.Method, Reason: "more distinct hosts refused than the report table holds"}
		e = r.entries[k]
	}
	if e == nil {
		e = &denialEntry{}
		r.entries[k] = e
	}
	e.last = d
	e.pending++
	immediate := now.After(e.until)
	if immediate {
		d.Count = e.pending
		e.pending = 0
		e.until = now.Add(r.window)
		r.due = append(r.due, d)
	}
	r.mu.Unlock()
	if immediate {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// sweep moves the pending counts of ended windows to due and forgets
// entries quiet for a whole window; with flush it reports every pending
// count now.
func (r *reporter) sweep(flush bool) []Denial {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, e := range r.entries {
		if e.pending > 0 && (flush || now.After(e.until)) {
			d := e.last
			d.Count = e.pending
			e.pending = 0
			e.until = now.Add(r.window)
			r.due = append(r.due, d)
		} else if e.pending == 0 && now.After(e.until) {
			delete(r.entries, k)
		}
	}
	due := r.due
	r.due = nil
	return due
}

func (r *reporter) run() {
	defer close(r.done)
	if r.fn == nil {
		<-r.stop
		return
	}
	tick := time.NewTicker(max(r.window/2, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			for _, d := range r.sweep(true) {
				r.fn(d)
			}
			return
		case <-r.wake:
		case <-tick.C:
		}
		for _, d := range r.sweep(false) {
			r.fn(d)
		}
	}
}

// close reports what is pending and waits for the goroutine to end.
func (r *reporter) close() {
	close(r.stop)
	<-r.done
}
