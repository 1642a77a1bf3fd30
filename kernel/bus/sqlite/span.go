package sqlite

import (
	"context"
	"database/sql/driver"
	"math"

	"github.com/kairo-os/kairo/abi"
	_ "modernc.org/sqlite" // pure-Go driver: kairo stays one static binary
)

// spanState is the span of the events stored since the last row of
// batches. Until it is written, a replay by time reads those events whole:
// at most spanEvents and a commit, or what a crash left after the last row.
type spanState struct {
	loaded      bool   // read from the file (at the first append)
	first, last uint64 // sequence numbers; first > last: none
	lo, hi      int64  // unix ns of the earliest and the latest event
}

func emptySpan(last uint64) spanState {
	return spanState{loaded: true, first: last + 1, last: last, lo: math.MaxInt64, hi: math.MinInt64}
}

// loadSpans reads, on the writer's connection dc inside its transaction,
// the span of the events after the last row of batches: a crash, or a
// store closed before its span was written, leaves some.
func (s *Store) loadSpans(dc any) (spanState, error) {
	last := s.last.Load()
	sp := emptySpan(last)
	row, err := queryRow(dc, `SELECT coalesce((SELECT last_seq FROM batches ORDER BY first_seq DESC LIMIT 1), 0)`)
	if err != nil {
		return sp, err
	}
	covered, _ := row[0].(int64)
	if uint64(covered) >= last {
		return sp, nil
	}
	row, err = queryRow(dc, `SELECT count(*), min(time), max(time) FROM events WHERE seq > ?`, covered)
	if err != nil {
		return sp, err
	}
	if n, _ := row[0].(int64); n > 0 {
		sp.first = uint64(covered) + 1
		sp.lo, _ = row[1].(int64)
		sp.hi, _ = row[2].(int64)
	}
	return sp, nil
}

func queryRow(dc any, query string, args ...any) ([]driver.Value, error) {
	named := make([]driver.NamedValue, len(args))
	for i, a := range args {
		named[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	rows, err := dc.(driver.QueryerContext).QueryContext(context.Background(), query, named)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(dest); err != nil {
		return nil, err
	}
	return dest, nil
}

// recordSpan adds the new events of evs, the last of them at seq last, to
// sp, and writes sp as a row of batches once it covers spanEvents.
func (s *Store) recordSpan(sp spanState, evs []*abi.Event, dup []bool, last uint64) (spanState, error) {
	for i, ev := range evs {
		if !dup[i] {
			t := ev.Time.UnixNano()
			sp.lo, sp.hi = min(sp.lo, t), max(sp.hi, t)
		}
	}
	sp.last = last
	if sp.last-sp.first+1 < spanEvents {
		return sp, nil
	}
	if err := s.writeSpan(sp); err != nil {
		return sp, err
	}
	return emptySpan(last), nil
}

func (s *Store) writeSpan(sp spanState) error {
	_, err := exec(s.span, []driver.NamedValue{
		{Ordinal: 1, Value: int64(sp.first)}, {Ordinal: 2, Value: int64(sp.last)},
		{Ordinal: 3, Value: sp.lo}, {Ordinal: 4, Value: sp.hi},
	})
	return err
}

// flushSpanLocked writes the pending span in a transaction of its own. The
// caller holds s.mu.
func (s *Store) flushSpanLocked() error {
	sp := s.spans
	if !sp.loaded || sp.first > sp.last {
		return nil
	}
	err := s.w.Raw(func(dc any) error {
		tx, err := dc.(driver.ConnBeginTx).BeginTx(context.Background(), driver.TxOptions{})
		if err != nil {
			return err
		}
		if err := s.writeSpan(sp); err != nil {
			tx.Rollback()
			return err
		}
		return tx.Commit()
	})
	if err == nil {
		s.spans = emptySpan(sp.last)
	}
	return err
}
