package agent

import (
	"sync/atomic"
	"time"
)

// Health is what an operator's metrics read of a runtime (internal/telemetry):
// its open run loops and its latest tick.
type Health struct {
	Agent string
	// Open counts the open run loops that do not wait for the user;
	// Interrupted those that do, after actions of theirs were interrupted.
	// Together they are every open run loop.
	Open, Interrupted int
	// Ticks counts the ticks run since Start; Skipped those dropped for
	// running late (OverrunSkip).
	Ticks, Skipped uint64
	// TickLag is the latest tick's Woke - At: how late the loop woke for
	// it. Zero before the first tick.
	TickLag time.Duration
}

// tickHealth is what [Runtime.Health] reads of the ticks, written by the
// ticker's goroutine alone.
type tickHealth struct {
	ticks, skipped atomic.Uint64
	lag            atomic.Int64 // ns
}

func (h *tickHealth) ticked(tk Tick) {
	h.ticks.Add(1)
	h.skipped.Add(tk.Skipped)
	h.lag.Store(int64(tk.Woke.Sub(tk.At)))
}

// Health reports the runtime's run loops and ticks. It takes the state's
// lock only to count the open run loops; safe from any goroutine.
func (r *Runtime) Health() Health {
	h := Health{Agent: r.cfg.Agent, Ticks: r.health.ticks.Load(), Skipped: r.health.skipped.Load(), TickLag: time.Duration(r.health.lag.Load())}
	r.mu.Lock()
	for _, l := range r.st.open {
		if l.waiting() {
			h.Interrupted++
		} else {
			h.Open++
		}
	}
	r.mu.Unlock()
	return h
}
