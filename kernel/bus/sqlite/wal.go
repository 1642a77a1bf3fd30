package sqlite

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/kairo-os/kairo/abi"
)

// DefaultWALMax is [Config.WALMax] when it is zero. Why the WAL has a
// bound: docs/RATIONALE.md#a-bounded-wal.
const DefaultWALMax = 64 << 20

// minWALMax is the smallest WALMax: below it checkpoints would come every
// few commits.
const minWALMax = 1 << 20

// The write-ahead log is kept under its bound (Config.WALMax) by
// checkpoints of three kinds, from the cheapest to the one that holds the
// writer:
//
//   - every checkpointInterval while events are appended, a PASSIVE one on
//     the checkpointer's connection, which never waits for anybody. Spacing
//     them a second apart copies a page that many commits touched (the
//     right edge of every B-tree) once, not once per commit. But under
//     steady publishing a PASSIVE never empties the WAL: the writer commits
//     again before it has copied everything, and SQLite starts the WAL
//     again from its beginning only once every frame is in the database
//     file;
//   - when the WAL passes a quarter of its bound, a RESTART one. PASSIVE
//     passes first copy, and a sync of the database file makes durable,
//     what the writer wrote, with the writer running; then, holding the
//     append mutex so no commit comes in between, a RESTART copies the
//     little the writer added meanwhile, after which the next commit
//     writes the WAL from its beginning. The writer waits for that last
//     step only, a few milliseconds;
//   - when the store has been quiet for walQuiet, a TRUNCATE, which gives
//     the file's blocks back.
//
// A commit that would take the WAL past its bound runs the RESTART itself
// first, so a checkpointer that fell behind cannot let the WAL grow on; only
// a single commit larger than 7/8 of the bound goes past it.
//
// A RESTART waits for readers still reading old frames, at most walBusyWait
// (SQLite's busy handler on the checkpointer's connection); a reader that
// holds its snapshot longer — the sqlite3 CLI in an open transaction, a
// backup — makes it give up. Checkpoints then fall back to PASSIVE alone,
// the store logs a warning, and tries again after a pause that doubles from
// walRetryMin to walRetryMax: such a reader holds the writer walBusyWait at
// a time, and seldom, while the WAL grows past its bound until it ends.
const (
	checkpointInterval = time.Second
	walQuiet           = time.Second
	walBusyWait        = 100 * time.Millisecond
	walRetryMin        = time.Second
	walRetryMax        = 30 * time.Second
)

// walPasses bounds the PASSIVE checkpoints before a RESTART; a pass shorter
// than walPassShort found little to copy.
const (
	walPasses    = 8
	walPassShort = 5 * time.Millisecond
)

// walState is the checkpointer's view of the WAL.
type walState struct {
	max   int64 // the bound: Config.WALMax
	soft  int64 // the checkpointer restarts the WAL from here
	late  int64 // past this it stops copying ahead and restarts at once
	limit int64 // journal_size_limit: what a restarted WAL is trimmed to
	log   *slog.Logger
	full  chan struct{} // the WAL passed soft: Append to the checkpointer
	db    dbSyncer      // the checkpointer's

	// Guarded by Store.mu.
	size    int64 // the WAL file's size when last looked at
	grown   int64 // at most what the commits since have added to it
	retry   time.Duration
	blocked bool // the last RESTART or TRUNCATE gave up

	retryAt atomic.Int64 // unix ns: no RESTART before, after one gave up

	restarts, truncates, giveUps atomic.Uint64
	held                         atomic.Int64 // ns the writer waited on checkpoints
}

// WALStats counts a Store's checkpoints of the write-ahead log.
type WALStats struct {
	// Restarts: the WAL was emptied and written again from its beginning
	// because it had grown past its threshold.
	Restarts uint64
	// Truncates: the WAL was given back to the file system after a quiet
	// spell.
	Truncates uint64
	// GiveUps: a RESTART or TRUNCATE gave up because a reader kept reading
	// old frames (logged as a warning the first time of a spell).
	GiveUps uint64
	// Held is how long, in all, these checkpoints held the writer.
	Held time.Duration
}

// WALStats returns the store's checkpoint counters.
func (s *Store) WALStats() WALStats {
	w := &s.wal
	return WALStats{Restarts: w.restarts.Load(), Truncates: w.truncates.Load(), GiveUps: w.giveUps.Load(), Held: time.Duration(w.held.Load())}
}

func (w *walState) init(path string, opts Config) error {
	w.max = opts.WALMax
	switch {
	case w.max == 0:
		w.max = DefaultWALMax
	case w.max < minWALMax:
		return fmt.Errorf("sqlite store: WAL bound of %d bytes is under the least, %d bytes (1MiB); give at least that", opts.WALMax, minWALMax)
	}
	w.soft, w.late, w.limit = w.max/4, w.max/4*3, w.max/8
	w.log = opts.Logger
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	w.full = make(chan struct{}, 1)
	w.db = newDBSyncer(path)
	return nil
}

// writerPragmas trim a restarted WAL to w.limit: under the size at which
// commits ask for a checkpoint, so the file's size says how far the WAL is.
func (w *walState) writerPragmas() string {
	return "&_pragma=journal_size_limit(" + strconv.FormatInt(w.limit, 10) + ")"
}

// beforeCommit returns at most how many bytes committing evs adds to the
// WAL. When that could take the WAL past its bound it first restarts the
// WAL, holding the writer: the checkpointer, which should have done so
// already, fell behind. The caller holds s.mu.
func (s *Store) beforeCommit(evs []*abi.Event) int64 {
	var data int64
	for _, ev := range evs {
		data += int64(len(ev.Data))
	}
	wrote := commitWALBytes(len(evs), data)
	w := &s.wal
	if w.size+w.grown+wrote < w.max || !s.mayRestart() {
		return wrote
	}
	w.size, w.grown = s.walSize(), 0
	if w.size+wrote >= w.max && w.size > w.limit {
		s.checkpointLocked("RESTART")
	}
	return wrote
}

// commitWALBytes is at most what a commit of n events, of data bytes in
// all, adds to the WAL: each row takes room in a table leaf and an id index
// leaf, filled at least half, and a commit rewrites the right edge of both
// B-trees (leaves and interior pages) and a row of batches, in frames of a
// page and a 24-byte header. An overestimate only looks at the file sooner.
func commitWALBytes(n int, data int64) int64 {
	const frame, edges = 4096 + 24, 12
	return 2*(data+int64(n)*160) + edges*frame
}

// WALBytes is the size of the write-ahead log's file now: what the
// checkpoints keep under Config.WALMax.
func (s *Store) WALBytes() int64 { return s.walSize() }

func (s *Store) walSize() int64 {
	fi, err := os.Stat(s.path + "-wal")
	if err != nil {
		return 0
	}
	return fi.Size()
}

// afterCommit is told at most how many bytes a commit added to the WAL. It
// looks at the file only when that may have passed soft, and then asks the
// checkpointer to restart the WAL: a stat per commit costs more than the
// rest of this. The caller holds s.mu.
func (s *Store) afterCommit(wrote int64) {
	w := &s.wal
	if w.grown += wrote; w.size+w.grown < w.soft || !s.mayRestart() {
		return
	}
	w.size, w.grown = s.walSize(), 0
	if w.size >= w.soft {
		select {
		case w.full <- struct{}{}:
		default:
		}
	}
}

func (s *Store) mayRestart() bool {
	return time.Now().UnixNano() >= s.wal.retryAt.Load()
}

// checkpointLocked runs a checkpoint that waits for readers to leave the
// WAL (RESTART or TRUNCATE) and reports whether it completed. The caller
// holds s.mu: no commit comes in between, and the next one starts the WAL
// again from its beginning.
func (s *Store) checkpointLocked(mode string) bool {
	w := &s.wal
	start := time.Now()
	var busy, frames, copied int64
	err := s.waitingCheckpoint(mode, &busy, &frames, &copied)
	w.held.Add(int64(time.Since(start)))
	if err == nil && busy == 0 {
		if mode == "TRUNCATE" {
			w.size = 0
			w.truncates.Add(1)
		} else {
			// The next commit trims the file to w.limit.
			w.size = min(w.size, w.limit)
			w.restarts.Add(1)
		}
		w.grown = 0
		w.retry = 0
		w.retryAt.Store(0)
		if w.blocked {
			w.blocked = false
			w.log.Info("event store: the write-ahead log is back within its bound", "path", s.path+"-wal", "bound_bytes", w.max)
		}
		return true
	}
	w.giveUps.Add(1)
	w.retry = min(max(2*w.retry, walRetryMin), walRetryMax)
	w.retryAt.Store(time.Now().Add(w.retry).UnixNano())
	if !w.blocked {
		w.blocked = true
		why := "a reader kept reading an old snapshot for longer than " + walBusyWait.String()
		if err != nil {
			why = err.Error()
		}
		w.log.Warn("event store: a checkpoint could not empty the write-ahead log; until it can, checkpoints copy only what no reader needs, and the log may grow past its bound",
			"mode", mode, "why", why, "wal_bytes", s.walSize(), "bound_bytes", w.max,
			"waited", time.Since(start).Round(time.Millisecond), "retry_in", w.retry)
	}
	return false
}

// waitingCheckpoint runs a RESTART or TRUNCATE checkpoint whose waits for
// readers SQLite's busy handler bounds to walBusyWait. The timeout is set
// on the connection each time: the store's DSN sets its own, and a driver
// that opens a fresh connection sets that one again.
func (s *Store) waitingCheckpoint(mode string, busy, frames, copied *int64) error {
	ctx := context.Background()
	c, err := s.cdb.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, `PRAGMA busy_timeout = `+strconv.FormatInt(walBusyWait.Milliseconds(), 10)); err != nil {
		return err
	}
	return c.QueryRowContext(ctx, `PRAGMA wal_checkpoint(`+mode+`)`).Scan(busy, frames, copied)
}

// passive copies what it can of the WAL into the database file without
// waiting for the writer or readers.
func (s *Store) passive() {
	s.cdb.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
}

// checkpointBySize answers the WAL passing soft.
func (s *Store) checkpointBySize() {
	if !s.mayRestart() {
		return
	}
	// The bulk of the copying, and of syncing the copies, with the writer
	// running: each pass copies what the writer added during the one
	// before, so what is left for the RESTART, which holds the writer, is
	// small.
	s.passes()
	if s.walSize() < s.wal.late && s.wal.db.sync() {
		s.passes()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wal.size, s.wal.grown = s.walSize(), 0
	if s.wal.size < s.wal.soft || !s.mayRestart() {
		return // a commit did it, or tried, meanwhile
	}
	if s.checkpointLocked("RESTART") {
		select {
		case <-s.wal.full: // asked again before this restart
		default:
		}
	}
}

// passes runs PASSIVE checkpoints until one finds little to copy or the
// WAL is near its bound.
func (s *Store) passes() {
	for range walPasses {
		start := time.Now()
		s.passive()
		if time.Since(start) < walPassShort || s.walSize() >= s.wal.late {
			return
		}
	}
}

// giveBack ends a quiet spell: the pending span is written and the WAL
// truncated to nothing. It reports whether it is done.
func (s *Store) giveBack() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.flushSpanLocked(); err != nil {
		return false
	}
	if s.walSize() == 0 {
		return true
	}
	return s.checkpointLocked("TRUNCATE")
}

// checkpointer runs the WAL's checkpoints (see walState) until s.stop.
// Appends kick it; while they go on it wakes once per checkpointInterval,
// not once per commit.
func (s *Store) checkpointer() {
	defer close(s.ckDone)
	t := time.NewTimer(checkpointInterval)
	t.Stop()
	const (
		idle   = iota // nothing appended since the WAL was given back
		active        // appends: PASSIVE every interval
		quiet         // no append in the last interval
	)
	state := idle
	for {
		var kick <-chan struct{}
		if state != active {
			kick = s.kick
		}
		select {
		case <-s.stop:
			return
		case <-s.wal.full:
			s.checkpointBySize()
		case <-kick:
			s.passive()
			state = active
			t.Reset(checkpointInterval)
		case <-t.C:
			switch state {
			case active:
				select {
				case <-s.kick:
					s.passive()
					t.Reset(checkpointInterval)
				default:
					state = quiet
					t.Reset(walQuiet)
				}
			case quiet:
				if s.giveBack() {
					state = idle
				} else {
					t.Reset(max(walRetryMin, s.retryIn()))
				}
			}
		}
	}
}

func (s *Store) retryIn() time.Duration {
	return time.Until(time.Unix(0, s.wal.retryAt.Load()))
}
