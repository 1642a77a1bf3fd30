package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
	"github.com/vmihailenco/msgpack/v5"
)

func openSQLite(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(path, Config{})
	if err != nil {
		t.Fatalf("OpenSQLite(%s): %v", path, err)
	}
	return s
}

// Everything published is in the file after Close, without its -wal; the
// file passes SQLite's integrity check; a reopened store continues the
// sequence and still knows the old IDs.
func TestSQLiteDurability(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	b := bus.New(openSQLite(t, path), bus.Config{})
	var sent []abi.Event
	for i := range 100 {
		ev := &abi.Event{Type: fmt.Sprintf("kairo.durable.%d", i%4), Data: bustest.Payload(t, i), CorrelationID: "corr", Source: "src"}
		if i%10 == 0 {
			ev.ID = fmt.Sprintf("text-id-%d", i)
		}
		a, err := b.PublishAsync(ev)
		if err != nil {
			t.Fatal(err)
		}
		bustest.WaitAcks(t, []*bus.Ack{a})
		sent = append(sent, *ev)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	checkIntegrity(t, path)

	// The main file alone holds everything.
	alone := filepath.Join(t.TempDir(), "copy.db")
	copyFile(t, path, alone)
	if cs := openSQLite(t, alone); cs.LastSeq() != 100 {
		t.Errorf("the database file without its WAL has LastSeq %d, want 100", cs.LastSeq())
		cs.Close()
	} else {
		cs.Close()
	}

	s := openSQLite(t, path)
	if got := s.LastSeq(); got != 100 {
		t.Fatalf("reopened LastSeq = %d, want 100", got)
	}
	b = bus.New(s, bus.Config{})
	defer b.Close()
	stored := bustest.ReplayAll(t, b, bus.Query{})
	bustest.CheckDense(t, stored, 1)
	if len(stored) != len(sent) {
		t.Fatalf("reopened store holds %d events, want %d", len(stored), len(sent))
	}
	for i, ev := range stored {
		w := sent[i]
		if ev.ID != w.ID || ev.Type != w.Type || !ev.Time.Equal(w.Time) || string(ev.Data) != string(w.Data) || ev.CorrelationID != w.CorrelationID || ev.Source != w.Source {
			t.Errorf("seq %d after reopening = %+v, want %+v", ev.Seq, ev, w)
		}
	}
	for i, id := range []string{sent[7].ID, sent[30].ID} {
		if res := bustest.MustPublish(t, b, &abi.Event{ID: id, Type: "kairo.durable.again"}); !res.Duplicate || res.Seq != sent[[]int{7, 30}[i]].Seq {
			t.Errorf("republishing %q after reopening = %+v, want a duplicate", id, res)
		}
	}
	for i := range 10 {
		if res := bustest.MustPublish(t, b, &abi.Event{Type: "kairo.durable.new"}); res.Seq != uint64(101+i) || res.Duplicate {
			t.Fatalf("publish after reopening = %+v, want seq %d", res, 101+i)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	checkIntegrity(t, path)
}

// checkIntegrity runs SQLite's own checks on the file and the journal mode.
func checkIntegrity(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res, mode string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil {
		t.Fatalf("integrity_check: %v", err)
	}
	if res != "ok" {
		t.Errorf("integrity_check = %q, want ok", res)
	}
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// Canonical UUIDs are keyed as 16-byte blobs, other IDs as text, so an
// upper-case UUID is a different ID from its lower-case form.
func TestSQLiteIDKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	s := openSQLite(t, path)
	const lower = "0192d6c4-7a2e-7b3c-8d4e-5f6a7b8c9d0e"
	ids := []string{lower, strings.ToUpper(lower), "order-42", ""}
	var evs []*abi.Event
	for i, id := range ids[:3] {
		evs = append(evs, bustest.StoreEvent(t, id, i))
	}
	if dup := bustest.AppendOrFail(t, s, evs, false); slices.Contains(dup, true) {
		t.Fatalf("dup = %v, want three distinct ids", dup)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want := []struct {
		typ string
		n   int
	}{{"blob", 16}, {"text", 36}, {"text", 8}}
	for i, w := range want {
		var typ string
		var n int
		if err := db.QueryRow("SELECT typeof(id), length(id) FROM events WHERE seq = ?", i+1).Scan(&typ, &n); err != nil {
			t.Fatal(err)
		}
		if typ != w.typ || n != w.n {
			t.Errorf("id %q is stored as %s of %d bytes, want %s of %d", ids[i], typ, n, w.typ, w.n)
		}
	}
}

func TestOpenSQLiteErrors(t *testing.T) {
	dir := t.TempDir()
	notDB := filepath.Join(dir, "not-a-db")
	if err := os.WriteFile(notDB, []byte(strings.Repeat("this is not a database\n", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		opts       Config
		want       []string
	}{
		{"bad synchronous", filepath.Join(dir, "a.db"), Config{Synchronous: "sometimes"}, []string{"synchronous", `"sometimes"`, "normal", "full"}},
		{"not a database", notDB, Config{}, []string{notDB}},
		{"missing directory", filepath.Join(dir, "no", "such", "dir", "events.db"), Config{}, []string{"events.db"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(tc.path, tc.opts)
			if err == nil {
				s.Close()
				t.Fatalf("OpenSQLite(%s, %+v) succeeded", tc.path, tc.opts)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	for _, mode := range []string{"full", "FULL", "Normal", ""} {
		s, err := Open(filepath.Join(t.TempDir(), "events.db"), Config{Synchronous: mode})
		if err != nil {
			t.Errorf("Synchronous %q: %v", mode, err)
			continue
		}
		bustest.AppendOrFail(t, s, []*abi.Event{bustest.StoreEvent(t, "x", 1)}, false)
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

// The stored form is the envelope without its seq, which the row holds.
func TestSQLiteEncodeEnv(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "events.db"))
	defer s.Close()
	ev := bustest.StoreEvent(t, "id-1", 7)
	ev.Seq = 42
	env, err := s.EncodeEnv(ev)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Seq != 42 {
		t.Errorf("EncodeEnv changed ev.Seq to %d", ev.Seq)
	}
	var back abi.Event
	if err := msgpack.Unmarshal(env, &back); err != nil {
		t.Fatal(err)
	}
	if back.Seq != 0 || back.ID != "id-1" || bustest.PayloadInt(t, &back) != 7 {
		t.Errorf("stored form decodes to %+v, want the event without seq", back)
	}
}

// A store sealed above its last row (as a salvage leaves it) continues
// densely from the floor: the first append numbers its rows itself, those
// after let SQLite number them, and a reopened store agrees.
func TestSQLiteAppendAboveFloor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	s := openSQLite(t, path)
	batch := func(from int) []*abi.Event {
		evs := make([]*abi.Event, 3*rowsPerInsert+1)
		for i := range evs {
			evs[i] = bustest.StoreEvent(t, fmt.Sprintf("id-%d", from+i), from+i)
		}
		return evs
	}
	bustest.AppendOrFail(t, s, batch(0), true)
	if err := s.seal(1000); err != nil {
		t.Fatal(err)
	}
	for k := range 2 {
		evs := batch((k + 1) * 1000)
		bustest.AppendOrFail(t, s, evs, true)
		for i, ev := range evs {
			if want := uint64(1001 + k*len(evs) + i); ev.Seq != want {
				t.Fatalf("append %d after the seal: event %d got seq %d, want %d", k, i, ev.Seq, want)
			}
		}
	}
	want := s.LastSeq()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openSQLite(t, path)
	defer s.Close()
	if got := s.LastSeq(); got != want {
		t.Fatalf("reopened LastSeq = %d, want %d", got, want)
	}
	evs := batch(5000)
	bustest.AppendOrFail(t, s, evs, true)
	if evs[0].Seq != want+1 || evs[len(evs)-1].Seq != want+uint64(len(evs)) {
		t.Fatalf("after reopening, seqs %d..%d, want %d..%d", evs[0].Seq, evs[len(evs)-1].Seq, want+1, want+uint64(len(evs)))
	}
}

// A replay reads packed events by their packs and the others by their own
// rows, the envelopes alone where the seqs are dense; a range with a hole
// (which no append leaves: here a pack, or a row, deleted by hand) is read
// again with its seqs, so every event keeps its own.
func TestScanRangeWithHole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	s := openSQLite(t, path)
	defer s.Close()
	const n = 3*scanChunk + 10
	evs := make([]*abi.Event, n)
	for i := range evs {
		evs[i] = &abi.Event{ID: fmt.Sprintf("ev-%d", i+1), Type: "kairo.hole.test", Time: time.Unix(0, int64(i+1))}
	}
	// Events appended a few at a time, each in its own row, around a
	// packed append whose packs do not start at a chunk's start.
	const head, own = packMin - 1, 2 * packMin
	appendSmall := func(evs []*abi.Event) {
		for i := 0; i < len(evs); i += packMin - 1 {
			k := min(packMin-1, len(evs)-i)
			if err := s.Append(evs[i:i+k], nil, make([]bool, k)); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendSmall(evs[:head])
	if err := s.Append(evs[head:n-own], nil, make([]bool, n-own-head)); err != nil {
		t.Fatal(err)
	}
	appendSmall(evs[n-own:])
	check := func(skip ...uint64) {
		t.Helper()
		want := uint64(1)
		err := s.Scan(context.Background(), bus.Query{}, func(ev *abi.Event) error {
			for slices.Contains(skip, want) {
				want++
			}
			if ev.Seq != want || ev.ID != fmt.Sprintf("ev-%d", want) {
				return fmt.Errorf("event %s at seq %d, want ev-%d at seq %d", ev.ID, ev.Seq, want, want)
			}
			want++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if want != n+1 {
			t.Fatalf("replay ended before seq %d, want all %d", want, n)
		}
	}
	check()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var packs, packed int
	db.QueryRow(`SELECT count(*), sum(last_seq - first_seq + 1) FROM packs`).Scan(&packs, &packed)
	if want := n - own - head; packed != want || packs != (want+packEvents-1)/packEvents {
		t.Fatalf("%d events in %d packs, want %d in %d", packed, packs, want, (want+packEvents-1)/packEvents)
	}
	// A pack across a chunk's start, and its events' rows.
	var first, last uint64
	if err := db.QueryRow(`SELECT first_seq, last_seq FROM packs WHERE first_seq < ? AND last_seq >= ?`, scanChunk+1, scanChunk+1).Scan(&first, &last); err != nil {
		t.Fatal(err)
	}
	hole := uint64(n - own/2)
	for _, q := range []string{
		`DELETE FROM packs WHERE first_seq = ?1`,
		`DELETE FROM events WHERE seq >= ?1 AND seq <= ?2`,
		`DELETE FROM events WHERE seq = ?3`,
	} {
		if _, err := db.Exec(q, first, last, hole); err != nil {
			t.Fatal(err)
		}
	}
	var skip []uint64
	for seq := first; seq <= last; seq++ {
		skip = append(skip, seq)
	}
	check(append(skip, hole)...)
	// A packed event's row without its pack is damage, not a hole.
	if _, err := db.Exec(`DELETE FROM packs WHERE first_seq = ?`, head+1); err != nil {
		t.Fatal(err)
	}
	err = s.Scan(context.Background(), bus.Query{}, func(*abi.Event) error { return nil })
	var bad *envError
	if !errors.As(err, &bad) || bad.seq != head+1 {
		t.Fatalf("a replay of events whose pack is gone: %v; want an envError for event %d", err, head+1)
	}
}
