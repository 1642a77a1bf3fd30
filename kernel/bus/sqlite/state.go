package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"modernc.org/sqlite"
)

// storeState is what a SQLite store keeps beside its file, in PATH.state:
// enough to know, at the next open, whether the file still holds what was
// acknowledged. SQLite checks its pages; only Kairo knows that a file of
// zero bytes, or one whose write-ahead log was removed, is a loss.
type storeState struct {
	// Store is the store's identity, also kept in its meta table: a file
	// copied in from another home is not taken for this one.
	Store string `json:"store"`
	// Reserved bounds the sequence numbers handed out: none is above it.
	// It is written ahead of the events, so after a loss new events start
	// above it and no acknowledged number is given twice.
	Reserved uint64 `json:"reserved"`
	// Clean says the store was closed with every event in its file; Last
	// is then its last sequence number.
	Clean bool   `json:"clean"`
	Last  uint64 `json:"last,omitempty"`
}

// reserveStep is how far ahead of the last event the state reserves
// sequence numbers: the state file is rewritten once per reserveStep
// events.
const reserveStep = 1 << 20

// The page check of an open. A store of at most quickCheckWhole bytes is
// checked before anything is served, within quickCheckBudget; a larger one
// after the open, while it serves (checkPagesBehind), and what that finds
// is logged with the way out: a start's time does not grow with the log's
// length. `kairo store check` checks a stopped store whole.
var (
	quickCheckBudget = 500 * time.Millisecond
	quickCheckWhole  = int64(16 << 20)
	checkBehindAfter = 10 * time.Second
)

// ErrDamaged is wrapped by the errors of a store that is damaged or lost
// part of its log: the daemon refuses to serve it.
var ErrDamaged = errors.New("the event store is damaged")

func statePath(path string) string { return path + ".state" }

func readState(path string) (*storeState, error) {
	b, err := os.ReadFile(statePath(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", statePath(path), err)
	}
	var st storeState
	if err := json.Unmarshal(b, &st); err != nil || st.Store == "" {
		return nil, fmt.Errorf("%w: %s is not a store state Kairo wrote (%v); if events.db is sound, remove it and Kairo writes a new one", ErrDamaged, statePath(path), err)
	}
	return &st, nil
}

// stateSize is the state file's fixed size. The file is overwritten in
// place, never replaced: on a full disk an overwrite needs no new block,
// so a stop can still record that it was clean.
const stateSize = 256

// writeState overwrites the state file and syncs it: it is written before
// the events it covers are acknowledged.
func writeState(path string, st storeState) error {
	b, _ := json.Marshal(st)
	if len(b) >= stateSize {
		return fmt.Errorf("store state of %d bytes is over %d", len(b), stateSize)
	}
	rec := make([]byte, stateSize)
	copy(rec, b)
	for i := len(b); i < stateSize-1; i++ {
		rec[i] = ' '
	}
	rec[stateSize-1] = '\n'
	_, statErr := os.Stat(statePath(path))
	f, err := os.OpenFile(statePath(path), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", statePath(path), err)
	}
	_, err = f.WriteAt(rec, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", statePath(path), err)
	}
	if statErr != nil { // a new file: its name is made durable too
		if d, err := os.Open(filepath.Dir(path)); err == nil {
			d.Sync()
			d.Close()
		}
	}
	return nil
}

func newStoreID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// recovery is the advice every refusal ends with.
func recovery(path string) string {
	return fmt.Sprintf("`kairo store check` says what is readable; `kairo store salvage NEW.db` copies every readable event of %s into a fresh store and reports what was lost", path)
}

// checkBeforeOpen refuses a store file that should hold events and is
// missing or empty.
func checkBeforeOpen(path string, st *storeState) error {
	if st == nil || st.Reserved == 0 {
		return nil
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: %s is missing, but this home's store held events (sequence numbers up to %d are taken, says %s): restore it from a backup, or run `kairo store salvage NEW.db` to make an empty store that continues the sequence, and put it in its place", ErrDamaged, path, st.Reserved, statePath(path))
	case err != nil:
		return err
	case fi.Size() == 0:
		return fmt.Errorf("%w: %s is empty (0 bytes), but this home's store held events (sequence numbers up to %d are taken, says %s): it was truncated; restore it from a backup, or run `kairo store salvage NEW.db` to make an empty store that continues the sequence, and put it in its place", ErrDamaged, path, st.Reserved, statePath(path))
	}
	return nil
}

// ExplainDamage wraps an error that reading the store at path met, when
// it says the file is damaged, with [ErrDamaged] and what to run; other
// errors it returns as they are.
func ExplainDamage(err error, path string) error {
	var se *sqlite.Error
	var le *libError
	switch {
	case errors.As(err, &se) && (se.Code()&0xff == 11 || se.Code()&0xff == 26),
		errors.As(err, &le) && (le.Code()&0xff == 11 || le.Code()&0xff == 26):
		return fmt.Errorf("%w: %s: %v; %s", ErrDamaged, path, err, recovery(path))
	}
	return err
}

// describeOpenError says what an error of opening the file means.
func describeOpenError(path, what string, err error) error {
	if d := ExplainDamage(err, path); d != err { // SQLITE_CORRUPT, SQLITE_NOTADB
		return fmt.Errorf("%w (%s)", d, what)
	}
	return fmt.Errorf("open event store %s: %s: %w", path, what, err)
}

// verify checks an opened store against its state and its own pages,
// within quickCheckBudget, and returns the store's identity and the
// sequence number new events continue from.
func (s *Store) verify(st *storeState, walMissing bool) (id string, last uint64, err error) {
	db := s.wdb
	var maxSeq sql.NullInt64
	if err := db.QueryRow(`SELECT max(seq) FROM events`).Scan(&maxSeq); err != nil {
		return "", 0, describeOpenError(s.path, "read the last sequence number", err)
	}
	var floor sql.NullInt64
	db.QueryRow(`SELECT value FROM meta WHERE key = 'floor'`).Scan(&floor)
	last = max(uint64(maxSeq.Int64), uint64(floor.Int64))
	var stored sql.NullString
	db.QueryRow(`SELECT value FROM meta WHERE key = 'store'`).Scan(&stored)
	id = stored.String

	if st != nil {
		switch {
		case id != "" && id != st.Store:
			return "", 0, fmt.Errorf("%w: %s is store %s, but this home's is %s (%s): the file was copied in from another home; put this home's back, or move %s away to begin a new log", ErrDamaged, s.path, id, st.Store, statePath(s.path), statePath(s.path))
		case !st.Clean && walMissing && st.Reserved > last:
			return "", 0, fmt.Errorf("%w: Kairo did not stop cleanly and %s-wal, which holds the newest events, is missing: events after sequence number %d (up to at most %d) may be lost; put the WAL back if you have it, else %s", ErrDamaged, s.path, last, st.Reserved, recovery(s.path))
		case st.Clean && last < st.Last:
			return "", 0, fmt.Errorf("%w: %s ends at sequence number %d, but it held events up to %d when Kairo last stopped: it was replaced by an older copy or damaged; %s", ErrDamaged, s.path, last, st.Last, recovery(s.path))
		}
		if id == "" {
			id = st.Store
		}
	}
	if err := s.quickCheck(); err != nil {
		return "", 0, err
	}
	return id, last, nil
}

// quickCheck runs SQLite's page check for at most quickCheckBudget and
// decodes the newest events, where a crash leaves its damage.
func (s *Store) quickCheck() error {
	if quickCheckBudget <= 0 { // the benchmark's "before"
		return nil
	}
	if fi, err := os.Stat(s.path); err == nil && fi.Size() > quickCheckWhole {
		s.backCheck = make(chan struct{})
		go s.checkPagesBehind() // owned by the store: Close waits for it
		return s.checkNewest()
	}
	ctx, cancel := context.WithTimeout(context.Background(), quickCheckBudget)
	defer cancel()
	rows, err := s.rdb.QueryContext(ctx, `PRAGMA quick_check(8)`)
	if err == nil {
		var problems []string
		for rows.Next() {
			var line string
			if rows.Scan(&line) == nil && line != "ok" {
				problems = append(problems, line)
			}
		}
		err = rows.Err()
		rows.Close()
		if len(problems) > 0 {
			return fmt.Errorf("%w: %s fails SQLite's page check: %s; %s", ErrDamaged, s.path, strings.Join(problems, "; "), recovery(s.path))
		}
	}
	// A check the budget cut short is not an error: `kairo store check`
	// checks the whole file.
	if err != nil && ctx.Err() == nil {
		return describeOpenError(s.path, "check its pages", err)
	}
	return s.checkNewest()
}

// checkNewest decodes the newest events, where a crash leaves its damage.
func (s *Store) checkNewest() error {
	var maxSeq sql.NullInt64
	if err := s.rdb.QueryRow(`SELECT max(seq) FROM events`).Scan(&maxSeq); err != nil {
		return describeOpenError(s.path, "read the newest events", err)
	}
	if maxSeq.Int64 < 1 {
		return nil
	}
	ctx := context.Background()
	conn, err := s.rdb.Conn(ctx)
	if err != nil {
		return describeOpenError(s.path, "read the newest events", err)
	}
	defer conn.Close()
	to := uint64(maxSeq.Int64)
	err = conn.Raw(func(dc any) error {
		rd := &reader{dc: dc}
		defer rd.close()
		_, err := readRange(ctx, rd, s.packed, &bus.Query{}, nil, to-min(to-1, 63), to)
		return err
	})
	var bad *envError
	if errors.As(err, &bad) {
		return fmt.Errorf("%w: %s: event %d cannot be read: %v; %s", ErrDamaged, s.path, bad.seq, bad.err, recovery(s.path))
	}
	if err != nil {
		return describeOpenError(s.path, "read the newest events", err)
	}
	return nil
}

// reserve makes sure the state file says the store is open and reserves
// sequence numbers up to at least upTo, before any of them is handed out.
// The caller holds s.mu.
func (s *Store) reserve(upTo uint64) error {
	if s.stateOpen && upTo <= s.state.Reserved {
		return nil
	}
	st := s.state
	st.Clean, st.Last = false, 0
	st.Reserved = max(st.Reserved, upTo+reserveStep)
	if err := writeState(s.path, st); err != nil {
		return err
	}
	s.state, s.stateOpen = st, true
	return nil
}

// IsDiskFull reports whether err is a store's or the file system's "no
// space left".
func IsDiskFull(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == 13 { // SQLITE_FULL
		return true
	}
	return bus.IsDiskFull(err)
}

// diskFullError is an append's error that IsDiskFull recognises: its text
// and chain are SQLite's, and it matches syscall.ENOSPC, so that
// [bus.IsDiskFull], which knows no SQLite, sees a full disk.
type diskFullError struct{ err error }

func (e *diskFullError) Error() string        { return e.err.Error() }
func (e *diskFullError) Unwrap() error        { return e.err }
func (e *diskFullError) Is(target error) bool { return target == syscall.ENOSPC }

// checkPagesBehind checks the pages of a store too large to check within
// the open's budget, whole, while it serves; damage is logged with the
// way out, as the open would have said it. Close stops it.
func (s *Store) checkPagesBehind() {
	defer close(s.backCheck)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // ends with the check or the store
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	// Later than the start, which it would slow, and on a connection of
	// its own with a small page cache: a check of the whole file must not
	// leave a reader's cache full of it.
	select {
	case <-time.After(checkBehindAfter):
	case <-ctx.Done():
		return
	}
	db, err := sql.Open("sqlite", "file:"+s.path+"?_pragma=query_only(1)&_pragma=busy_timeout(10000)&_pragma=cache_size(-256)&_pragma=mmap_size(0)")
	if err != nil {
		return
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `PRAGMA quick_check(8)`)
	if err != nil {
		if ctx.Err() == nil && s.wal.log != nil {
			s.wal.log.Warn("the event store's page check after the open failed", "store", s.path, "err", err)
		}
		return
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if rows.Scan(&line) == nil && line != "ok" {
			problems = append(problems, line)
		}
	}
	if len(problems) > 0 && s.wal.log != nil {
		s.wal.log.Error("the event store fails SQLite's page check: reads of the damaged pages fail; stop kairo and "+recovery(s.path),
			"store", s.path, "problems", strings.Join(problems, "; "))
	}
}
