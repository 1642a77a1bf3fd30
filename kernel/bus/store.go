package bus

import (
	"context"
	"errors"
	"time"

	"github.com/kairo-os/kairo/abi"
)

// Store keeps the events of the bus. The bus serialises Append calls; Scan
// and LastSeq may run concurrently with them.
type Store interface {
	// Append stores evs in order and assigns each its Seq. An event whose ID
	// is already stored is not stored again: its Seq is set to the stored
	// one and dup[i] is set. On error nothing of evs is stored. envs is nil,
	// or holds each event's stored form from the store's EnvEncoder.
	Append(evs []*abi.Event, envs [][]byte, dup []bool) error
	// Scan calls fn for each stored event that matches q, in sequence order,
	// until fn returns an error (ErrStop ends the scan without one).
	Scan(ctx context.Context, q Query, fn func(*abi.Event) error) error
	// LastSeq is the sequence number of the last stored event, 0 if none.
	LastSeq() uint64
	// GroupCommit reports whether appends are costly enough that the bus
	// should batch them across publishers (one disk transaction for many
	// events) rather than append each under its lock.
	GroupCommit() bool
	// Describe names the store for metrics and logs.
	Describe() string
	Close() error
}

// EnvEncoder is implemented by stores that keep events in an encoded form.
// The bus calls EncodeEnv in the publisher's goroutine, before the
// serialised append, so encoding runs in parallel across publishers.
type EnvEncoder interface {
	EncodeEnv(ev *abi.Event) ([]byte, error)
}

// Query selects stored events. Zero values leave a bound open.
type Query struct {
	FromSeq uint64
	ToSeq   uint64
	Since   time.Time
	Until   time.Time
	Pattern *abi.Pattern // nil: every subject
	Limit   int          // 0: no limit
}

// ErrStop, returned by a Scan callback, ends the scan early without error.
var ErrStop = errors.New("stop scan")

// GapError says that events a reader asked for are gone from a bounded store.
type GapError struct {
	From, To uint64 // the missing sequence numbers, inclusive
}

// Error names the evicted range and the stores that keep everything.
func (e *GapError) Error() string {
	return "events " + utoa(e.From) + ".." + utoa(e.To) + " were evicted from the in-memory store before they were read; use the SQLite store or a larger ring"
}

func utoa(u uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + u%10)
		u /= 10
		if u == 0 {
			return string(b[i:])
		}
	}
}

// MatchMeta reports whether ev is within q's times and pattern: what a
// store checks of each event after it has narrowed its read to q's
// sequence range.
func (q *Query) MatchMeta(ev *abi.Event) bool {
	if !q.Since.IsZero() && ev.Time.Before(q.Since) {
		return false
	}
	if !q.Until.IsZero() && ev.Time.After(q.Until) {
		return false
	}
	return q.Pattern == nil || q.Pattern.Match(ev.Type)
}

// Handout gives a store's Scan callback its events and counts them
// against the query's Limit, so that every store stops where the others
// do.
type Handout struct {
	fn    func(*abi.Event) error
	limit int
	sent  int
}

// NewHandout returns the [Handout] of a Scan of q that calls fn.
func NewHandout(q Query, fn func(*abi.Event) error) *Handout {
	return &Handout{fn: fn, limit: q.Limit}
}

// Hand calls the Scan callback with each of evs. It returns [ErrStop] once
// the limit is reached or the callback asks to stop (Scan then ends
// without error), or the callback's error.
func (h *Handout) Hand(evs []abi.Event) error {
	for i := range evs {
		if err := h.fn(&evs[i]); err != nil {
			return err
		}
		if h.sent++; h.limit > 0 && h.sent >= h.limit {
			return ErrStop
		}
	}
	return nil
}
