package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
)

// StoreReport is what [Check] and [Salvage] found in a store file.
type StoreReport struct {
	Path     string
	Events   int    // readable events
	First    uint64 // their first and last sequence numbers
	Last     uint64
	Problems []string // what SQLite's check and the reading found, in order
	// Lost lists the sequence numbers that are stored and cannot be read,
	// as ranges.
	Lost []SeqRange
	// Reserved is what the home's state says was handed out, at most;
	// above Last, events Last+1..Reserved may have been acknowledged and
	// lost with the file or its WAL, unless the state says the store was
	// closed cleanly at Last.
	Reserved uint64
	Clean    bool
	// WALMissing: the store was not closed cleanly and its WAL is gone.
	WALMissing bool
}

// SeqRange is an inclusive range of sequence numbers.
type SeqRange struct{ From, To uint64 }

// String is "From..To", or the one number when the range holds one.
func (r SeqRange) String() string {
	if r.From == r.To {
		return strconv.FormatUint(r.From, 10)
	}
	return strconv.FormatUint(r.From, 10) + ".." + strconv.FormatUint(r.To, 10)
}

// SalvageProgress is told how far a check or salvage has read: done of total
// sequence numbers.
type SalvageProgress func(stage string, done, total uint64)

// Sound reports whether the check found nothing wrong.
func (r *StoreReport) Sound() bool {
	return len(r.Problems) == 0 && len(r.Lost) == 0 && r.unaccounted() == (SeqRange{})
}

// unaccounted is the range the state says may have been acknowledged and
// the file does not hold.
func (r *StoreReport) unaccounted() SeqRange {
	if !r.WALMissing || r.Clean || r.Reserved <= r.Last {
		return SeqRange{}
	}
	return SeqRange{r.Last + 1, r.Reserved}
}

// Summary is the report in a few lines for a person.
func (r *StoreReport) Summary() string {
	var b strings.Builder
	if r.Events == 0 {
		fmt.Fprintf(&b, "%s: no readable event\n", r.Path)
	} else {
		fmt.Fprintf(&b, "%s: %d readable events, sequence numbers %d..%d\n", r.Path, r.Events, r.First, r.Last)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "problem: %s\n", p)
	}
	if len(r.Lost) > 0 {
		var rs []string
		n := uint64(0)
		for _, l := range r.Lost {
			rs = append(rs, l.String())
			n += l.To - l.From + 1
		}
		fmt.Fprintf(&b, "lost: %d stored events cannot be read: %s\n", n, strings.Join(rs, ", "))
	}
	if u := r.unaccounted(); u != (SeqRange{}) {
		fmt.Fprintf(&b, "lost: Kairo did not stop cleanly and the file ends at %d: events above it, up to at most %d, may have been acknowledged and are not in it (none is, if the WAL was intact)\n", r.Last, u.To)
	}
	if r.Sound() {
		b.WriteString("the store is sound\n")
	}
	return b.String()
}

// openForCheck opens a store file read-only, whatever its state says.
func openForCheck(path string) (*sql.DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// Check checks a store file whole: SQLite's integrity check of every
// page, then every event read and decoded, against what the home's state
// says it should hold. It only reads; a daemon may be running on the
// file.
func Check(ctx context.Context, path string, progress SalvageProgress) (*StoreReport, error) {
	return readStore(ctx, path, progress, nil)
}

// Salvage copies every readable event of the store at src into a new
// store at dst, with its sequence number, and reports what was lost. New
// events of the new store continue above every sequence number src ever
// handed out. dst must not exist.
func Salvage(ctx context.Context, src, dst string, progress SalvageProgress) (*StoreReport, error) {
	if _, err := os.Lstat(dst); err == nil {
		return nil, fmt.Errorf("salvage: %s exists; name a new file", dst)
	}
	out, err := Open(dst, Config{})
	if err != nil {
		return nil, err
	}
	rep, err := readStore(ctx, src, progress, out.restore)
	if err == nil {
		err = out.seal(max(rep.Last, rep.Reserved))
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
		os.Remove(dst + "-wal")
		os.Remove(dst + "-shm")
		os.Remove(statePath(dst))
		return nil, err
	}
	return rep, nil
}

// readStore reads every event of the store at path in sequence order,
// handing each readable chunk to keep (if not nil), and reports what it
// could not read.
func readStore(ctx context.Context, path string, progress SalvageProgress, keep func([]*abi.Event) error) (*StoreReport, error) {
	if progress == nil {
		progress = func(string, uint64, uint64) {}
	}
	rep := &StoreReport{Path: path}
	st, err := readState(path)
	if err != nil {
		rep.Problems = append(rep.Problems, err.Error())
	} else if st != nil {
		rep.Reserved, rep.Clean = st.Reserved, st.Clean
		if st.Clean {
			rep.Reserved = st.Last
		}
	}
	_, err = os.Lstat(path + "-wal")
	walMissing := errors.Is(err, os.ErrNotExist)
	rep.WALMissing = walMissing && st != nil && !st.Clean
	_, err = os.Lstat(path + "-shm")
	shmMissing := errors.Is(err, os.ErrNotExist)
	db, err := openForCheck(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer func() {
		db.Close()
		// A read makes SQLite create the WAL and shared-memory files; a
		// check leaves the evidence as it found it, for the next open.
		if walMissing {
			if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() == 0 {
				os.Remove(path + "-wal")
			}
		}
		if shmMissing {
			os.Remove(path + "-shm")
		}
	}()

	progress("pages", 0, 1)
	if rows, err := db.QueryContext(ctx, `PRAGMA integrity_check(100)`); err != nil {
		rep.Problems = append(rep.Problems, "SQLite's check: "+err.Error())
	} else {
		for rows.Next() {
			var line string
			if rows.Scan(&line) == nil && line != "ok" {
				rep.Problems = append(rep.Problems, line)
			}
		}
		if err := rows.Err(); err != nil {
			rep.Problems = append(rep.Problems, "SQLite's check: "+err.Error())
		}
		rows.Close()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	progress("pages", 1, 1)

	var tables int
	db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'events'`).Scan(&tables)
	var maxSeq sql.NullInt64
	if tables == 0 {
		rep.Problems = append(rep.Problems, "the file has no events table: it is empty or not a Kairo event store")
	} else if err := db.QueryRowContext(ctx, `SELECT max(seq) FROM events`).Scan(&maxSeq); err != nil {
		rep.Problems = append(rep.Problems, "the last sequence number cannot be read: "+err.Error())
		maxSeq.Int64 = int64(min(rep.Reserved, math.MaxInt64))
	}
	hi := uint64(maxSeq.Int64)
	// A store of schema 1 has no packs: every event is in its own row.
	var packs int
	db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'packs'`).Scan(&packs)
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer conn.Close()
	lost := func(seq uint64) {
		if n := len(rep.Lost); n > 0 && rep.Lost[n-1].To+1 == seq {
			rep.Lost[n-1].To = seq
			return
		}
		rep.Lost = append(rep.Lost, SeqRange{seq, seq})
	}
	got := func(evs []*abi.Event) error {
		for _, ev := range evs {
			if rep.Events == 0 {
				rep.First = ev.Seq
			}
			rep.Events++
			rep.Last = max(rep.Last, ev.Seq)
		}
		if keep == nil || len(evs) == 0 {
			return nil
		}
		return keep(evs)
	}
	for from := uint64(1); from <= hi; from += scanChunk {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		to := min(from+scanChunk-1, hi)
		progress("events", from-1, hi)
		evs, err := readRows(ctx, conn, packs == 1, from, to)
		if err != nil {
			// Read the chunk row by row: only what cannot be read is lost.
			evs = evs[:0]
			for seq := from; seq <= to; seq++ {
				one, err := readRows(ctx, conn, packs == 1, seq, seq)
				if err != nil {
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					lost(seq)
					continue
				}
				evs = append(evs, one...)
			}
		}
		if err := got(evs); err != nil {
			return nil, err
		}
	}
	progress("events", hi, hi)
	if rep.Clean && rep.Last < rep.Reserved {
		rep.Problems = append(rep.Problems, fmt.Sprintf("the file ends at %d, but it held events up to %d when Kairo last stopped", rep.Last, rep.Reserved))
		rep.Lost = append(rep.Lost, SeqRange{rep.Last + 1, rep.Reserved})
	}
	return rep, nil
}

// readRows reads and decodes the stored events from..to, on conn.
func readRows(ctx context.Context, conn *sql.Conn, packed bool, from, to uint64) ([]*abi.Event, error) {
	var evs []abi.Event
	err := conn.Raw(func(dc any) error {
		rd := &reader{dc: dc}
		defer rd.close()
		var err error
		evs, err = readRange(ctx, rd, packed, &bus.Query{}, nil, from, to)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]*abi.Event, len(evs))
	for i := range evs {
		out[i] = &evs[i]
	}
	return out, nil
}

// restore stores evs, salvaged from another store, with their own
// sequence numbers, which must increase past the last stored.
func (s *Store) restore(evs []*abi.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := evs[len(evs)-1].Seq
	if evs[0].Seq <= s.last.Load() {
		return errors.New("salvage: sequence numbers out of order")
	}
	if err := s.reserve(last); err != nil {
		return err
	}
	// The append path's own pieces: its row arguments and prepared insert,
	// and a row of batches for the chunk's span.
	err := s.w.Raw(func(dc any) (err error) {
		tx, err := dc.(driver.ConnBeginTx).BeginTx(context.Background(), driver.TxOptions{})
		if err != nil {
			return err
		}
		defer func() {
			if err != nil {
				tx.Rollback()
			}
		}()
		sp := spanState{first: evs[0].Seq, last: last, lo: math.MaxInt64, hi: math.MinInt64}
		envs, err := s.encodeAll(evs, nil)
		if err != nil {
			return err
		}
		st := s.one
		if s.packed {
			st = s.onePacked
		}
		args := make([]driver.NamedValue, 0, 5)
		for i, ev := range evs {
			env := envs[i]
			if s.packed {
				env = nil
			}
			if _, err = exec(st, rowArgs(args[:0], ev, env, ev.Seq)); err != nil {
				return err
			}
			sp.lo, sp.hi = min(sp.lo, ev.Time.UnixNano()), max(sp.hi, ev.Time.UnixNano())
		}
		if s.packed {
			if err = s.writePacks(evs, envs, nil); err != nil {
				return err
			}
		}
		if err = s.writeSpan(sp); err != nil {
			return err
		}
		return tx.Commit()
	})
	if err != nil {
		return err
	}
	s.last.Store(last)
	s.atEnd = true
	return nil
}

// seal makes floor the sequence number new events continue above.
func (s *Store) seal(floor uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if floor <= s.last.Load() {
		return nil
	}
	if err := s.reserve(floor); err != nil {
		return err
	}
	if _, err := s.w.ExecContext(context.Background(), `INSERT INTO meta(key, value) VALUES ('floor', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, int64(floor)); err != nil {
		return err
	}
	s.last.Store(floor)
	s.atEnd = false // no row at floor
	return nil
}
