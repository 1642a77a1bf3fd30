package bus

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kairo-os/kairo/abi"
	"github.com/vmihailenco/msgpack/v5"
	_ "modernc.org/sqlite" // pure-Go driver: kairo stays one static binary
)

// SQLiteOptions configures a SQLiteStore. The zero value is useful.
type SQLiteOptions struct {
	// Synchronous is the SQLite synchronous level: "normal" (default) or
	// "full". In WAL mode "normal" survives any crash of the process — an
	// acknowledged event is in the WAL, which the next open replays — but a
	// power loss may drop the last commits; "full" adds an fsync per commit.
	Synchronous string
}

// SQLiteStore keeps events in one SQLite file in WAL mode. The table is
// plain enough to inspect with the sqlite3 CLI:
//
//	sqlite3 .kairo/events.db "select seq, type, datetime(time/1e9, 'unixepoch') from events"
type SQLiteStore struct {
	path  string
	wdb   *sql.DB // one connection: the bus serialises appends
	rdb   *sql.DB // readers, concurrent with the writer thanks to WAL
	last  atomic.Uint64
	mu    sync.Mutex // guards the writer's statements
	multi *sql.Stmt
	one   *sql.Stmt
	byID  *sql.Stmt
	enc   *msgpack.Encoder
	ebuf  bytes.Buffer
}

const schema = `
CREATE TABLE IF NOT EXISTS events (
	seq  INTEGER PRIMARY KEY,
	id   ANY NOT NULL UNIQUE,  -- 16-byte blob for canonical UUIDs, text otherwise
	type TEXT NOT NULL,
	time INTEGER NOT NULL,     -- unix nanoseconds
	env  BLOB NOT NULL         -- the whole envelope but seq, MsgPack (abi.Event)
);
CREATE INDEX IF NOT EXISTS events_time ON events(time);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value ANY);
INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', 1);
`

// rowsPerInsert is how many rows one INSERT statement carries: multi-row
// statements halve the per-row cost of binding and stepping.
const rowsPerInsert = 32

// OpenSQLite opens (creating if needed) the event store at path.
func OpenSQLite(path string, opts SQLiteOptions) (*SQLiteStore, error) {
	sync := strings.ToUpper(opts.Synchronous)
	switch sync {
	case "":
		sync = "NORMAL"
	case "NORMAL", "FULL":
	default:
		return nil, fmt.Errorf("sqlite store: synchronous %q: want \"normal\" or \"full\"", opts.Synchronous)
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(" + sync + ")"
	wdb, err := sql.Open("sqlite", dsn+"&_pragma=cache_size(-16384)")
	if err != nil {
		return nil, fmt.Errorf("open event store %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetConnMaxIdleTime(0)
	if _, err := wdb.Exec(schema); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open event store %s: create schema: %w (is it a Kairo event store?)", path, err)
	}
	rdb, err := sql.Open("sqlite", dsn+"&_pragma=query_only(1)&_pragma=mmap_size(1073741824)&_pragma=cache_size(-16384)")
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open event store %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(4)
	s := &SQLiteStore{path: path, wdb: wdb, rdb: rdb}
	s.enc = msgpack.NewEncoder(&s.ebuf)
	var last sql.NullInt64
	if err := wdb.QueryRow(`SELECT max(seq) FROM events`).Scan(&last); err != nil {
		s.Close()
		return nil, fmt.Errorf("open event store %s: read last sequence: %w", path, err)
	}
	s.last.Store(uint64(last.Int64))
	q := `INSERT INTO events(seq, id, type, time, env) VALUES ` +
		strings.TrimSuffix(strings.Repeat("(?,?,?,?,?),", rowsPerInsert), ",") + ` ON CONFLICT(id) DO NOTHING`
	for _, p := range []struct {
		st **sql.Stmt
		q  string
	}{
		{&s.multi, q},
		{&s.one, `INSERT INTO events(seq, id, type, time, env) VALUES (?,?,?,?,?) ON CONFLICT(id) DO NOTHING`},
		{&s.byID, `SELECT seq FROM events WHERE id = ?`},
	} {
		if *p.st, err = wdb.Prepare(p.q); err != nil {
			s.Close()
			return nil, fmt.Errorf("open event store %s: prepare: %w", path, err)
		}
	}
	return s, nil
}

func (s *SQLiteStore) Describe() string  { return "sqlite:" + s.path }
func (s *SQLiteStore) GroupCommit() bool { return true }
func (s *SQLiteStore) LastSeq() uint64   { return s.last.Load() }

// Close closes the store. A WAL checkpoint runs on the last connection's
// close, so the file is complete without its -wal.
func (s *SQLiteStore) Close() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.multi, s.one, s.byID} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	errs = append(errs, s.rdb.Close(), s.wdb.Close())
	return errors.Join(errs...)
}

// idArg is how an ID is keyed in the store.
func idArg(id string) any {
	var u [16]byte
	if parseCanonicalUUID(id, &u) {
		return u[:]
	}
	return id
}

func (s *SQLiteStore) rowArgs(args []any, ev *abi.Event, seq uint64) ([]any, error) {
	s.ebuf.Reset()
	if err := ev.EncodeMsgpack(s.enc); err != nil {
		return nil, fmt.Errorf("encode event %s: %w", ev.ID, err)
	}
	env := bytes.Clone(s.ebuf.Bytes())
	return append(args, int64(seq), idArg(ev.ID), ev.Type, ev.Time.UnixNano(), env), nil
}

// Append writes evs in one transaction. Sequence numbers stay dense: a
// multi-row insert that meets a duplicate ID is undone and redone row by row.
func (s *SQLiteStore) Append(evs []*abi.Event, dup []bool) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.wdb.Begin()
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tx.Rollback()
			for _, ev := range evs {
				ev.Seq = 0
			}
		}
	}()
	multi, one, byID := tx.Stmt(s.multi), tx.Stmt(s.one), tx.Stmt(s.byID)
	next := s.last.Load() + 1
	args := make([]any, 0, rowsPerInsert*5)
	i := 0
	for ; i+rowsPerInsert <= len(evs); i += rowsPerInsert {
		args = args[:0]
		for j, ev := range evs[i : i+rowsPerInsert] {
			if args, err = s.rowArgs(args, ev, next+uint64(j)); err != nil {
				return err
			}
		}
		res, err := multi.Exec(args...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == rowsPerInsert {
			for j, ev := range evs[i : i+rowsPerInsert] {
				ev.Seq, dup[i+j] = next+uint64(j), false
			}
			next += rowsPerInsert
			continue
		}
		if _, err := tx.Exec(`DELETE FROM events WHERE seq >= ?`, int64(next)); err != nil {
			return err
		}
		if next, err = s.appendRows(one, byID, evs[i:i+rowsPerInsert], dup[i:], next); err != nil {
			return err
		}
	}
	if next, err = s.appendRows(one, byID, evs[i:], dup[i:], next); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return err
	}
	s.last.Store(next - 1)
	return nil
}

func (s *SQLiteStore) appendRows(one, byID *sql.Stmt, evs []*abi.Event, dup []bool, next uint64) (uint64, error) {
	args := make([]any, 0, 5)
	for j, ev := range evs {
		var err error
		if args, err = s.rowArgs(args[:0], ev, next); err != nil {
			return 0, err
		}
		res, err := one.Exec(args...)
		if err != nil {
			return 0, err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			ev.Seq, dup[j] = next, false
			next++
			continue
		}
		var seq int64
		if err := byID.QueryRow(args[1]).Scan(&seq); err != nil {
			return 0, fmt.Errorf("look up duplicate id %s: %w", ev.ID, err)
		}
		ev.Seq, dup[j] = uint64(seq), true
	}
	return next, nil
}

// Scan reads events in sequence order.
func (s *SQLiteStore) Scan(ctx context.Context, q Query, fn func(*abi.Event) error) error {
	var where []string
	var args []any
	if q.FromSeq > 0 {
		where, args = append(where, "seq >= ?"), append(args, int64(q.FromSeq))
	}
	if q.ToSeq > 0 {
		where, args = append(where, "seq <= ?"), append(args, int64(q.ToSeq))
	}
	if !q.Since.IsZero() {
		where, args = append(where, "time >= ?"), append(args, q.Since.UnixNano())
	}
	if !q.Until.IsZero() {
		where, args = append(where, "time <= ?"), append(args, q.Until.UnixNano())
	}
	query := "SELECT seq, env FROM events"
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY seq"
	rows, err := s.rdb.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("scan event store: %w", err)
	}
	defer rows.Close()
	var (
		seq  int64
		env  sql.RawBytes
		rd   bytes.Reader
		dec  = msgpack.NewDecoder(&rd)
		ev   abi.Event
		sent int
	)
	for rows.Next() {
		if err := rows.Scan(&seq, &env); err != nil {
			return fmt.Errorf("scan event store: %w", err)
		}
		rd.Reset(env)
		if err := ev.DecodeMsgpack(dec); err != nil {
			return fmt.Errorf("event store row seq %d: %w", seq, err)
		}
		ev.Seq = uint64(seq)
		if q.Pattern != nil && !q.Pattern.Match(ev.Type) {
			continue
		}
		if err := fn(&ev); err != nil {
			if err == ErrStop {
				return nil
			}
			return err
		}
		if sent++; q.Limit > 0 && sent >= q.Limit {
			return nil
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("scan event store: %w", err)
	}
	return nil
}
