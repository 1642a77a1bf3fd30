package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
)

// schema1Event is event i of testdata/schema1-events.db, which the store
// of schema 1 (every envelope in its event's row) wrote: 248 events in
// appends of 3, 200, 5 and 40 (the last with event 10 again, a duplicate);
// even events have a UUID for id (a 16-byte key), odd ones text.
func schema1Event(t *testing.T, i int) *abi.Event {
	id := fmt.Sprintf("old-%d", i)
	if i%2 == 0 {
		id = fmt.Sprintf("0190a000-0000-7000-8000-%012x", i)
	}
	base := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	return &abi.Event{ID: id, Type: "kairo.schema1.e", Source: "schema1", Time: base.Add(time.Duration(i) * time.Second), Data: bustest.Payload(t, i)}
}

// storeFormat is the schema the store's meta says and how many rows of
// packs it has.
func storeFormat(t *testing.T, path string) (schema, packs int) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(`SELECT value FROM meta WHERE key = 'schema'`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	db.QueryRow(`SELECT count(*) FROM packs`).Scan(&packs)
	return schema, packs
}

// A store of schema 1 opens as schema 2 (the packs table made, in one
// transaction, and nothing rewritten), replays its old events from their
// rows, by sequence and by time, finds their ids as duplicates, and packs
// the new events; a check finds it sound and a salvage copies it whole.
func TestSQLiteSchema1Store(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	copyFileTo(t, filepath.Join("testdata", "schema1-events.db"), path)
	const old = 248
	check := func(s bus.Store, n int) {
		t.Helper()
		evs := bustest.ScanAll(t, s, bus.Query{})
		if len(evs) != n {
			t.Fatalf("replayed %d events, want %d", len(evs), n)
		}
		for i, ev := range evs {
			want := schema1Event(t, i+1)
			if ev.Seq != uint64(i+1) || ev.ID != want.ID || ev.Source != want.Source || !ev.Time.Equal(want.Time) || bustest.PayloadInt(t, &ev) != i+1 {
				t.Fatalf("event %d: %+v, want %+v", i+1, ev, want)
			}
		}
		base := schema1Event(t, 0).Time
		if got := timeSeqs(t, s, bus.Query{Since: base.Add(200 * time.Second), Until: base.Add(260 * time.Second)}); !slices.Equal(got, seqRange(200, min(260, uint64(n)))) {
			t.Fatalf("replay by time: seqs %v, want 200..%d", got, min(260, n))
		}
	}
	s := openSQLite(t, path)
	if schema, packs := storeFormat(t, path); schema != 2 || packs != 0 {
		t.Fatalf("a store of schema 1, opened: schema %d with %d packs, want 2 with none", schema, packs)
	}
	check(s, old)
	// An old id is a duplicate; new events are packed.
	evs := []*abi.Event{schema1Event(t, 10)}
	for i := old + 1; i <= old+3*packMin; i++ {
		evs = append(evs, schema1Event(t, i))
	}
	dup := bustest.AppendOrFail(t, s, evs, true)
	if !dup[0] || evs[0].Seq != 10 || evs[1].Seq != old+1 {
		t.Fatalf("the old id: dup %v at seq %d; the first new event at %d, want %d", dup[0], evs[0].Seq, evs[1].Seq, old+1)
	}
	const n = old + 3*packMin
	check(s, n)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if schema, packs := storeFormat(t, path); schema != 2 || packs != 1 {
		t.Fatalf("after %d new events: schema %d with %d packs, want 2 with 1", 3*packMin, schema, packs)
	}
	s = openSQLite(t, path)
	check(s, n)
	s.Close()
	rep, err := Check(context.Background(), path, nil)
	if err != nil || !rep.Sound() || rep.Events != n {
		t.Fatalf("check: %v\n%s", err, rep.Summary())
	}
	// A salvage reads both forms and writes packs.
	dst := filepath.Join(dir, "salvaged.db")
	if rep, err = Salvage(context.Background(), path, dst, nil); err != nil || rep.Events != n {
		t.Fatalf("salvage: %v\n%s", err, rep.Summary())
	}
	if _, packs := storeFormat(t, dst); packs != (n+packEvents-1)/packEvents {
		t.Fatalf("the salvaged store has %d packs, want %d", packs, (n+packEvents-1)/packEvents)
	}
	s = openSQLite(t, dst)
	defer s.Close()
	check(s, n)
}

// Packs are bounded: an append of many events is cut at packEvents events
// and at packBytes, and an event larger than packBytes has a pack of its
// own; each replays in place.
func TestSQLitePackBounds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	s := openSQLite(t, path)
	defer s.Close()
	sizes := []int{10, packBytes + 100, 10}
	for range 3 * packEvents {
		sizes = append(sizes, 10)
	}
	for range 3 * packBytes / 1000 {
		sizes = append(sizes, 1000)
	}
	var evs []*abi.Event
	for i, n := range sizes {
		evs = append(evs, &abi.Event{ID: abi.NewID(), Type: "kairo.pack.e", Time: time.Unix(int64(i), 0), Data: bustest.Payload(t, make([]byte, n))})
	}
	bustest.AppendOrFail(t, s, evs, true)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT first_seq, last_seq, length(envs) FROM packs ORDER BY first_seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	next := int64(1)
	for rows.Next() {
		var first, last, size int64
		rows.Scan(&first, &last, &size)
		if first != next || last-first+1 > packEvents || size > packBytes && first != last {
			t.Fatalf("pack %d..%d of %d bytes after seq %d: want dense, at most %d events and %d bytes or one event", first, last, size, next-1, packEvents, packBytes)
		}
		next = last + 1
	}
	if next != int64(len(evs))+1 {
		t.Fatalf("packs end at %d, want %d", next-1, len(evs))
	}
	got := bustest.ScanAll(t, s, bus.Query{})
	for i, ev := range got {
		if ev.ID != evs[i].ID || ev.Seq != uint64(i+1) || len(ev.Data) != len(evs[i].Data) {
			t.Fatalf("event %d: %s seq %d of %d bytes, want %s of %d", i+1, ev.ID, ev.Seq, len(ev.Data), evs[i].ID, len(evs[i].Data))
		}
	}
	// A range that starts inside a pack.
	if got := timeSeqs(t, s, bus.Query{FromSeq: 5, ToSeq: 7}); !slices.Equal(got, seqRange(5, 7)) {
		t.Fatalf("seqs 5..7 replayed as %v", got)
	}
}
