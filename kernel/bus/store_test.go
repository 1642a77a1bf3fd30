package bus

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
	"github.com/vmihailenco/msgpack/v5"
)

// appendOrFail appends evs to s directly, as the bus does, and returns the
// dup flags.
func appendOrFail(t testing.TB, s Store, evs []*abi.Event, withEnvs bool) []bool {
	t.Helper()
	var envs [][]byte
	if enc, ok := s.(EnvEncoder); ok && withEnvs {
		for _, ev := range evs {
			env, err := enc.EncodeEnv(ev)
			if err != nil {
				t.Fatalf("EncodeEnv: %v", err)
			}
			envs = append(envs, env)
		}
	}
	dup := make([]bool, len(evs))
	if err := s.Append(evs, envs, dup); err != nil {
		t.Fatalf("Append of %d events: %v", len(evs), err)
	}
	return dup
}

func scanAll(t testing.TB, s Store, q Query) []abi.Event {
	t.Helper()
	var out []abi.Event
	if err := s.Scan(context.Background(), q, func(ev *abi.Event) error {
		out = append(out, *ev)
		return nil
	}); err != nil {
		t.Fatalf("Scan(%+v): %v", q, err)
	}
	return out
}

func storeEvent(t testing.TB, id string, n int) *abi.Event {
	return &abi.Event{ID: id, Type: "kairo.store.e", Source: "test", Time: time.Unix(1_700_000_000, int64(n)), Data: payload(t, n)}
}

// A batch long enough for several multi-row inserts, with duplicates of
// stored events, of earlier rows in the batch, and of rows in the same
// insert: every duplicate gets its original's seq, and seqs stay dense.
func TestStoreAppendDuplicates(t *testing.T) {
	for _, withEnvs := range []bool{false, true} {
		t.Run(fmt.Sprintf("envs=%v", withEnvs), func(t *testing.T) {
			forEachStore(t, func(t *testing.T, open func(testing.TB) Store) {
				s := open(t)
				defer s.Close()
				id := func(n int) string {
					if n%2 == 0 {
						return formatUUID([]byte{15: byte(n), 14: byte(n >> 8), 6: 0x70, 8: 0x80})
					}
					return fmt.Sprintf("text-%d", n)
				}
				var pre []*abi.Event
				for n := range 5 {
					pre = append(pre, storeEvent(t, id(1000+n), 1000+n))
				}
				appendOrFail(t, s, pre, withEnvs)

				const size = 100
				dupOf := map[int]int{ // position in the batch -> position it repeats
					40: 3,  // an earlier insert of this batch
					50: 45, // the same 32-row insert
					63: 33, // the last row of an insert
					64: 62, // the first row of the next
					70: -3, // stored before (pre[2])
					99: 97, // the rows after the last full insert
					98: -1, // stored before (pre[0])
				}
				evs := make([]*abi.Event, size)
				for i := range evs {
					evs[i] = storeEvent(t, id(i), i)
				}
				for i, j := range dupOf {
					if j < 0 {
						evs[i].ID = pre[-j-1].ID
					} else {
						evs[i].ID = evs[j].ID
					}
				}
				dup := appendOrFail(t, s, evs, withEnvs)

				next := uint64(len(pre) + 1)
				for i, ev := range evs {
					j, isDup := dupOf[i]
					if dup[i] != isDup {
						t.Errorf("row %d: dup = %v, want %v", i, dup[i], isDup)
					}
					var want uint64
					switch {
					case !isDup:
						want = next
						next++
					case j < 0:
						want = pre[-j-1].Seq
					default:
						want = evs[j].Seq
					}
					if ev.Seq != want {
						t.Errorf("row %d: seq %d, want %d", i, ev.Seq, want)
					}
				}
				last := next - 1
				if got := s.LastSeq(); got != last {
					t.Fatalf("LastSeq = %d, want %d", got, last)
				}
				stored := scanAll(t, s, Query{})
				checkDense(t, stored, 1)
				if uint64(len(stored)) != last {
					t.Fatalf("scan returned %d events, want %d", len(stored), last)
				}
				for _, ev := range stored[len(pre):] {
					n := payloadInt(t, &ev)
					if _, isDup := dupOf[n]; isDup || ev.ID != id(n) || !ev.Time.Equal(time.Unix(1_700_000_000, int64(n))) || ev.Source != "test" {
						t.Errorf("stored seq %d = %+v, not row %d as appended", ev.Seq, ev, n)
					}
				}

				// A batch of nothing but duplicates stores nothing.
				again := make([]*abi.Event, 0, 2*rowsPerInsert)
				for i := range 2 * rowsPerInsert {
					again = append(again, storeEvent(t, evs[i].ID, -i))
				}
				for i, d := range appendOrFail(t, s, again, withEnvs) {
					if !d || again[i].Seq != evs[i].Seq {
						t.Errorf("re-append of row %d: dup %v seq %d, want dup of %d", i, d, again[i].Seq, evs[i].Seq)
					}
				}
				if got := s.LastSeq(); got != last {
					t.Errorf("LastSeq = %d after appending only duplicates, want %d", got, last)
				}
			})
		})
	}
}

func TestReplay(t *testing.T) {
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	subjects := []string{"kairo.a.x", "kairo.a.y", "kairo.b.x"}
	const n = 30
	forEachStore(t, func(t *testing.T, open func(testing.TB) Store) {
		b := newBus(t, open, Options{})
		for i := range n {
			mustPublish(t, b, &abi.Event{Type: subjects[i%3], Time: base.Add(time.Duration(i) * time.Second), Data: payload(t, i)})
		}
		// Event i is at seq i+1, time base+i s, subject subjects[i%3].
		seqs := func(keep func(i int) bool, limit int) []uint64 {
			var out []uint64
			for i := range n {
				if keep(i) && (limit == 0 || len(out) < limit) {
					out = append(out, uint64(i+1))
				}
			}
			return out
		}
		all := func(int) bool { return true }
		tests := []struct {
			name string
			q    Query
			want []uint64
		}{
			{"all", Query{}, seqs(all, 0)},
			{"seq range", Query{FromSeq: 5, ToSeq: 9}, seqs(func(i int) bool { return i+1 >= 5 && i+1 <= 9 }, 0)},
			{"from seq", Query{FromSeq: 25}, seqs(func(i int) bool { return i+1 >= 25 }, 0)},
			{"to seq", Query{ToSeq: 3}, seqs(func(i int) bool { return i+1 <= 3 }, 0)},
			{"one seq", Query{FromSeq: 7, ToSeq: 7}, []uint64{7}},
			{"past the end", Query{FromSeq: n + 1}, nil},
			{"empty range", Query{FromSeq: 9, ToSeq: 5}, nil},
			{"time range, inclusive", Query{Since: base.Add(10 * time.Second), Until: base.Add(14 * time.Second)}, seqs(func(i int) bool { return i >= 10 && i <= 14 }, 0)},
			{"since", Query{Since: base.Add(27*time.Second + 1)}, seqs(func(i int) bool { return i >= 28 }, 0)},
			{"until", Query{Until: base.Add(2*time.Second - 1)}, seqs(func(i int) bool { return i <= 1 }, 0)},
			{"since in another zone", Query{Since: base.Add(28 * time.Second).In(time.FixedZone("x", 3600))}, seqs(func(i int) bool { return i >= 28 }, 0)},
			{"pattern", Query{Pattern: MustCompilePattern("kairo.a.*")}, seqs(func(i int) bool { return i%3 != 2 }, 0)},
			{"pattern x", Query{Pattern: MustCompilePattern("*.*.x")}, seqs(func(i int) bool { return i%3 != 1 }, 0)},
			{"limit", Query{Limit: 4}, seqs(all, 4)},
			{"limit over count", Query{Limit: 100}, seqs(all, 0)},
			{"pattern and limit", Query{Pattern: MustCompilePattern("kairo.b.>"), Limit: 3}, []uint64{3, 6, 9}},
			{"everything", Query{FromSeq: 4, ToSeq: 25, Since: base.Add(5 * time.Second), Until: base.Add(20 * time.Second), Pattern: MustCompilePattern("kairo.a.>"), Limit: 5},
				seqs(func(i int) bool { return i+1 >= 4 && i+1 <= 25 && i >= 5 && i <= 20 && i%3 != 2 }, 5)},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				var got []uint64
				for _, ev := range replayAll(t, b, tc.q) {
					got = append(got, ev.Seq)
					if i := payloadInt(t, &ev); ev.Type != subjects[i%3] || !ev.Time.Equal(base.Add(time.Duration(i)*time.Second)) || uint64(i+1) != ev.Seq {
						t.Errorf("seq %d: %+v is not event %d", ev.Seq, ev, i)
					}
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("Replay(%+v) = seqs %v, want %v", tc.q, got, tc.want)
				}
			})
		}

		t.Run("ErrStop", func(t *testing.T) {
			var got []uint64
			err := b.Replay(testCtx(t), Query{}, func(ev *abi.Event) error {
				got = append(got, ev.Seq)
				if len(got) == 3 {
					return ErrStop
				}
				return nil
			})
			if err != nil || !slices.Equal(got, []uint64{1, 2, 3}) {
				t.Errorf("Replay stopped with ErrStop = %v, seqs %v; want nil, [1 2 3]", err, got)
			}
		})
		t.Run("callback error", func(t *testing.T) {
			boom := errors.New("boom")
			calls := 0
			err := b.Replay(testCtx(t), Query{}, func(*abi.Event) error { calls++; return boom })
			if !errors.Is(err, boom) || calls != 1 {
				t.Errorf("Replay = %v after %d calls, want boom after 1", err, calls)
			}
		})
		t.Run("canceled context", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			calls := 0
			err := b.Replay(ctx, Query{}, func(*abi.Event) error { calls++; return nil })
			if !errors.Is(err, context.Canceled) || calls != 0 {
				t.Errorf("Replay with a canceled context = %v after %d calls, want context.Canceled, no calls", err, calls)
			}
		})
	})
}

func TestMemoryStoreEviction(t *testing.T) {
	b := New(NewMemoryStore(8), Options{})
	defer b.Close()
	publishN(t, b, "kairo.ring", 20)
	if got := b.LastSeq(); got != 20 {
		t.Fatalf("LastSeq = %d, want 20", got)
	}

	sub, err := b.Subscribe(context.Background(), ">", SubscribeOptions{FromSeq: 1}, newCollector().handle)
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, "subscription over evicted events", sub.Done())
	var gap *GapError
	if err := sub.Err(); !errors.As(err, &gap) || gap.From != 1 || gap.To != 12 {
		t.Fatalf("sub.Err() = %v, want a *GapError for 1..12", err)
	}

	err = b.Replay(testCtx(t), Query{FromSeq: 1}, func(*abi.Event) error { return nil })
	if !errors.As(err, &gap) || gap.From != 1 || gap.To != 12 {
		t.Errorf("Replay from 1 = %v, want a *GapError for 1..12", err)
	}
	checkDense(t, replayAll(t, b, Query{FromSeq: 13}), 13)
	if got := replayAll(t, b, Query{FromSeq: 13}); len(got) != 8 {
		t.Errorf("replay of what the ring holds returned %d events, want 8", len(got))
	}

	// From the oldest event held: the ring's 8, then live ones.
	c := newCollector()
	subscribe(t, b, ">", SubscribeOptions{FromSeq: 13}, c.handle)
	c.wait(t, 8)
	publishN(t, b, "kairo.ring", 2)
	got := c.wait(t, 10)
	if len(got) != 10 {
		t.Fatalf("subscription from 13 got %d events, want 10", len(got))
	}
	checkDense(t, got, 13)
}

// A replay long enough for the SQLite store's chunked, two-worker scan:
// events come in order across chunk boundaries, stay intact after the
// callback returns, and every way of ending the scan early works.
func TestStoreLongScan(t *testing.T) {
	const n = 5*scanChunk + 123
	forEachStore(t, func(t *testing.T, open func(testing.TB) Store) {
		s := open(t)
		defer s.Close()
		subjects := []string{"kairo.long.a", "kairo.long.b", "kairo.long.c"}
		for lo := 0; lo < n; lo += 2000 {
			var evs []*abi.Event
			for i := lo; i < min(lo+2000, n); i++ {
				evs = append(evs, &abi.Event{ID: NewID(), Type: subjects[i%3], Time: time.Unix(0, int64(i)), Data: payload(t, i)})
			}
			appendOrFail(t, s, evs, true)
		}
		check := func(t *testing.T, evs []abi.Event, wantSeqs []uint64) {
			t.Helper()
			if len(evs) != len(wantSeqs) {
				t.Fatalf("got %d events, want %d", len(evs), len(wantSeqs))
			}
			for k, ev := range evs {
				i := payloadInt(t, &ev)
				if ev.Seq != wantSeqs[k] || uint64(i+1) != ev.Seq || ev.Type != subjects[i%3] || ev.Time.UnixNano() != int64(i) {
					t.Fatalf("event %d: seq %d type %s time %d data %d, want seq %d", k, ev.Seq, ev.Type, ev.Time.UnixNano(), i, wantSeqs[k])
				}
			}
		}
		seqRange := func(from, to uint64, keep func(seq uint64) bool) []uint64 {
			var out []uint64
			for q := from; q <= to; q++ {
				if keep == nil || keep(q) {
					out = append(out, q)
				}
			}
			return out
		}
		t.Run("all", func(t *testing.T) {
			check(t, scanAll(t, s, Query{}), seqRange(1, n, nil))
		})
		t.Run("unaligned range with pattern", func(t *testing.T) {
			q := Query{FromSeq: scanChunk - 7, ToSeq: 4*scanChunk + 11, Pattern: MustCompilePattern("kairo.long.b")}
			check(t, scanAll(t, s, q), seqRange(q.FromSeq, q.ToSeq, func(seq uint64) bool { return (seq-1)%3 == 1 }))
		})
		t.Run("time range", func(t *testing.T) {
			q := Query{Since: time.Unix(0, 2*scanChunk), Until: time.Unix(0, 3*scanChunk+5)}
			check(t, scanAll(t, s, q), seqRange(2*scanChunk+1, 3*scanChunk+6, nil))
		})
		t.Run("limit", func(t *testing.T) {
			check(t, scanAll(t, s, Query{FromSeq: 10, Limit: 3 * scanChunk}), seqRange(10, 3*scanChunk+9, nil))
		})
		t.Run("ErrStop", func(t *testing.T) {
			calls := 0
			err := s.Scan(context.Background(), Query{}, func(*abi.Event) error {
				if calls++; calls == 2*scanChunk+3 {
					return ErrStop
				}
				return nil
			})
			if err != nil || calls != 2*scanChunk+3 {
				t.Errorf("Scan ended by ErrStop = %v after %d calls, want nil after %d", err, calls, 2*scanChunk+3)
			}
		})
		t.Run("callback error", func(t *testing.T) {
			boom := errors.New("boom")
			calls := 0
			err := s.Scan(context.Background(), Query{}, func(*abi.Event) error {
				if calls++; calls == 3*scanChunk {
					return boom
				}
				return nil
			})
			if !errors.Is(err, boom) || calls != 3*scanChunk {
				t.Errorf("Scan = %v after %d calls, want boom after %d", err, calls, 3*scanChunk)
			}
		})
		t.Run("context canceled midway", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			calls := 0
			err := s.Scan(ctx, Query{}, func(*abi.Event) error {
				if calls++; calls == scanChunk+1 {
					cancel()
				}
				return nil
			})
			if !errors.Is(err, context.Canceled) || calls >= n {
				t.Errorf("Scan with its context canceled = %v after %d calls, want context.Canceled before the end", err, calls)
			}
		})
	})
}

// Everything published is in the file after Close, without its -wal; the
// file passes SQLite's integrity check; a reopened store continues the
// sequence and still knows the old IDs.
func TestSQLiteDurability(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	b := New(openSQLite(t, path), Options{})
	var sent []abi.Event
	for i := range 100 {
		ev := &abi.Event{Type: fmt.Sprintf("kairo.durable.%d", i%4), Data: payload(t, i), CorrelationID: "corr", Source: "src"}
		if i%10 == 0 {
			ev.ID = fmt.Sprintf("text-id-%d", i)
		}
		a, err := b.PublishAsync(ev)
		if err != nil {
			t.Fatal(err)
		}
		waitAcks(t, []*Ack{a})
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
	b = New(s, Options{})
	defer b.Close()
	stored := replayAll(t, b, Query{})
	checkDense(t, stored, 1)
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
		if res := mustPublish(t, b, &abi.Event{ID: id, Type: "kairo.durable.again"}); !res.Duplicate || res.Seq != sent[[]int{7, 30}[i]].Seq {
			t.Errorf("republishing %q after reopening = %+v, want a duplicate", id, res)
		}
	}
	for i := range 10 {
		if res := mustPublish(t, b, &abi.Event{Type: "kairo.durable.new"}); res.Seq != uint64(101+i) || res.Duplicate {
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
		evs = append(evs, storeEvent(t, id, i))
	}
	if dup := appendOrFail(t, s, evs, false); slices.Contains(dup, true) {
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
		opts       SQLiteOptions
		want       []string
	}{
		{"bad synchronous", filepath.Join(dir, "a.db"), SQLiteOptions{Synchronous: "sometimes"}, []string{"synchronous", `"sometimes"`, "normal", "full"}},
		{"not a database", notDB, SQLiteOptions{}, []string{notDB}},
		{"missing directory", filepath.Join(dir, "no", "such", "dir", "events.db"), SQLiteOptions{}, []string{"events.db"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := OpenSQLite(tc.path, tc.opts)
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
		s, err := OpenSQLite(filepath.Join(t.TempDir(), "events.db"), SQLiteOptions{Synchronous: mode})
		if err != nil {
			t.Errorf("Synchronous %q: %v", mode, err)
			continue
		}
		appendOrFail(t, s, []*abi.Event{storeEvent(t, "x", 1)}, false)
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

// The stored form is the envelope without its seq, which the row holds.
func TestSQLiteEncodeEnv(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "events.db"))
	defer s.Close()
	ev := storeEvent(t, "id-1", 7)
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
	if back.Seq != 0 || back.ID != "id-1" || payloadInt(t, &back) != 7 {
		t.Errorf("stored form decodes to %+v, want the event without seq", back)
	}
}

func TestGapError(t *testing.T) {
	err := error(&GapError{From: 1, To: 12})
	for _, w := range []string{"events 1..12", "evicted", "SQLite"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("GapError %q does not mention %q", err, w)
		}
	}
	if got := (&GapError{From: 0, To: 18446744073709551615}).Error(); !strings.Contains(got, "0..18446744073709551615") {
		t.Errorf("GapError = %q", got)
	}

	// A ring read past its oldest event, through Scan directly.
	m := NewMemoryStore(4)
	var evs []*abi.Event
	for i := range 10 {
		evs = append(evs, storeEvent(t, fmt.Sprint(i), i))
	}
	appendOrFail(t, m, evs, false)
	var gap *GapError
	err = m.Scan(context.Background(), Query{FromSeq: 2, ToSeq: 9}, func(*abi.Event) error { return nil })
	if !errors.As(err, &gap) || gap.From != 2 || gap.To != 6 {
		t.Errorf("Scan from 2 of a ring holding 7..10 = %v, want a gap 2..6", err)
	}
	checkDense(t, scanAll(t, m, Query{FromSeq: 7}), 7)
	// An evicted ID is no longer known: it is stored again.
	if dup := appendOrFail(t, m, []*abi.Event{storeEvent(t, "0", 0)}, false); dup[0] {
		t.Error("an evicted id was reported as a duplicate")
	}
}
