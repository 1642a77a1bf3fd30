package bus_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
	"github.com/kairo-os/kairo/kernel/bus/internal/hook"

	"github.com/kairo-os/kairo/abi"
)

// A batch long enough for several multi-row inserts, with duplicates of
// stored events, of earlier rows in the batch, and of rows in the same
// insert: every duplicate gets its original's seq, and seqs stay dense.
func TestStoreAppendDuplicates(t *testing.T) {
	for _, withEnvs := range []bool{false, true} {
		t.Run(fmt.Sprintf("envs=%v", withEnvs), func(t *testing.T) {
			forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
				s := open(t)
				defer s.Close()
				id := func(n int) string {
					if n%2 == 0 {
						return bus.FormatUUID([]byte{15: byte(n), 14: byte(n >> 8), 6: 0x70, 8: 0x80})
					}
					return fmt.Sprintf("text-%d", n)
				}
				var pre []*abi.Event
				for n := range 5 {
					pre = append(pre, bustest.StoreEvent(t, id(1000+n), 1000+n))
				}
				bustest.AppendOrFail(t, s, pre, withEnvs)

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
					evs[i] = bustest.StoreEvent(t, id(i), i)
				}
				for i, j := range dupOf {
					if j < 0 {
						evs[i].ID = pre[-j-1].ID
					} else {
						evs[i].ID = evs[j].ID
					}
				}
				dup := bustest.AppendOrFail(t, s, evs, withEnvs)

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
				stored := bustest.ScanAll(t, s, bus.Query{})
				bustest.CheckDense(t, stored, 1)
				if uint64(len(stored)) != last {
					t.Fatalf("scan returned %d events, want %d", len(stored), last)
				}
				for _, ev := range stored[len(pre):] {
					n := bustest.PayloadInt(t, &ev)
					if _, isDup := dupOf[n]; isDup || ev.ID != id(n) || !ev.Time.Equal(time.Unix(1_700_000_000, int64(n))) || ev.Source != "test" {
						t.Errorf("stored seq %d = %+v, not row %d as appended", ev.Seq, ev, n)
					}
				}

				// A batch of nothing but duplicates stores nothing.
				again := make([]*abi.Event, 0, 2*hook.SQLiteRowsPerInsert)
				for i := range 2 * hook.SQLiteRowsPerInsert {
					again = append(again, bustest.StoreEvent(t, evs[i].ID, -i))
				}
				for i, d := range bustest.AppendOrFail(t, s, again, withEnvs) {
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

// Appends of every size around the smallest packed one, with and without
// a duplicate (of a stored event, and of an earlier row in the same
// append) in each place: the SQLite store inserts appends of 2 to 7 rows
// in one statement and redoes them row by row when one is a duplicate.
// Every duplicate gets its original's seq, and seqs stay dense.
func TestStoreAppendSmallDuplicates(t *testing.T) {
	for _, withEnvs := range []bool{false, true} {
		t.Run(fmt.Sprintf("envs=%v", withEnvs), func(t *testing.T) {
			forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
				s := open(t)
				defer s.Close()
				var ids []string // the stored events' ids, by seq
				seqOf := map[string]uint64{}
				n := 0
				for size := 1; size <= 9; size++ {
					// -1: no duplicate; else the position of one.
					for at := -1; at < size; at++ {
						for _, ofStored := range []bool{true, false} {
							if at == 0 && !ofStored || at < 0 && !ofStored {
								continue // no earlier row to repeat
							}
							evs := make([]*abi.Event, size)
							for i := range evs {
								n++
								evs[i] = bustest.StoreEvent(t, fmt.Sprintf("small-%d", n), n)
							}
							switch {
							case at >= 0 && ofStored:
								evs[at].ID = ids[len(ids)/2]
							case at > 0:
								evs[at].ID = evs[0].ID
							}
							what := fmt.Sprintf("append of %d, duplicate at %d (of a stored event: %v)", size, at, ofStored)
							dup := bustest.AppendOrFail(t, s, evs, withEnvs)
							for i, ev := range evs {
								seq, isDup := seqOf[ev.ID]
								if !isDup {
									seq = uint64(len(ids) + 1)
									ids = append(ids, ev.ID)
									seqOf[ev.ID] = seq
								}
								if dup[i] != isDup || ev.Seq != seq {
									t.Fatalf("%s: row %d dup %v seq %d, want dup %v seq %d", what, i, dup[i], ev.Seq, isDup, seq)
								}
							}
							if got := s.LastSeq(); got != uint64(len(ids)) {
								t.Fatalf("%s: LastSeq %d, want %d", what, got, len(ids))
							}
						}
					}
				}
				stored := bustest.ScanAll(t, s, bus.Query{})
				bustest.CheckDense(t, stored, 1)
				if len(stored) != len(ids) {
					t.Fatalf("scan returned %d events, want %d", len(stored), len(ids))
				}
				for i, ev := range stored {
					if ev.ID != ids[i] || fmt.Sprintf("small-%d", bustest.PayloadInt(t, &ev)) != ev.ID {
						t.Fatalf("stored seq %d = %s with data %d, want %s with its own data", ev.Seq, ev.ID, bustest.PayloadInt(t, &ev), ids[i])
					}
				}
			})
		})
	}
}

func TestReplay(t *testing.T) {
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	subjects := []string{"kairo.a.x", "kairo.a.y", "kairo.b.x"}
	const n = 30
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		b := bustest.NewBus(t, open, bus.Config{})
		for i := range n {
			bustest.MustPublish(t, b, &abi.Event{Type: subjects[i%3], Time: base.Add(time.Duration(i) * time.Second), Data: bustest.Payload(t, i)})
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
			q    bus.Query
			want []uint64
		}{
			{"all", bus.Query{}, seqs(all, 0)},
			{"seq range", bus.Query{FromSeq: 5, ToSeq: 9}, seqs(func(i int) bool { return i+1 >= 5 && i+1 <= 9 }, 0)},
			{"from seq", bus.Query{FromSeq: 25}, seqs(func(i int) bool { return i+1 >= 25 }, 0)},
			{"to seq", bus.Query{ToSeq: 3}, seqs(func(i int) bool { return i+1 <= 3 }, 0)},
			{"one seq", bus.Query{FromSeq: 7, ToSeq: 7}, []uint64{7}},
			{"past the end", bus.Query{FromSeq: n + 1}, nil},
			{"empty range", bus.Query{FromSeq: 9, ToSeq: 5}, nil},
			{"time range, inclusive", bus.Query{Since: base.Add(10 * time.Second), Until: base.Add(14 * time.Second)}, seqs(func(i int) bool { return i >= 10 && i <= 14 }, 0)},
			{"since", bus.Query{Since: base.Add(27*time.Second + 1)}, seqs(func(i int) bool { return i >= 28 }, 0)},
			{"until", bus.Query{Until: base.Add(2*time.Second - 1)}, seqs(func(i int) bool { return i <= 1 }, 0)},
			{"since in another zone", bus.Query{Since: base.Add(28 * time.Second).In(time.FixedZone("x", 3600))}, seqs(func(i int) bool { return i >= 28 }, 0)},
			{"pattern", bus.Query{Pattern: abi.MustCompilePattern("kairo.a.*")}, seqs(func(i int) bool { return i%3 != 2 }, 0)},
			{"pattern x", bus.Query{Pattern: abi.MustCompilePattern("*.*.x")}, seqs(func(i int) bool { return i%3 != 1 }, 0)},
			{"limit", bus.Query{Limit: 4}, seqs(all, 4)},
			{"limit over count", bus.Query{Limit: 100}, seqs(all, 0)},
			{"pattern and limit", bus.Query{Pattern: abi.MustCompilePattern("kairo.b.>"), Limit: 3}, []uint64{3, 6, 9}},
			{"everything", bus.Query{FromSeq: 4, ToSeq: 25, Since: base.Add(5 * time.Second), Until: base.Add(20 * time.Second), Pattern: abi.MustCompilePattern("kairo.a.>"), Limit: 5},
				seqs(func(i int) bool { return i+1 >= 4 && i+1 <= 25 && i >= 5 && i <= 20 && i%3 != 2 }, 5)},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				var got []uint64
				for _, ev := range bustest.ReplayAll(t, b, tc.q) {
					got = append(got, ev.Seq)
					if i := bustest.PayloadInt(t, &ev); ev.Type != subjects[i%3] || !ev.Time.Equal(base.Add(time.Duration(i)*time.Second)) || uint64(i+1) != ev.Seq {
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
			err := b.Replay(bustest.Ctx(t), bus.Query{}, func(ev *abi.Event) error {
				got = append(got, ev.Seq)
				if len(got) == 3 {
					return bus.ErrStop
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
			err := b.Replay(bustest.Ctx(t), bus.Query{}, func(*abi.Event) error { calls++; return boom })
			if !errors.Is(err, boom) || calls != 1 {
				t.Errorf("Replay = %v after %d calls, want boom after 1", err, calls)
			}
		})
		t.Run("canceled context", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			calls := 0
			err := b.Replay(ctx, bus.Query{}, func(*abi.Event) error { calls++; return nil })
			if !errors.Is(err, context.Canceled) || calls != 0 {
				t.Errorf("Replay with a canceled context = %v after %d calls, want context.Canceled, no calls", err, calls)
			}
		})
	})
}

func TestMemoryStoreEviction(t *testing.T) {
	b := bus.New(bus.NewMemoryStore(8), bus.Config{})
	defer b.Close()
	bustest.PublishN(t, b, "kairo.ring", 20)
	if got := b.LastSeq(); got != 20 {
		t.Fatalf("LastSeq = %d, want 20", got)
	}

	sub, err := b.Subscribe(context.Background(), ">", bus.SubscribeConfig{FromSeq: 1}, bustest.NewCollector().Handle)
	if err != nil {
		t.Fatal(err)
	}
	bustest.WaitDone(t, "subscription over evicted events", sub.Done())
	var gap *bus.GapError
	if err := sub.Err(); !errors.As(err, &gap) || gap.From != 1 || gap.To != 12 {
		t.Fatalf("sub.Err() = %v, want a *GapError for 1..12", err)
	}

	err = b.Replay(bustest.Ctx(t), bus.Query{FromSeq: 1}, func(*abi.Event) error { return nil })
	if !errors.As(err, &gap) || gap.From != 1 || gap.To != 12 {
		t.Errorf("Replay from 1 = %v, want a *GapError for 1..12", err)
	}
	bustest.CheckDense(t, bustest.ReplayAll(t, b, bus.Query{FromSeq: 13}), 13)
	if got := bustest.ReplayAll(t, b, bus.Query{FromSeq: 13}); len(got) != 8 {
		t.Errorf("replay of what the ring holds returned %d events, want 8", len(got))
	}

	// From the oldest event held: the ring's 8, then live ones.
	c := bustest.NewCollector()
	bustest.Subscribe(t, b, ">", bus.SubscribeConfig{FromSeq: 13}, c.Handle)
	c.Wait(t, 8)
	bustest.PublishN(t, b, "kairo.ring", 2)
	got := c.Wait(t, 10)
	if len(got) != 10 {
		t.Fatalf("subscription from 13 got %d events, want 10", len(got))
	}
	bustest.CheckDense(t, got, 13)
}

// A replay long enough for the SQLite store's chunked, two-worker scan:
// events come in order across chunk boundaries, stay intact after the
// callback returns, and every way of ending the scan early works.
func TestStoreLongScan(t *testing.T) {
	const n = 5*hook.SQLiteScanChunk + 123
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		s := open(t)
		defer s.Close()
		subjects := []string{"kairo.long.a", "kairo.long.b", "kairo.long.c"}
		for lo := 0; lo < n; lo += 2000 {
			var evs []*abi.Event
			for i := lo; i < min(lo+2000, n); i++ {
				evs = append(evs, &abi.Event{ID: abi.NewID(), Type: subjects[i%3], Time: time.Unix(0, int64(i)), Data: bustest.Payload(t, i)})
			}
			bustest.AppendOrFail(t, s, evs, true)
		}
		check := func(t *testing.T, evs []abi.Event, wantSeqs []uint64) {
			t.Helper()
			if len(evs) != len(wantSeqs) {
				t.Fatalf("got %d events, want %d", len(evs), len(wantSeqs))
			}
			for k, ev := range evs {
				i := bustest.PayloadInt(t, &ev)
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
			check(t, bustest.ScanAll(t, s, bus.Query{}), seqRange(1, n, nil))
		})
		t.Run("unaligned range with pattern", func(t *testing.T) {
			q := bus.Query{FromSeq: hook.SQLiteScanChunk - 7, ToSeq: 4*hook.SQLiteScanChunk + 11, Pattern: abi.MustCompilePattern("kairo.long.b")}
			check(t, bustest.ScanAll(t, s, q), seqRange(q.FromSeq, q.ToSeq, func(seq uint64) bool { return (seq-1)%3 == 1 }))
		})
		t.Run("time range", func(t *testing.T) {
			q := bus.Query{Since: time.Unix(0, 2*hook.SQLiteScanChunk), Until: time.Unix(0, 3*hook.SQLiteScanChunk+5)}
			check(t, bustest.ScanAll(t, s, q), seqRange(2*hook.SQLiteScanChunk+1, 3*hook.SQLiteScanChunk+6, nil))
		})
		t.Run("limit", func(t *testing.T) {
			check(t, bustest.ScanAll(t, s, bus.Query{FromSeq: 10, Limit: 3 * hook.SQLiteScanChunk}), seqRange(10, 3*hook.SQLiteScanChunk+9, nil))
		})
		t.Run("ErrStop", func(t *testing.T) {
			calls := 0
			err := s.Scan(context.Background(), bus.Query{}, func(*abi.Event) error {
				if calls++; calls == 2*hook.SQLiteScanChunk+3 {
					return bus.ErrStop
				}
				return nil
			})
			if err != nil || calls != 2*hook.SQLiteScanChunk+3 {
				t.Errorf("Scan ended by ErrStop = %v after %d calls, want nil after %d", err, calls, 2*hook.SQLiteScanChunk+3)
			}
		})
		t.Run("callback error", func(t *testing.T) {
			boom := errors.New("boom")
			calls := 0
			err := s.Scan(context.Background(), bus.Query{}, func(*abi.Event) error {
				if calls++; calls == 3*hook.SQLiteScanChunk {
					return boom
				}
				return nil
			})
			if !errors.Is(err, boom) || calls != 3*hook.SQLiteScanChunk {
				t.Errorf("Scan = %v after %d calls, want boom after %d", err, calls, 3*hook.SQLiteScanChunk)
			}
		})
		t.Run("context canceled midway", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			calls := 0
			err := s.Scan(ctx, bus.Query{}, func(*abi.Event) error {
				if calls++; calls == hook.SQLiteScanChunk+1 {
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

// A live subscriber that falls behind a ring larger than its buffer is
// reported lagging, counted as a catch-up, and ends with a *GapError naming
// what the ring dropped before it read it, as one that reads a smaller ring
// after an overflow of its buffer does (that one first gets what its buffer
// kept, the 16 events from seq 2); its neighbour, and the publishers, go on.
func TestMemoryStoreSubscriberPastTheRing(t *testing.T) {
	for _, c := range []struct {
		ring int
		from uint64 // the first event the gap names
	}{{64, 2}, {8, 18}} { // the ring above the buffer's bound, and below
		ring := c.ring
		t.Run(fmt.Sprintf("ring=%d", ring), func(t *testing.T) {
			b := bus.New(bus.NewMemoryStore(ring), bus.Config{SubscriberBuffer: 16})
			defer b.Close()
			entered, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			stuck := bustest.Subscribe(t, b, "kairo.>", bus.SubscribeConfig{}, func([]abi.Event) error {
				once.Do(func() {
					close(entered)
					<-release
				})
				return nil
			})
			fast := bustest.NewCollector()
			bustest.Subscribe(t, b, "kairo.>", bus.SubscribeConfig{}, fast.Handle)
			bustest.MustPublish(t, b, &abi.Event{Type: "kairo.ring.first"})
			bustest.WaitDone(t, "first delivery", entered)
			for i := range 199 {
				bustest.MustPublish(t, b, &abi.Event{Type: "kairo.ring.event"})
				fast.Wait(t, i+2) // the neighbour keeps up, the ring never drops its next
			}
			bustest.CheckDense(t, fast.Wait(t, 200), 1)
			bustest.Eventually(t, "the stuck subscriber is lagging", func() bool { return b.Stats().Lagging == 1 })
			close(release)
			bustest.WaitDone(t, "the stuck subscription", stuck.Done())
			var gap *bus.GapError
			if err := stuck.Err(); !errors.As(err, &gap) || gap.From != c.from || gap.To != uint64(200-ring) {
				t.Fatalf("Err() = %v, want a *GapError for %d..%d", err, c.from, 200-ring)
			}
			if st := b.Stats(); st.CatchUps == 0 || st.Published != 200 {
				t.Errorf("Stats = %+v, want a catch-up counted and 200 published", st)
			}
		})
	}
}

func TestGapError(t *testing.T) {
	err := error(&bus.GapError{From: 1, To: 12})
	for _, w := range []string{"events 1..12", "evicted", "SQLite"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("GapError %q does not mention %q", err, w)
		}
	}
	if got := (&bus.GapError{From: 0, To: 18446744073709551615}).Error(); !strings.Contains(got, "0..18446744073709551615") {
		t.Errorf("GapError = %q", got)
	}

	// A ring read past its oldest event, through Scan directly.
	m := bus.NewMemoryStore(4)
	var evs []*abi.Event
	for i := range 10 {
		evs = append(evs, bustest.StoreEvent(t, fmt.Sprint(i), i))
	}
	bustest.AppendOrFail(t, m, evs, false)
	var gap *bus.GapError
	err = m.Scan(context.Background(), bus.Query{FromSeq: 2, ToSeq: 9}, func(*abi.Event) error { return nil })
	if !errors.As(err, &gap) || gap.From != 2 || gap.To != 6 {
		t.Errorf("Scan from 2 of a ring holding 7..10 = %v, want a gap 2..6", err)
	}
	bustest.CheckDense(t, bustest.ScanAll(t, m, bus.Query{FromSeq: 7}), 7)
	// An evicted ID is no longer known: it is stored again.
	if dup := bustest.AppendOrFail(t, m, []*abi.Event{bustest.StoreEvent(t, "0", 0)}, false); dup[0] {
		t.Error("an evicted id was reported as a duplicate")
	}
}
