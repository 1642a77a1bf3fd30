package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
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
			send := func(r result) bool {
				select {
				case out <- r:
					return r.err == nil
				case <-ctx.Done():
					return false
				}
			}
			conn, err := s.rdb.Conn(ctx)
			if err != nil {
				send(result{err: err})
				return
			}
			defer conn.Close()
			// The worker keeps the driver connection for all its chunks, so
			// that each query is prepared once per scan.
			err = conn.Raw(func(dc any) error {
				rd := &reader{dc: dc}
				defer rd.close()
				if s.packed && workers > 1 {
					pc, err := openPackConn(s.path)
					if err != nil {
						return err
					}
					rd.pc = pc
				}
				for k := w; k < chunks; k += workers {
					from := lo + k*scanChunk
					to := min(from+scanChunk-1, hi)
					var evs []abi.Event
					select {
					case evs = <-free:
					default:
						evs = make([]abi.Event, 0, min(to-from+1, scanChunk))
					}
					var r result
					r.evs, r.err = readRange(ctx, rd, s.packed, &q, evs[:0], from, to)
					clear(r.evs[len(r.evs):cap(r.evs)]) // what this read did not overwrite
					if !send(r) {
						return nil
					}
				}
				return nil
			})
			if err != nil {
				send(result{err: err})
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
		// Not cleared: the next read overwrites each event whole. Clearing
		// a chunk of 4096, each pointer behind a write barrier while the GC
		// marks, was 5-6 % of a replay's CPU. Until then a chunk that waits
		// in free keeps the packs its events alias: a scan holds at most
		// 2*workers+1 such chunks (about 1.4 MiB of packs each for events
		// of 350 bytes) beside those in flight, all garbage once it ends.
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

// envError says that a stored envelope, or a pack of them, cannot be
// read: the file is damaged.
type envError struct {
	seq uint64
	err error
}

func (e *envError) Error() string { return fmt.Sprintf("event %d: %v", e.seq, e.err) }
func (e *envError) Unwrap() error { return e.err }

// reader reads on one driver connection, preparing each query once: a
// replay that prepared its queries again for each chunk of 4096 events
// spent 3 % of its CPU in SQLite's parser.
type reader struct {
	dc    any
	stmts map[string]driver.Stmt
	// pc, when not nil, reads the packs (a long scan's worker).
	pc *packConn
}

// query runs query, prepared on its first use, with args.
func (r *reader) query(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	st := r.stmts[query]
	if st == nil {
		pc, ok := r.dc.(driver.ConnPrepareContext)
		if !ok {
			return nil, fmt.Errorf("sqlite driver %T cannot prepare", r.dc)
		}
		var err error
		if st, err = pc.PrepareContext(ctx, query); err != nil {
			return nil, err
		}
		if r.stmts == nil {
			r.stmts = make(map[string]driver.Stmt)
		}
		r.stmts[query] = st
	}
	sq, ok := st.(driver.StmtQueryContext)
	if !ok {
		return nil, fmt.Errorf("sqlite driver statement %T cannot query", st)
	}
	return sq.QueryContext(ctx, args)
}

// close closes the statements r prepared, and its packConn; it must run
// before the driver connection is handed back.
func (r *reader) close() {
	for _, st := range r.stmts {
		st.Close()
	}
	if r.pc != nil {
		r.pc.close()
	}
}

// packRows are the rows of packsQuery: each pack's seqs, and its blob; ok
// is false when the row's envs is not a blob. next returns io.EOF after the
// last row.
type packRows interface {
	next() (first, last int64, blob []byte, ok bool, err error)
	close()
}

// packs runs packsQuery with lo, hi and from, on r's packConn when it has
// one.
func (r *reader) packs(ctx context.Context, lo, hi, from int64) (packRows, error) {
	if r.pc != nil {
		return r.pc.packs(ctx, lo, hi, from), nil
	}
	rows, err := r.query(ctx, packsQuery, []driver.NamedValue{{Ordinal: 1, Value: lo}, {Ordinal: 2, Value: hi}, {Ordinal: 3, Value: from}})
	if err != nil {
		return nil, err
	}
	return &driverPackRows{rows: rows, dest: make([]driver.Value, 3)}, nil
}

// driverPackRows are the rows of packsQuery through the driver, whose
// blob of each row is a slice it made for that row.
type driverPackRows struct {
	rows driver.Rows
	dest []driver.Value
}

func (r *driverPackRows) next() (first, last int64, blob []byte, ok bool, err error) {
	if err := r.rows.Next(r.dest); err != nil {
		return 0, 0, nil, false, err
	}
	first, _ = r.dest[0].(int64)
	last, _ = r.dest[1].(int64)
	blob, ok = r.dest[2].([]byte)
	return first, last, blob, ok, nil
}

func (r *driverPackRows) close() { r.rows.Close() }

// readRange appends to evs the events with from <= seq <= to that match q,
// read with rd: from the rows of packs that hold them
// (when the file has that table), and from their own rows where no pack
// does (schema 1's events, small appends', or a hole). It works on the
// driver's rows directly, skipping database/sql's per-row locks.
func readRange(ctx context.Context, rd *reader, packed bool, q *bus.Query, evs []abi.Event, from, to uint64) ([]abi.Event, error) {
	next := from // the first seq not read yet
	if packed {
		// A pack holds at most packEvents events, so one that reaches from
		// starts at most packEvents-1 before it.
		rows, err := rd.packs(ctx, int64(from-min(from-1, packEvents-1)), int64(to), int64(from))
		if err != nil {
			return evs, err
		}
		defer rows.close()
		for {
			first, last, blob, ok, err := rows.next()
			if err != nil {
				if err == io.EOF {
					break
				}
				return evs, err
			}
			if !ok || first < 1 || last < first || last-first >= packEvents || uint64(first) < next && next > from {
				return evs, &envError{max(next, uint64(max(first, 1))), fmt.Errorf("the pack from %d to %d is not one Kairo writes", first, last)}
			}
			if uint64(first) > next {
				if evs, _, err = readOwnRows(ctx, rd, q, evs, next, uint64(first)-1); err != nil {
					return evs, err
				}
			}
			if evs, err = unpack(q, evs, blob, uint64(first), uint64(last), max(from, uint64(first)), min(to, uint64(last))); err != nil {
				return evs, err
			}
			next = uint64(last) + 1
		}
	}
	if next <= to {
		var err error
		evs, _, err = readOwnRows(ctx, rd, q, evs, next, to)
		return evs, err
	}
	return evs, nil
}

// unpack appends to evs the events lo..hi of the pack blob, which holds
// first..last, that match q. Their strings and data alias the blob, which
// the driver allocated for this row: an event a caller keeps holds its
// pack (at most packBytes, or the one event), as an event of the JetStream
// store holds its message. A copy of each envelope cost a quarter of the
// replay's CPU (an allocation and its share of the GC).
func unpack(q *bus.Query, evs []abi.Event, blob []byte, first, last, lo, hi uint64) ([]abi.Event, error) {
	seq := first
	for off := 0; off < len(blob); seq++ {
		n, k := binary.Uvarint(blob[off:])
		if k <= 0 || n > uint64(len(blob)-off-k) || seq > last {
			return evs, &envError{seq, fmt.Errorf("the pack from %d to %d is cut short or too long", first, last)}
		}
		off += k
		if seq >= lo && seq <= hi {
			env := blob[off : off+int(n) : off+int(n)]
			evs = grow(evs)
			ev := &evs[len(evs)-1]
			if _, err := abi.DecodeEvent(env, ev); err != nil {
				return drop(evs), &envError{seq, err}
			}
			ev.Seq = seq
			if !q.MatchMeta(ev) {
				evs = drop(evs)
			}
		}
		off += int(n)
	}
	if seq != last+1 {
		return evs, &envError{seq, fmt.Errorf("the pack from %d to %d holds %d events", first, last, seq-first)}
	}
	return evs, nil
}

// readOwnRows appends to evs the events with from <= seq <= to that keep
// their envelope in their own row and match q. Without a time bound it
// reads the envelopes alone: seqs are dense
// (docs/RATIONALE.md#dense-sequence-numbers), so the i-th row of a range
// that holds to-from+1 rows is seq from+i, and the driver need not fetch
// and box a second column per row, a fifth of such a replay's CPU. A range
// with fewer rows (a hole) is read again with its seqs.
func readOwnRows(ctx context.Context, rd *reader, q *bus.Query, evs []abi.Event, from, to uint64) ([]abi.Event, uint64, error) {
	if q.Since.IsZero() && q.Until.IsZero() {
		read, rows, err := queryRows(ctx, rd, q, evs, from, to, "SELECT env FROM events WHERE seq >= ? AND seq <= ? ORDER BY seq", nil)
		if err != nil || rows == to-from+1 {
			return read, rows, err
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
	return queryRows(ctx, rd, q, evs, from, to, query+" ORDER BY seq", args)
}

// queryRows appends to evs the events of query's rows that match q's
// pattern, and counts the rows. query selects env, or seq and env, of the
// rows with from <= seq <= to (its first two parameters), and more
// parameters from args; without seq, the i-th row is seq from+i. The blob
// the driver allocates per row becomes the event's backing store, with no
// copy in between.
func queryRows(ctx context.Context, rd *reader, q *bus.Query, evs []abi.Event, from, to uint64, query string, args []driver.NamedValue) ([]abi.Event, uint64, error) {
	args = append([]driver.NamedValue{{Ordinal: 1, Value: int64(from)}, {Ordinal: 2, Value: int64(to)}}, args...)
	rows, err := rd.query(ctx, query, args)
	if err != nil {
		return evs, 0, err
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	var rowN uint64
	for ; ; rowN++ {
		if err := rows.Next(dest); err != nil {
			if err == io.EOF {
				return evs, rowN, nil
			}
			return evs, rowN, err
		}
		seq := int64(from + rowN)
		if len(dest) == 2 {
			seq, _ = dest[0].(int64)
		}
		env, ok := dest[len(dest)-1].([]byte)
		if !ok || len(env) == 0 {
			// An empty env is a packed event's: its pack is missing.
			return evs, rowN, &envError{uint64(seq), fmt.Errorf("no envelope: its row has %T of %d bytes, and no pack holds it", dest[len(dest)-1], len(env))}
		}
		evs = grow(evs)
		ev := &evs[len(evs)-1]
		if _, err := abi.DecodeEvent(env, ev); err != nil {
			return drop(evs), rowN, &envError{uint64(seq), err}
		}
		ev.Seq = uint64(seq)
		if q.Pattern != nil && !q.Pattern.Match(ev.Type) {
			evs = drop(evs)
		}
	}
}

// grow extends evs by one event for DecodeEvent, which overwrites it
// whole: appending a zero Event would write it twice, each pointer word
// behind a write barrier while the GC marks (the second write was about
// 4 % of a replay's CPU in pprof). The slots past len may hold events of
// the chunk's last read, which Scan's worker clears after each read.
func grow(evs []abi.Event) []abi.Event {
	if len(evs) < cap(evs) {
		return evs[:len(evs)+1]
	}
	return append(evs, abi.Event{})
}

// drop takes the last event off evs, cleared, so that a chunk kept for the
// next read holds no pack or row it read.
func drop(evs []abi.Event) []abi.Event {
	evs[len(evs)-1] = abi.Event{}
	return evs[:len(evs)-1]
}
