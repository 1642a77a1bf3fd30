package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kairo-os/kairo/internal/sqlitecache"
	"github.com/kairo-os/kairo/kernel/bus/internal/hook"

	"github.com/kairo-os/kairo/abi"
	_ "modernc.org/sqlite" // pure-Go driver: kairo stays one static binary
)

// Config configures a [Store]. The zero value is useful.
type Config struct {
	// Synchronous is the SQLite synchronous level: "normal" (default) or
	// "full". In WAL mode "normal" survives any crash of the process — an
	// acknowledged event is in the WAL, which the next open replays — but a
	// power loss may drop the last commits; "full" adds an fsync per commit.
	Synchronous string
	// WALMax bounds the write-ahead log file, in bytes: checkpoints keep it
	// under this at any publish rate, unless one commit alone is nearly as
	// large (7/8 of it) or a reader holds an old snapshot open for long
	// (see wal.go). Default DefaultWALMax (64 MiB); at least 1 MiB.
	WALMax int64
	// Logger gets the store's warnings (a WAL that a reader keeps from
	// being emptied). Nil discards them.
	Logger *slog.Logger
}

// Store keeps events in one SQLite file in WAL mode. The table is
// plain enough to inspect with the sqlite3 CLI:
//
//	sqlite3 .kairo/events.db "select seq, type, datetime(time/1e9, 'unixepoch') from events"
type Store struct {
	path string
	wdb  *sql.DB // the writer's one connection, held in w
	rdb  *sql.DB // readers, concurrent with the writer thanks to WAL
	cdb  *sql.DB // the checkpointer's connection
	last atomic.Uint64

	mu sync.Mutex // serialises appends on w
	w  *sql.Conn
	// atEnd: the events table ends at seq last, so the rowid SQLite
	// gives a row it is not told is last+1 (multi's rows). Not so after a
	// salvage that left a floor above the last row, until the next append.
	// Guarded by mu.
	atEnd bool
	// Statements prepared on w's driver connection, used only inside
	// w.Raw: the append path talks to the driver directly, skipping
	// database/sql's per-call conversions and locks.
	multi, one, onePacked, byID, del, span, pack driver.Stmt
	// small[n] inserts n rows with their envelopes in one statement, for
	// appends of 2 to smallRows events (appendSmall); nil below 2.
	small [smallRows + 1]driver.Stmt
	// packed: the file has the packs table (schema 2), which appends of
	// packMin events or more write. Set at open.
	packed  bool
	packBuf []byte // the pack being built; guarded by mu

	kick   chan struct{}
	stop   chan struct{}
	ckDone chan struct{}
	wal    walState  // the checkpointer's (wal.go)
	spans  spanState // the events not yet in batches; guarded by mu

	// What PATH.state says (store_state.go); stateOpen once it says the
	// store is open, which it does before the first event is stored.
	state     storeState
	stateOpen bool
	// full is set while the disk is full: appends are refused until it
	// has room for the reserve again (store_reserve.go).
	full atomic.Bool
	// backCheck is closed when the page check after the open ends (nil:
	// the open checked every page).
	backCheck chan struct{}
}

const schema = `
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS events (
	seq  INTEGER PRIMARY KEY,
	id   ANY NOT NULL UNIQUE,  -- 16-byte blob for canonical UUIDs, text otherwise
	type TEXT NOT NULL,
	time INTEGER NOT NULL,     -- unix nanoseconds
	env  BLOB NOT NULL         -- the whole envelope but seq, MsgPack (abi.Event); empty when a pack holds it
);
-- One row per append: the seq and time span of the events it stored. It
-- answers replay by time in place of an index on events(time), which would
-- cost every insert another B-tree update.
CREATE TABLE IF NOT EXISTS batches (
	first_seq INTEGER PRIMARY KEY,
	last_seq  INTEGER NOT NULL,
	min_time  INTEGER NOT NULL,
	max_time  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS batches_max_time ON batches(max_time);
-- Schema 2: the envelopes of events first_seq..last_seq (dense), each after
-- its length as a uvarint, the i-th of seq first_seq+i; at most packEvents
-- events and packBytes bytes (or one larger event). Their rows in events
-- keep id, type and time, with an empty env. A replay reads a row per pack,
-- not per event; events no pack holds (schema 1's, small appends') keep
-- their envelope in their own row.
CREATE TABLE IF NOT EXISTS packs (
	first_seq INTEGER PRIMARY KEY,
	last_seq  INTEGER NOT NULL,
	envs      BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value ANY);
INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', 2);
UPDATE meta SET value = 2 WHERE key = 'schema' AND value < 2;
COMMIT;
`

// schemaVersion is the format this code writes and reads; it reads schema
// 1 too, whose events all keep their envelope in their own row.
const schemaVersion = 2

// Packs: an append of at least packMin events stores their envelopes in
// rows of packs of at most packEvents events and packBytes bytes (one
// event larger than that has a pack of its own), so that one read of a
// replay never holds an unbounded blob. A smaller append keeps each
// envelope in its event's row: a pack row would cost a commit of one event
// a third page in the WAL (docs/RATIONALE.md#packs-of-envelopes).
const (
	packMin    = 8
	packEvents = 128
	packBytes  = 32 << 10
)

// smallRows is the most events an append stores with one statement of
// small: the appends too small to be packed, such as a user message's or
// the agent's tick.
const smallRows = packMin - 1

// rowsPerInsert is how many rows one INSERT statement carries: multi-row
// statements halve the per-row cost of binding and stepping. Its value is
// in kernel/bus/internal/hook, for the store tests of kernel/bus.
const rowsPerInsert = hook.SQLiteRowsPerInsert

// openSQLiteFile opens (creating if needed) the event store at path.
func openSQLiteFile(path string, opts Config) (*Store, error) {
	syncMode := strings.ToUpper(opts.Synchronous)
	switch syncMode {
	case "":
		syncMode = "NORMAL"
	case "NORMAL", "FULL":
	default:
		return nil, fmt.Errorf("sqlite store: synchronous %q: want \"normal\" or \"full\"", opts.Synchronous)
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(" + syncMode + ")"
	s := &Store{path: path, kick: make(chan struct{}, 1), stop: make(chan struct{}), ckDone: make(chan struct{})}
	if err := s.wal.init(path, opts); err != nil {
		return nil, err
	}
	fail := func(what string, err error) (*Store, error) {
		s.closeDBs()
		return nil, fmt.Errorf("open event store %s: %s: %w", path, what, err)
	}
	// What the home says the file should hold, checked before SQLite
	// opens it (and creates what is missing).
	st, err := readState(path)
	if err != nil {
		return nil, err
	}
	if err := checkBeforeOpen(path, st); err != nil {
		return nil, err
	}
	_, err = os.Lstat(path + "-wal")
	walMissing := errors.Is(err, os.ErrNotExist)
	// Create the file private before SQLite does (with the umask); SQLite
	// gives the -wal and -shm files the database file's mode.
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open event store: %w", err)
	}
	f.Close()
	// The writer does not checkpoint on commit: the checkpointer goroutine
	// does it on its own connection, off the append path. Each connection's
	// cache is sized by sqlitecache, with no memory map:
	// docs/RATIONALE.md#sqlite-page-caches.
	if s.wdb, err = sql.Open("sqlite", dsn+sqlitecache.Pragmas()+"&_pragma=wal_autocheckpoint(0)"+s.wal.writerPragmas()); err != nil {
		return fail("open", err)
	}
	s.wdb.SetMaxOpenConns(1)
	if _, err := s.wdb.Exec(schema); err != nil {
		s.wdb.Exec(`ROLLBACK`)
		// A store of schema 1 on a full disk cannot take its packs table:
		// it serves reads, and appends keep every envelope in its row,
		// until an open with room makes the table.
		if !IsDiskFull(err) {
			s.closeDBs()
			return nil, describeOpenError(path, "create schema (is it a Kairo event store?)", err)
		}
	}
	var version int64
	var packs int
	s.wdb.QueryRow(`SELECT value FROM meta WHERE key = 'schema'`).Scan(&version)
	s.wdb.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'packs'`).Scan(&packs)
	if version > schemaVersion {
		s.closeDBs()
		return nil, fmt.Errorf("open event store %s: its format is schema %d, and this Kairo reads at most schema %d: run a newer kairo", path, version, schemaVersion)
	}
	s.packed = packs == 1
	if s.rdb, err = sql.Open("sqlite", dsn+"&_pragma=query_only(1)"+sqlitecache.Pragmas()); err != nil {
		return fail("open readers", err)
	}
	s.rdb.SetMaxOpenConns(sqlitecache.MaxReaders)
	s.rdb.SetConnMaxIdleTime(sqlitecache.ReaderIdle)
	// The checkpointer copies pages from the WAL: it needs no cache.
	if s.cdb, err = sql.Open("sqlite", dsn+"&_pragma=cache_size(-256)"); err != nil {
		return fail("open checkpointer", err)
	}
	s.cdb.SetMaxOpenConns(1)
	id, last, err := s.verify(st, walMissing)
	if err != nil {
		s.closeDBs()
		return nil, err
	}
	if id == "" {
		id = newStoreID()
	}
	// A store made before the state existed gets its identity now; on a
	// full disk it gets it at a later open.
	s.wdb.Exec(`INSERT OR IGNORE INTO meta(key, value) VALUES ('store', ?)`, id)
	s.state = storeState{Store: id}
	if st != nil {
		s.state.Reserved = st.Reserved
	}
	s.last.Store(last)
	var maxSeq sql.NullInt64
	if err := s.wdb.QueryRow(`SELECT max(seq) FROM events`).Scan(&maxSeq); err != nil {
		return fail("read the last sequence number", err)
	}
	s.atEnd = uint64(maxSeq.Int64) == last
	if s.w, err = s.wdb.Conn(context.Background()); err != nil {
		return fail("writer connection", err)
	}
	// multi leaves seq to SQLite, which gives each row the last rowid and
	// one: the same dense sequence, with a value less to bind and no
	// search for a row of that seq (docs/RATIONALE.md#dense-sequence-numbers).
	// OR IGNORE rather than ON CONFLICT(id) DO NOTHING: with no constraint
	// that may abort it (NOT NULL's would), SQLite keeps no statement
	// journal, a copy of each page the statement first changes. A row it
	// skips, whatever the reason, sends the chunk to one, row by row.
	// Its rows are those of a packed append: their envelopes go to packs.
	multi := `INSERT OR IGNORE INTO events(id, type, time, env) VALUES ` +
		strings.TrimSuffix(strings.Repeat("(?,?,?,x''),", rowsPerInsert), ",")
	// small's rows carry their envelopes: OR IGNORE as multi, so that
	// env's NOT NULL cannot abort the statement either.
	type prep struct {
		st *driver.Stmt
		q  string
	}
	var smalls []prep
	for n := 2; n <= smallRows; n++ {
		smalls = append(smalls, prep{&s.small[n], `INSERT OR IGNORE INTO events(id, type, time, env) VALUES ` +
			strings.TrimSuffix(strings.Repeat("(?,?,?,?),", n), ",")})
	}
	err = s.w.Raw(func(dc any) error {
		pc, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("sqlite driver %T cannot prepare", dc)
		}
		for _, p := range append([]prep{
			{&s.multi, multi},
			{&s.one, `INSERT INTO events(seq, id, type, time, env) VALUES (?,?,?,?,?) ON CONFLICT(id) DO NOTHING`},
			{&s.onePacked, `INSERT INTO events(seq, id, type, time, env) VALUES (?,?,?,?,x'') ON CONFLICT(id) DO NOTHING`},
			{&s.byID, `SELECT seq FROM events WHERE id = ?`},
			{&s.del, `DELETE FROM events WHERE seq >= ?`},
			{&s.span, `INSERT INTO batches(first_seq, last_seq, min_time, max_time) VALUES (?,?,?,?)`},
			{&s.pack, `INSERT INTO packs(first_seq, last_seq, envs) VALUES (?,?,?)`},
		}, smalls...) {
			var err error
			if p.st == &s.pack && !s.packed {
				continue
			}
			if *p.st, err = pc.PrepareContext(context.Background(), p.q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fail("prepare", err)
	}
	go s.checkpointer()
	return s, nil
}

// Describe is "sqlite:" and the database file's path.
func (s *Store) Describe() string { return "sqlite:" + s.path }

// GroupCommit is true: each append is a transaction on disk, so the bus
// batches the events of many publishers into one.
func (s *Store) GroupCommit() bool { return true }

// LastSeq is the sequence number of the last event stored, 0 if none; it
// takes no lock and reads no disk.
func (s *Store) LastSeq() uint64 { return s.last.Load() }

// Close closes the store after a final checkpoint that empties the WAL, so
// the file is complete on its own.
func (s *Store) Close() error {
	close(s.stop)
	<-s.ckDone
	if s.backCheck != nil {
		<-s.backCheck
	}
	var errs []error
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w != nil {
		s.flushSpanLocked() // best effort: replay by time reads past the last span
		errs = append(errs, s.w.Raw(func(any) error {
			for _, st := range append([]driver.Stmt{s.multi, s.one, s.onePacked, s.byID, s.del, s.span, s.pack}, s.small[:]...) {
				if st != nil {
					st.Close()
				}
			}
			return nil
		}))
		if s.stateOpen || s.state.Reserved > 0 {
			// No event comes after Last: the next open can tell a file, or
			// a WAL, that lost some.
			st := s.state
			st.Clean, st.Last = true, s.last.Load()
			if err := writeState(s.path, st); err != nil && !IsDiskFull(err) {
				errs = append(errs, err)
			}
		}
		// On a full disk the events stay in the WAL, which the next open
		// reads: the stop is still clean.
		if _, err := s.w.ExecContext(context.Background(), `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil && !IsDiskFull(err) {
			errs = append(errs, err)
		}
		errs = append(errs, s.w.Close())
	}
	errs = append(errs, s.closeDBs())
	// SQLite's own checkpoint at the last close fails the same way on a
	// full disk, and loses nothing either.
	for i, err := range errs {
		if IsDiskFull(err) {
			errs[i] = nil
		}
	}
	return errors.Join(errs...)
}

func (s *Store) closeDBs() error {
	var errs []error
	for _, db := range []*sql.DB{s.cdb, s.rdb, s.wdb} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	return errors.Join(errs...)
}

// EncodeEnv encodes the stored form of ev. The bus calls it in the
// publisher's goroutine, so encoding runs in parallel with the serialised
// append.
func (s *Store) EncodeEnv(ev *abi.Event) ([]byte, error) {
	e := *ev
	e.Seq = 0 // the row's seq column holds it
	return abi.AppendEvent(make([]byte, 0, 128+len(e.Data)), &e), nil
}

// idArg is how an ID is keyed in the store.
func idArg(id string) any {
	var u [16]byte
	if abi.ParseUUID(id, &u) {
		return u[:]
	}
	return id
}

// rowArgs appends the values of ev's row to args: seq first, unless it is
// 0 (SQLite gives it), then id, type, time, and env unless it is nil (a
// packed row, whose statement stores an empty env).
func rowArgs(args []driver.NamedValue, ev *abi.Event, env []byte, seq uint64) []driver.NamedValue {
	n := len(args)
	if seq != 0 {
		args = append(args, driver.NamedValue{Ordinal: n + 1, Value: int64(seq)})
		n++
	}
	args = append(args,
		driver.NamedValue{Ordinal: n + 1, Value: idArg(ev.ID)},
		driver.NamedValue{Ordinal: n + 2, Value: ev.Type},
		driver.NamedValue{Ordinal: n + 3, Value: ev.Time.UnixNano()},
	)
	if env != nil {
		args = append(args, driver.NamedValue{Ordinal: n + 4, Value: env})
	}
	return args
}

// encodeAll returns envs, or evs encoded when it is nil.
func (s *Store) encodeAll(evs []*abi.Event, envs [][]byte) ([][]byte, error) {
	if envs != nil {
		return envs, nil
	}
	envs = make([][]byte, len(evs))
	for i, ev := range evs {
		var err error
		if envs[i], err = s.EncodeEnv(ev); err != nil {
			return nil, err
		}
	}
	return envs, nil
}

func exec(st driver.Stmt, args []driver.NamedValue) (int64, error) {
	res, err := st.(driver.StmtExecContext).ExecContext(context.Background(), args)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Append writes evs in one transaction. envs, when not nil, holds each
// event's stored form from EncodeEnv. Sequence numbers stay dense: a
// multi-row insert that meets a duplicate ID is undone and redone row by row.
func (s *Store) Append(evs []*abi.Event, envs [][]byte, dup []bool) error {
	err := s.appendEvents(evs, envs, dup)
	if err != nil && IsDiskFull(err) {
		return &diskFullError{err}
	}
	return err
}

func (s *Store) appendEvents(evs []*abi.Event, envs [][]byte, dup []bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.room(); err != nil {
		return err
	}
	envs, err := s.encodeAll(evs, envs)
	if err != nil {
		return err
	}
	packed := s.packed && len(evs) >= packMin
	wrote := s.beforeCommit(evs)
	var first, next uint64
	sp := s.spans
	err = s.w.Raw(func(dc any) (err error) {
		tx, err := dc.(driver.ConnBeginTx).BeginTx(context.Background(), driver.TxOptions{})
		if err != nil {
			return err
		}
		defer func() {
			if err != nil {
				tx.Rollback()
			}
		}()
		first = s.last.Load() + 1
		next = first
		if err := s.reserve(first + uint64(len(evs))); err != nil {
			return err
		}
		if !sp.loaded {
			if sp, err = s.loadSpans(dc); err != nil {
				return fmt.Errorf("read the time span of the last events: %w", err)
			}
		}
		// The multi-row statement's arguments, made only for an append
		// that has rows for it: a commit of a few events (the agent's
		// tick, a user message) made and cleared these 5 KiB each time.
		var args []driver.NamedValue
		i := 0
		for ; s.atEnd && packed && i+rowsPerInsert <= len(evs); i += rowsPerInsert {
			if args == nil {
				args = make([]driver.NamedValue, 0, rowsPerInsert*4)
			}
			args = args[:0]
			for _, ev := range evs[i : i+rowsPerInsert] {
				args = rowArgs(args, ev, nil, 0)
			}
			all, err := s.insertNumbered(s.multi, args, evs[i:i+rowsPerInsert], dup[i:], next)
			if err != nil {
				return err
			}
			if all {
				next += rowsPerInsert
				continue
			}
			if next, err = s.appendRows(evs[i:i+rowsPerInsert], envs[i:], packed, dup[i:], next); err != nil {
				return err
			}
		}
		stored := false
		if rest := len(evs) - i; s.atEnd && !packed && rest >= 2 && rest <= smallRows {
			if stored, err = s.appendSmall(evs[i:], envs[i:], dup[i:], next); err != nil {
				return err
			}
			if stored {
				next += uint64(rest)
			}
		}
		if !stored {
			if next, err = s.appendRows(evs[i:], envs[i:], packed, dup[i:], next); err != nil {
				return err
			}
		}
		if packed {
			// In the same transaction as the rows: an event is acknowledged
			// only once its pack is committed.
			if err := s.writePacks(evs, envs, dup); err != nil {
				return err
			}
		}
		if next > first {
			if sp, err = s.recordSpan(sp, evs, dup, next-1); err != nil {
				return err
			}
		}
		return tx.Commit()
	})
	if err != nil {
		for _, ev := range evs {
			ev.Seq = 0
		}
		if IsDiskFull(err) {
			s.full.Store(true)
		}
		return err
	}
	s.last.Store(next - 1)
	if next > first {
		s.atEnd = true // the last row stored is last
	}
	s.spans = sp
	s.afterCommit(wrote)
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return nil
}

// spanEvents is how many events one row of batches covers, at least: a
// row per commit would cost every commit two more pages in the WAL (the
// row's leaf and its max_time index leaf), as much as the event itself.
const spanEvents = 4096

// appendSmall inserts evs, 2 to smallRows events with their envelopes, in
// one statement, rows next on: one statement in place of one a row took a
// commit of five events (the agent's tick) from 87 to 78 µs of the
// committer's CPU (BenchmarkAppendSmall). It reports false, with none of
// evs left in the table, when a row was not inserted (a duplicate id), for
// appendRows to redo row by row.
func (s *Store) appendSmall(evs []*abi.Event, envs [][]byte, dup []bool, next uint64) (bool, error) {
	var buf [4 * smallRows]driver.NamedValue
	args := buf[:0]
	for j, ev := range evs {
		args = rowArgs(args, ev, envs[j], 0)
	}
	return s.insertNumbered(s.small[len(evs)], args, evs, dup, next)
}

// insertNumbered runs st, an INSERT OR IGNORE of evs' rows with args, which
// SQLite numbers from next on. When every row went in, it gives evs their
// seqs and reports true; when a duplicate id was skipped, it deletes the
// rows that did go in, in the same transaction, and reports false, for
// appendRows to redo evs row by row.
func (s *Store) insertNumbered(st driver.Stmt, args []driver.NamedValue, evs []*abi.Event, dup []bool, next uint64) (bool, error) {
	res, err := st.(driver.StmtExecContext).ExecContext(context.Background(), args)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	// SQLite numbered the rows: the check costs nothing, and a store whose
	// table did not end at last fails here, not later.
	if got, _ := res.LastInsertId(); n > 0 && got != int64(next)+n-1 {
		return false, fmt.Errorf("SQLite gave the last of %d new rows seq %d, want %d: the events table does not end at the store's last sequence number", n, got, int64(next)+n-1)
	}
	if n != int64(len(evs)) {
		if n > 0 {
			if _, err := exec(s.del, []driver.NamedValue{{Ordinal: 1, Value: int64(next)}}); err != nil {
				return false, err
			}
		}
		return false, nil
	}
	for j, ev := range evs {
		ev.Seq, dup[j] = next+uint64(j), false
	}
	return true, nil
}

// appendRows inserts evs one by one, looking up the stored sequence number
// of each duplicate; packed rows leave their envelope to writePacks.
func (s *Store) appendRows(evs []*abi.Event, envs [][]byte, packed bool, dup []bool, next uint64) (uint64, error) {
	args := make([]driver.NamedValue, 0, 5)
	st := s.one
	if packed {
		st = s.onePacked
	}
	for j, ev := range evs {
		var env []byte
		if !packed {
			env = envs[j]
		}
		args = rowArgs(args[:0], ev, env, next)
		n, err := exec(st, args)
		if err != nil {
			return 0, err
		}
		if n == 1 {
			ev.Seq, dup[j] = next, false
			next++
			continue
		}
		seq, err := s.lookup(args[1].Value)
		if err != nil {
			return 0, fmt.Errorf("look up duplicate id %s: %w", ev.ID, err)
		}
		ev.Seq, dup[j] = seq, true
	}
	return next, nil
}

// writePacks writes the envelopes of the events of evs that were stored
// (dup[i] false; dup nil: all), in seq order, as rows of packs: a pack
// ends at packEvents events, at packBytes, and where seqs are not dense.
func (s *Store) writePacks(evs []*abi.Event, envs [][]byte, dup []bool) error {
	buf := s.packBuf[:0]
	var first, last uint64
	n := 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		_, err := exec(s.pack, []driver.NamedValue{
			{Ordinal: 1, Value: int64(first)}, {Ordinal: 2, Value: int64(last)}, {Ordinal: 3, Value: buf},
		})
		buf, n = buf[:0], 0
		return err
	}
	for i, ev := range evs {
		if dup != nil && dup[i] {
			continue
		}
		env := envs[i]
		if n > 0 && (ev.Seq != last+1 || n == packEvents || len(buf)+binary.MaxVarintLen64+len(env) > packBytes) {
			if err := flush(); err != nil {
				return err
			}
		}
		if n == 0 {
			first = ev.Seq
		}
		buf = binary.AppendUvarint(buf, uint64(len(env)))
		buf = append(buf, env...)
		last = ev.Seq
		n++
	}
	err := flush()
	if cap(buf) <= 2*packBytes { // one larger event's pack is not kept
		s.packBuf = buf[:0]
	}
	return err
}

func (s *Store) lookup(id any) (uint64, error) {
	rows, err := s.byID.(driver.StmtQueryContext).QueryContext(context.Background(), []driver.NamedValue{{Ordinal: 1, Value: id}})
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	dest := make([]driver.Value, 1)
	if err := rows.Next(dest); err != nil {
		return 0, err
	}
	seq, _ := dest[0].(int64)
	return uint64(seq), nil
}

// scanChunk is how many sequence numbers one replay worker reads at a time
// (its value is in kernel/bus/internal/hook, as rowsPerInsert's).
const scanChunk = hook.SQLiteScanChunk
