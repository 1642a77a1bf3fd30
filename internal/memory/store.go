package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kairo-os/kairo/internal/sqlitecache"
	"github.com/kairo-os/kairo/kernel/bus"
	_ "modernc.org/sqlite" // pure-Go driver: kairo stays one static binary
)

// Config configures a Store. The zero value is useful: full-text search
// only, reasoning not kept, every commit synced.
type Config struct {
	// Embedder, when set, gives every segment a vector and adds vector
	// similarity to full-text search.
	Embedder Embedder
	// KeepReasoning lets reasoning segments in. Off, Index drops any it is
	// given, so no thought reaches the disk whatever the caller cut
	// (seed 000 §4.2); see SegmentConfig.KeepReasoning.
	KeepReasoning bool
	// Synchronous is the SQLite synchronous level: "full" (default) or
	// "normal". With "full" an Index that returned nil survives a power
	// loss, for one fsync per Index — a run loop ends rarely. With
	// "normal" (WAL mode) it survives any crash of the process but a power
	// loss may drop the last ones.
	Synchronous string
	// QueryEmbedTimeout bounds the embedding of a query; past it, Retrieve
	// answers by full text alone. Default 2s.
	QueryEmbedTimeout time.Duration
	// OnEmbedError is told each time the embedder fails during Retrieve,
	// which then answers by full text alone rather than failing. It is
	// called on a goroutine of Retrieve's, before Retrieve returns. nil:
	// the failure is logged at warn level.
	OnEmbedError func(error)
	// Logger receives what the store cannot return: vectors it skipped on
	// open, embedder failures without OnEmbedError. Default slog.Default().
	Logger *slog.Logger
}

// Store is the long-term memory: the segments of the run loops that ended,
// in one SQLite file of its own (WAL mode), with an FTS5 index over their
// text and, with an Embedder, their vectors — on disk, and in memory for
// search. It is safe for concurrent use: Index calls are serialized,
// Retrieve and Expand run beside them and each other.
type Store struct {
	path string
	opts Config
	log  *slog.Logger
	wdb  *sql.DB // the writer: one connection
	rdb  *sql.DB // readers, concurrent with the writer thanks to WAL

	wmu sync.Mutex // serializes Index; held while vec is brought up to date

	vmu sync.RWMutex
	vec *vectorIndex // vectors of opts.Embedder's model; nil without one

	terms *termCounts

	cmu    sync.RWMutex
	closed bool

	smu   sync.Mutex
	stmts map[string]*sql.Stmt // reader statements, prepared once (see query)

	// termBudget bounds the segments a full-text query walks (pruneTerms);
	// tests lower it to see pruning on a small corpus.
	termBudget int
}

// defaultTermBudget keeps a full-text query to a few milliseconds: FTS5
// scores about a segment a microsecond (see fulltext.go).
const defaultTermBudget = 2000

// The schema. segments holds every segment of every run loop indexed;
// segments_fts is contentless (the text is in segments already) with
// deletes allowed, so indexing a run loop again replaces its rows. Its
// context column holds the run loop's goal and the segment's Context; both
// columns end with their names (see names). terms counts the segments that
// hold each term (terms.go).
const schema = `
CREATE TABLE IF NOT EXISTS loops (
	id         TEXT PRIMARY KEY,
	goal       TEXT NOT NULL,
	indexed_at INTEGER NOT NULL   -- unix nanoseconds
);
CREATE TABLE IF NOT EXISTS segments (
	id        INTEGER PRIMARY KEY,
	loop_id   TEXT NOT NULL,
	iteration INTEGER NOT NULL,
	segment   INTEGER NOT NULL,
	type      TEXT NOT NULL,
	time      INTEGER NOT NULL,  -- unix nanoseconds
	event_id  TEXT NOT NULL,
	text      TEXT NOT NULL,
	context   TEXT NOT NULL,
	origin    TEXT NOT NULL DEFAULT 'unknown',  -- Provenance (schema 2)
	source    TEXT NOT NULL DEFAULT '',
	quotes    INTEGER NOT NULL DEFAULT 0,
	UNIQUE (loop_id, iteration, segment)
);
CREATE VIRTUAL TABLE IF NOT EXISTS segments_fts USING fts5(
	text, context, content='', contentless_delete=1,
	tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TABLE IF NOT EXISTS terms (
	term TEXT PRIMARY KEY,
	docs INTEGER NOT NULL       -- segments that hold it
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS vectors (
	segment_id INTEGER PRIMARY KEY,
	model      TEXT NOT NULL,
	vec        BLOB NOT NULL     -- little-endian float32, unit length
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value ANY);
INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', 2);
`

// schemaVersion is the schema this code writes. Version 1 had no
// provenance: migrate adds its columns, the user's messages marked as
// theirs and everything else as of unknown origin (shown as data) until
// the run loop is indexed again from the log (Store.Legacy).
const schemaVersion = 2

// migrate brings a store of an older schema up to this one, in one
// transaction; a store of a newer schema is refused.
func (s *Store) migrate() error {
	var v int
	if err := s.wdb.QueryRow(`SELECT value FROM meta WHERE key = 'schema'`).Scan(&v); err != nil {
		return err
	}
	if v > schemaVersion {
		return fmt.Errorf("the store has schema %d, newer than this Kairo's %d: run a newer Kairo, or move the file away to start a new memory", v, schemaVersion)
	}
	var has int
	if err := s.wdb.QueryRow(`SELECT count(*) FROM pragma_table_info('segments') WHERE name = 'origin'`).Scan(&has); err != nil {
		return err
	}
	if has > 0 && v == schemaVersion {
		return nil
	}
	tx, err := s.wdb.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if has == 0 {
		for _, q := range []string{
			`ALTER TABLE segments ADD COLUMN origin TEXT NOT NULL DEFAULT 'unknown'`,
			`ALTER TABLE segments ADD COLUMN source TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE segments ADD COLUMN quotes INTEGER NOT NULL DEFAULT 0`,
			`UPDATE segments SET origin = 'user' WHERE type = 'user_message'`,
		} {
			if _, err := tx.Exec(q); err != nil {
				return err
			}
		}
	}
	if _, err := tx.Exec(`UPDATE meta SET value = ? WHERE key = 'schema'`, schemaVersion); err != nil {
		return err
	}
	return tx.Commit()
}

// Errors a caller may test for with errors.Is.
var (
	// ErrEmptyQuery is Retrieve's answer to a query with nothing but
	// white space.
	ErrEmptyQuery = errors.New("memory: the query is empty: give the words to look for")
	// ErrNotFound is Expand's answer to an anchor that points at nothing
	// indexed.
	ErrNotFound = errors.New("memory: anchor not found")
	// ErrClosed is the answer of every method after Close.
	ErrClosed = errors.New("memory: the store is closed")
	// ErrEmbed marks an Index that stored a run loop for full-text search
	// but could not embed it: index the run loop again to add its vectors.
	ErrEmbed = errors.New("memory: embedding failed")
)

// Open opens (creating if needed) the memory store at path, a SQLite file
// (conventionally memory.db in the data folder, which must exist), and, with
// an Embedder, loads that model's vectors into memory.
func Open(path string, opts Config) (*Store, error) {
	syncMode := strings.ToUpper(opts.Synchronous)
	switch syncMode {
	case "":
		syncMode = "FULL"
	case "NORMAL", "FULL":
	default:
		return nil, fmt.Errorf("memory: Options.Synchronous %q: want \"full\" or \"normal\"", opts.Synchronous)
	}
	if opts.QueryEmbedTimeout <= 0 {
		opts.QueryEmbedTimeout = 2 * time.Second
	}
	s := &Store{path: path, opts: opts, log: opts.Logger, termBudget: defaultTermBudget}
	if s.log == nil {
		s.log = slog.Default()
	}
	fail := func(what string, err error) (*Store, error) {
		s.closeDBs()
		return nil, fmt.Errorf("memory: open %s: %s: %w", path, what, err)
	}
	// Create the file private before SQLite does (with the umask); SQLite
	// gives the -wal and -shm files the database file's mode.
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("memory: open %s (does its folder exist?): %w", path, err)
	}
	f.Close()
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(" + syncMode + ")"
	// Caches sized by sqlitecache, no memory map:
	// docs/RATIONALE.md#sqlite-page-caches.
	if s.wdb, err = sql.Open("sqlite", dsn+sqlitecache.Pragmas()); err != nil {
		return fail("open", err)
	}
	s.wdb.SetMaxOpenConns(1)
	if _, err := s.wdb.Exec(schema); err != nil {
		return fail("create schema (is it a Kairo memory store?)", err)
	}
	if err := s.migrate(); err != nil {
		return fail("migrate the schema", err)
	}
	if s.rdb, err = sql.Open("sqlite", dsn+"&_pragma=query_only(1)"+sqlitecache.Pragmas()); err != nil {
		return fail("open readers", err)
	}
	s.rdb.SetMaxOpenConns(sqlitecache.MaxReaders)
	s.rdb.SetMaxIdleConns(sqlitecache.MaxReaders)
	s.rdb.SetConnMaxIdleTime(sqlitecache.ReaderIdle)
	if err := s.loadTerms(); err != nil {
		return fail("load term counts", err)
	}
	if opts.Embedder != nil {
		if s.vec, err = s.loadVectors(opts.Embedder.Model()); err != nil {
			return fail("load vectors", err)
		}
	}
	return s, nil
}

// loadVectors reads the vectors of model into memory. Vectors of another
// length than the first are skipped (the endpoint changed its dimensions):
// indexing their run loops again replaces them.
func (s *Store) loadVectors(model string) (*vectorIndex, error) {
	v := newVectorIndex()
	var n int
	if err := s.wdb.QueryRow(`SELECT count(*) FROM vectors WHERE model = ?`, model).Scan(&n); err != nil {
		return nil, err
	}
	rows, err := s.wdb.Query(`SELECT segment_id, vec FROM vectors WHERE model = ?`, model)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	skipped := 0
	var buf []float32
	for rows.Next() {
		var id int64
		var blob []byte
		if err := rows.Scan(&id, &blob); err != nil {
			return nil, err
		}
		if buf, err = decodeVector(buf[:0], blob); err != nil {
			return nil, fmt.Errorf("segment %d: %w", id, err)
		}
		if v.dim == 0 {
			v.dim = len(buf)
			v.ids = make([]int64, 0, n)
			v.vecs = make([]float32, 0, n*v.dim)
		}
		if v.add(id, buf) != nil {
			skipped++
		}
	}
	if skipped > 0 {
		s.log.Warn("memory: vectors of another length skipped; index their run loops again to replace them",
			"path", s.path, "model", model, "skipped", skipped, "dimensions", v.dim)
	}
	return v, rows.Err()
}

// Close closes the store after a checkpoint that empties the WAL, so the
// file is complete on its own. Calls in flight finish first.
func (s *Store) Close() error {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.smu.Lock()
	for _, st := range s.stmts {
		st.Close()
	}
	s.smu.Unlock()
	_, err := s.wdb.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	err = errors.Join(err, s.closeDBs())
	if bus.IsDiskFull(err) {
		// On a full disk the checkpoint cannot finish; what it would have
		// copied stays in the WAL, which the next open reads.
		return nil
	}
	return err
}

func (s *Store) closeDBs() error {
	var errs []error
	for _, db := range []*sql.DB{s.rdb, s.wdb} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	return errors.Join(errs...)
}

// maxCachedStatements bounds the reader statements kept prepared: the
// queries are few, but those with an IN list come in one shape a length.
const maxCachedStatements = 64

// query runs a reader query through a statement prepared once: SQLite
// parses and plans a statement in tens of microseconds, a sizable part of
// a query that must answer in a few milliseconds.
func (s *Store) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	s.smu.Lock()
	st := s.stmts[q]
	if st == nil && len(s.stmts) < maxCachedStatements {
		var err error
		if st, err = s.rdb.PrepareContext(ctx, q); err != nil {
			s.smu.Unlock()
			return nil, err
		}
		if s.stmts == nil {
			s.stmts = map[string]*sql.Stmt{}
		}
		s.stmts[q] = st
	}
	s.smu.Unlock()
	if st == nil {
		return s.rdb.QueryContext(ctx, q, args...)
	}
	return st.QueryContext(ctx, args...)
}

// use holds the store open for the length of a call.
func (s *Store) use() (release func(), err error) {
	s.cmu.RLock()
	if s.closed {
		s.cmu.RUnlock()
		return nil, ErrClosed
	}
	return s.cmu.RUnlock, nil
}
