package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/kairo-os/kairo/kernel/bus"

	"github.com/kairo-os/kairo/abi"
	_ "modernc.org/sqlite" // pure-Go driver: kairo stays one static binary
)

// Scan reads events in sequence order. A long range is read in chunks by
// two workers on their own connections, decoding in parallel, and handed to
// fn in order: one SQLite connection steps rows at well under a million a
// second, and replaying a day of events should not take minutes.
func (s *Store) Scan(ctx context.Context, q bus.Query, fn func(*abi.Event) error) error {
	lo, hi := max(q.FromSeq, 1), s.last.Load()
	if q.ToSeq > 0 && q.ToSeq < hi {
		hi = q.ToSeq
	}
	if !q.Since.IsZero() || !q.Until.IsZero() {
		var err error
		if lo, hi, err = s.timeSpan(ctx, q, lo, hi); err != nil {
			return fmt.Errorf("scan event store: %w", err)
		}
	}
	if lo > hi {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := bus.NewHandout(q, fn)
	chunks := (hi-lo)/scanChunk + 1
	workers := uint64(2)
	if chunks < 2*workers {
		workers = 1
	}
	type result struct {
		evs []abi.Event
		err error
	}
	outs := make([]chan result, workers)
	// Chunks go back to the workers once fn has seen them, so a long replay
	// allocates the event structs of a few chunks, not of every event.
	free := make(chan []abi.Event, 2*workers+1)
	var wg sync.WaitGroup
	for w := range outs {
		outs[w] = make(chan result, 1)
		wg.Add(1)
		go func(w uint64, out chan<- result) {
			defer wg.Done()
			conn, err := s.rdb.Conn(ctx)
			if err == nil {
				defer conn.Close()
			}
			for k := w; k < chunks; k += workers {
				var r result
				if err != nil {
					r.err = err
				} else {
					from := lo + k*scanChunk
					var evs []abi.Event
					select {
					case evs = <-free:
					default:
					}
					r.evs, r.err = s.readChunk(ctx, conn, q, evs[:0], from, min(from+scanChunk-1, hi))
				}
				select {
				case out <- r:
				case <-ctx.Done():
					return
				}
				if r.err != nil {
					return
				}
			}
		}(uint64(w), outs[w])
	}
	// Deferred calls run last-in first-out: cancel here, before waiting, or
	// a scan that ends early waits for workers blocked on their next send.
	defer func() { cancel(); wg.Wait() }()
	for k := uint64(0); k < chunks; k++ {
		var r result
		select {
		case r = <-outs[k%workers]:
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.err != nil {
			return fmt.Errorf("scan event store: %w", r.err)
		}
		if err := out.Hand(r.evs); err != nil {
			if err == bus.ErrStop {
				return nil
			}
			return err
		}
		clear(r.evs) // drop references to the rows' buffers
		select {
		case free <- r.evs:
		default:
		}
	}
	return nil
}

// timeSpan narrows lo..hi to the spans whose events may fall in
// [q.Since, q.Until], and the events after the last span, whose times only
// the events know; the scan filters the events themselves.
func (s *Store) timeSpan(ctx context.Context, q bus.Query, lo, hi uint64) (uint64, uint64, error) {
	since, until := int64(math.MinInt64), int64(math.MaxInt64)
	if !q.Since.IsZero() {
		since = q.Since.UnixNano()
	}
	if !q.Until.IsZero() {
		until = q.Until.UnixNano()
	}
	var first, last, covered sql.NullInt64
	err := s.rdb.QueryRowContext(ctx,
		`SELECT min(first_seq), max(last_seq),
		        (SELECT last_seq FROM batches ORDER BY first_seq DESC LIMIT 1)
		 FROM batches
		 WHERE max_time >= ? AND min_time <= ? AND last_seq >= ? AND first_seq <= ?`,
		since, until, int64(lo), int64(hi)).Scan(&first, &last, &covered)
	if err != nil {
		return 0, 0, err
	}
	if tail := uint64(covered.Int64) + 1; tail <= hi {
		if first.Valid {
			return max(lo, uint64(first.Int64)), hi, nil
		}
		return max(lo, tail), hi, nil
	}
	if !first.Valid {
		return 1, 0, nil // nothing in that time range
	}
	return max(lo, uint64(first.Int64)), min(hi, uint64(last.Int64)), nil
}

// readChunk reads and decodes the events with from <= seq <= to that match
// q. It works on the driver's rows directly: the blob the driver allocates
// per row becomes the event's backing store, with no copy in between.
//
// Without a time bound it reads the envelopes alone: seqs are dense
// (docs/RATIONALE.md#dense-sequence-numbers), so the i-th row of a range
// that holds to-from+1 rows is seq from+i, and the driver need not fetch
// and box a second column per row, a fifth of a replay's CPU. A range with
// fewer rows (a hole, which no append leaves) is read again with its seqs.
func (s *Store) readChunk(ctx context.Context, conn *sql.Conn, q bus.Query, evs []abi.Event, from, to uint64) ([]abi.Event, error) {
	if evs == nil {
		evs = make([]abi.Event, 0, min(to-from+1, scanChunk))
	}
	if q.Since.IsZero() && q.Until.IsZero() {
		read, rows, err := s.readRows(ctx, conn, q, evs, from, to, "SELECT env FROM events WHERE seq >= ? AND seq <= ? ORDER BY seq", nil)
		if err != nil || rows == to-from+1 {
			return read, err
		}
		clear(read[len(evs):])
	}
	query := "SELECT seq, env FROM events WHERE seq >= ? AND seq <= ?"
	var args []driver.NamedValue
	if !q.Since.IsZero() {
		query += " AND time >= ?"
		args = append(args, driver.NamedValue{Ordinal: len(args) + 3, Value: q.Since.UnixNano()})
	}
	if !q.Until.IsZero() {
		query += " AND time <= ?"
		args = append(args, driver.NamedValue{Ordinal: len(args) + 3, Value: q.Until.UnixNano()})
	}
	evs, _, err := s.readRows(ctx, conn, q, evs, from, to, query+" ORDER BY seq", args)
	return evs, err
}

// readRows appends to evs the events of query's rows that match q's
// pattern, and counts the rows. query selects env, or seq and env, of the
// rows with from <= seq <= to (its first two parameters), and more
// parameters from args; without seq, the i-th row is seq from+i.
func (s *Store) readRows(ctx context.Context, conn *sql.Conn, q bus.Query, evs []abi.Event, from, to uint64, query string, args []driver.NamedValue) ([]abi.Event, uint64, error) {
	args = append([]driver.NamedValue{{Ordinal: 1, Value: int64(from)}, {Ordinal: 2, Value: int64(to)}}, args...)
	var rowN uint64
	err := conn.Raw(func(dc any) error {
		qc, ok := dc.(driver.QueryerContext)
		if !ok {
			return fmt.Errorf("sqlite driver %T cannot query", dc)
		}
		rows, err := qc.QueryContext(ctx, query, args)
		if err != nil {
			return err
		}
		defer rows.Close()
		dest := make([]driver.Value, len(rows.Columns()))
		for ; ; rowN++ {
			if err := rows.Next(dest); err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
			seq := int64(from + rowN)
			if len(dest) == 2 {
				seq, _ = dest[0].(int64)
			}
			env, ok := dest[len(dest)-1].([]byte)
			if !ok {
				return fmt.Errorf("row seq %d: env is %T, want a blob", seq, dest[len(dest)-1])
			}
			evs = append(evs, abi.Event{})
			ev := &evs[len(evs)-1]
			if _, err := abi.DecodeEvent(env, ev); err != nil {
				return fmt.Errorf("row seq %d: %w", seq, err)
			}
			ev.Seq = uint64(seq)
			if q.Pattern != nil && !q.Pattern.Match(ev.Type) {
				evs = evs[:len(evs)-1]
			}
		}
	})
	return evs, rowN, err
}
