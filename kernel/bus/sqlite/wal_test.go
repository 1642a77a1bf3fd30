package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"

	"github.com/kairo-os/kairo/abi"
)

// walSampler reads the size of a store's WAL file every 100 ms and keeps
// the largest.
type walSampler struct {
	path string
	peak atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func sampleWAL(path string) *walSampler {
	w := &walSampler{path: path + "-wal", stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			w.sample()
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *walSampler) size() int64 {
	fi, err := os.Stat(w.path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func (w *walSampler) sample() {
	if n := w.size(); n > w.peak.Load() {
		w.peak.Store(n)
	}
}

// end stops sampling and returns the peak.
func (w *walSampler) end() int64 {
	close(w.stop)
	<-w.done
	w.sample()
	return w.peak.Load()
}

// acked is what a publisher was told: the event's ID at its seq.
type acked struct {
	seq uint64
	id  string
}

// publishFor publishes 256-byte events from publishers goroutines, each
// waiting for its acknowledgement (and pause) before the next, until ctx
// ends. It returns every acknowledgement and the longest a single publish
// took.
func publishFor(ctx context.Context, t *testing.T, b *bus.Bus, publishers int, pause time.Duration) ([]acked, time.Duration) {
	t.Helper()
	data := bustest.Payload(t, bytes.Repeat([]byte{7}, 254)) // 256 bytes of MsgPack
	var (
		mu      sync.Mutex
		all     []acked
		longest time.Duration
		failed  error
		wg      sync.WaitGroup
	)
	for range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []acked
			var slowest time.Duration
			var err error
			for ctx.Err() == nil {
				ev := &abi.Event{Type: "kairo.wal.e", Data: data}
				start := time.Now()
				var res bus.Result
				if res, err = b.Publish(context.Background(), ev); err != nil {
					break
				}
				slowest = max(slowest, time.Since(start))
				mine = append(mine, acked{res.Seq, ev.ID})
				time.Sleep(pause)
			}
			mu.Lock()
			defer mu.Unlock()
			all = append(all, mine...)
			longest = max(longest, slowest)
			failed = errors.Join(failed, err)
		}()
	}
	wg.Wait()
	if failed != nil {
		t.Fatalf("publish: %v", failed)
	}
	slices.SortFunc(all, func(a, b acked) int { return int(a.seq) - int(b.seq) })
	return all, longest
}

// checkReplay is the control of the WAL tests: every acknowledged event
// replays, in order, at its seq, and a replay by time gives exactly the
// events of that time.
func checkReplay(t *testing.T, b *bus.Bus, acks []acked) {
	t.Helper()
	evs := bustest.ReplayAll(t, b, bus.Query{})
	if len(evs) != len(acks) {
		t.Fatalf("replay gave %d events, %d were acknowledged", len(evs), len(acks))
	}
	for i, ev := range evs {
		if ev.Seq != acks[i].seq || ev.ID != acks[i].id || ev.Seq != uint64(i+1) {
			t.Fatalf("replayed event %d is seq %d id %s; acknowledged seq %d id %s", i, ev.Seq, ev.ID, acks[i].seq, acks[i].id)
		}
	}
	since, until := evs[len(evs)/3].Time, evs[2*len(evs)/3].Time
	var want []uint64
	for _, ev := range evs {
		if !ev.Time.Before(since) && !ev.Time.After(until) {
			want = append(want, ev.Seq)
		}
	}
	var got []uint64
	for _, ev := range bustest.ReplayAll(t, b, bus.Query{Since: since, Until: until}) {
		got = append(got, ev.Seq)
	}
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("replay by time %v..%v gave %d events (%v...), want %d", since, until, len(got), got[:min(len(got), 5)], len(want))
	}
}

// walTestDuration is how long TestWALBound publishes: long enough for the
// WAL to pass its bound many times over at any speed this suite runs at.
func walTestDuration() time.Duration {
	if testing.Short() {
		return 5 * time.Second
	}
	return 30 * time.Second
}

// walEnoughRestarts is how many restarts of the WAL TestWALBound
// publishes through before it stops.
const walEnoughRestarts = 30

// A publisher at full speed for 30 s, or until the WAL was restarted
// walEnoughRestarts times, keeps the WAL under its bound (sampled
// every 100 ms), and an idle store gives the WAL back. The bound is 8 MiB
// here so that even a slow run passes it many times over (the test fails
// if it was not restarted at least three times); the figures for the
// default 64 MiB are BenchmarkWALBound's. No slack over the bound: a commit
// restarts the WAL before it would pass it (beforeCommit), and no reader
// holds a snapshot here. The control: replay gives every acknowledged
// event, in order, and replay by time is exact.
func TestWALBound(t *testing.T) {
	t.Parallel()
	const bound = 8 << 20
	path := filepath.Join(t.TempDir(), "events.db")
	s, err := Open(path, Config{WALMax: bound})
	if err != nil {
		t.Fatal(err)
	}
	b := bustest.NewBus(t, func(testing.TB) bus.Store { return s }, bus.Config{})
	wal := sampleWAL(path)
	ctx, cancel := context.WithTimeout(context.Background(), walTestDuration())
	defer cancel()
	// The publishers stop once the WAL was restarted walEnoughRestarts
	// times (ten times the three the check below asks), or at the
	// duration: each restart begins the WAL anew, so a longer run repeats
	// the same cycle (a quiet run made 159 of them in 30 s).
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if s.WALStats().Restarts >= walEnoughRestarts {
					cancel()
					return
				}
			}
		}
	}()
	start := time.Now()
	acks, _ := publishFor(ctx, t, b, 4, 0)
	took := time.Since(start)
	peak := wal.end()
	st := s.WALStats()
	t.Logf("%d events in %v (%.0f/s), WAL peak %.1f MiB, %+v", len(acks), took.Round(time.Millisecond), float64(len(acks))/took.Seconds(), float64(peak)/(1<<20), st)
	if peak > bound {
		t.Errorf("the WAL reached %d bytes, over its bound of %d", peak, bound)
	}
	if st.Restarts < 3 || st.GiveUps > 0 {
		t.Errorf("checkpoints %+v: want at least 3 restarts (else the test did not pass the bound) and no give-up (no reader held a snapshot)", st)
	}

	// Idle: the checkpointer truncates the WAL after walQuiet without appends.
	idle := time.Now()
	// The file is empty a moment before the checkpointer counts the
	// truncate it made: wait for both.
	for (wal.size() > 0 || s.WALStats().Truncates == 0) && time.Since(idle) < checkpointInterval+walQuiet+28*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	if n := wal.size(); n > 0 || s.WALStats().Truncates == 0 {
		t.Errorf("idle for %v, the WAL is still %d bytes (checkpoints %+v); want it given back (0 bytes)", time.Since(idle).Round(time.Second), n, s.WALStats())
	} else {
		t.Logf("idle: the WAL was given back after %v", time.Since(idle).Round(100*time.Millisecond))
	}
	checkReplay(t, b, acks)
}

// syncBuffer is an io.Writer for a logger written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// holdSnapshot opens a read transaction on the store at path, as the sqlite3
// CLI would in another process, and holds it until the returned func is
// called.
func holdSnapshot(t *testing.T, path string) func() {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err == nil {
		_, err = conn.ExecContext(ctx, "BEGIN")
	}
	var n int64
	if err == nil {
		err = conn.QueryRowContext(ctx, "SELECT count(*) FROM events").Scan(&n)
	}
	if err != nil {
		db.Close()
		t.Fatalf("a reader on %s: %v", path, err)
	}
	return func() {
		conn.ExecContext(ctx, "ROLLBACK")
		conn.Close()
		db.Close()
	}
}

// A reader that holds an old snapshot keeps the WAL from being emptied. It
// must not stall publishing: each attempt to empty it waits walBusyWait at
// most, then checkpoints fall back to PASSIVE, the store says so in its
// log, and tries again later; once the reader is gone the WAL is brought
// back under its bound. The reader holds for 5 s; a writer that waited for
// it would take that long for one publish, the test allows 2 s (a loaded
// machine). The publishers pause a millisecond between events while the
// reader holds, so the WAL, which grows unbounded meanwhile, stays tens of
// MiB.
func TestWALLongReader(t *testing.T) {
	t.Parallel()
	const bound = 2 << 20
	const hold = 5 * time.Second
	path := filepath.Join(t.TempDir(), "events.db")
	var logs syncBuffer
	s, err := Open(path, Config{WALMax: bound, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	b := bustest.NewBus(t, func(testing.TB) bus.Store { return s }, bus.Config{})
	wal := sampleWAL(path)

	var acks []acked
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	a, _ := publishFor(ctx, t, b, 1, 0) // events for the reader to read
	acks = append(acks, a...)

	release := holdSnapshot(t, path)
	ctx, cancel = context.WithTimeout(context.Background(), hold)
	defer cancel()
	a, longest := publishFor(ctx, t, b, 2, time.Millisecond)
	acks = append(acks, a...)
	during := s.WALStats()
	grown := wal.size()
	release()
	t.Logf("with the reader: %d events, longest publish %v, WAL %.1f MiB, %+v", len(a), longest, float64(grown)/(1<<20), during)
	if longest > 2*time.Second {
		t.Errorf("a publish took %v while a reader held its snapshot for %v; want it bounded by about %v", longest, hold, walBusyWait)
	}
	if during.GiveUps == 0 || grown <= bound {
		t.Errorf("with the reader: checkpoints %+v, WAL %d bytes; want a give-up and the WAL past its bound of %d (else the reader did not hold it)", during, grown, bound)
	}
	if !strings.Contains(logs.String(), "could not empty the write-ahead log") {
		t.Errorf("the store did not log the give-up; log:\n%s", logs.String())
	}

	// The reader gone, the next attempt (after at most walRetryMax, in
	// practice a few seconds) restarts the WAL.
	ctx, cancel = context.WithTimeout(context.Background(), walRetryMax+5*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil && s.WALStats().Restarts == during.Restarts {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond) // a few commits after the restart
		cancel()
	}()
	a, _ = publishFor(ctx, t, b, 1, 0)
	acks = append(acks, a...)
	wal.end()
	if st := s.WALStats(); st.Restarts == during.Restarts || wal.size() > bound {
		t.Errorf("after the reader ended: checkpoints %+v, WAL %d bytes; want a restart and the WAL within %d", st, wal.size(), bound)
	}
	if !strings.Contains(logs.String(), "back within its bound") {
		t.Errorf("the store did not log the WAL back within its bound; log:\n%s", logs.String())
	}
	checkReplay(t, b, acks)
}

func TestWALMaxOption(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "events.db"), Config{WALMax: 1000})
	if err == nil || !strings.Contains(err.Error(), "WAL bound of 1000 bytes") {
		t.Errorf("OpenSQLite with a WAL bound of 1000 bytes: %v; want an error naming it", err)
	}
}

func copyFileTo(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// spanRows returns the rows of batches, the time spans replay by time
// narrows its range with.
func spanRows(t *testing.T, path string) [][4]int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT first_seq, last_seq, min_time, max_time FROM batches ORDER BY first_seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][4]int64
	for rows.Next() {
		var r [4]int64
		if err := rows.Scan(&r[0], &r[1], &r[2], &r[3]); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// timeSeqs replays q and returns the seqs.
func timeSeqs(t *testing.T, s bus.Store, q bus.Query) []uint64 {
	t.Helper()
	var out []uint64
	for _, ev := range bustest.ScanAll(t, s, q) {
		out = append(out, ev.Seq)
	}
	return out
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for q := from; q <= to; q++ {
		out = append(out, q)
	}
	return out
}

// A store written before spans covered spanEvents events (one row of
// batches per append; testdata/v1-events.db, 30 events, event i at
// 2025-01-01 + i s) opens, replays, replays by time, and takes new events
// whose spans join the old rows.
func TestSQLiteV1Store(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	copyFileTo(t, filepath.Join("testdata", "v1-events.db"), path)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if rows := spanRows(t, path); len(rows) != 10 {
		t.Fatalf("testdata/v1-events.db has %d rows of batches, want the 10 of its appends", len(rows))
	}
	s := openSQLite(t, path)
	evs := bustest.ScanAll(t, s, bus.Query{})
	if len(evs) != 30 || s.LastSeq() != 30 {
		t.Fatalf("the v1 store replays %d events, LastSeq %d; want 30", len(evs), s.LastSeq())
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) || !ev.Time.Equal(base.Add(time.Duration(i)*time.Second)) || ev.Source != "v1" {
			t.Fatalf("v1 event %d: %+v", i, ev)
		}
	}
	if got := timeSeqs(t, s, bus.Query{Since: base.Add(10 * time.Second), Until: base.Add(14 * time.Second)}); !slices.Equal(got, seqRange(11, 15)) {
		t.Fatalf("v1 store, replay by time: seqs %v, want 11..15", got)
	}
	var more []*abi.Event
	for i := range 10 {
		more = append(more, &abi.Event{ID: abi.NewID(), Type: "kairo.v2.e", Time: base.Add(time.Duration(100+i) * time.Second), Data: bustest.Payload(t, i)})
	}
	bustest.AppendOrFail(t, s, more, true)
	check := func(s bus.Store) {
		t.Helper()
		if got := timeSeqs(t, s, bus.Query{Since: base.Add(29 * time.Second), Until: base.Add(101 * time.Second)}); !slices.Equal(got, seqRange(30, 32)) {
			t.Fatalf("replay by time across old and new events: seqs %v, want 30..32", got)
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rows := spanRows(t, path)
	if len(rows) != 11 || rows[10] != [4]int64{31, 40, base.Add(100 * time.Second).UnixNano(), base.Add(109 * time.Second).UnixNano()} {
		t.Fatalf("rows of batches after 10 new events and a close: %v; want the 10 old and one for 31..40", rows)
	}
	s = openSQLite(t, path)
	defer s.Close()
	check(s)
}

// Events after the last row of batches — a crash leaves up to spanEvents
// of them — are found by a replay by time, and the next append covers them
// with a row.
func TestSQLiteSpanTail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	s := openSQLite(t, path)
	defer s.Close()
	// Times out of seq order, as publishers that set their own make them.
	times := []int64{50, 10, 40, 20, 30}
	var evs []*abi.Event
	for i := range 100 {
		evs = append(evs, &abi.Event{ID: abi.NewID(), Type: "kairo.tail.e", Time: time.Unix(times[i%5], int64(i)), Data: bustest.Payload(t, i)})
	}
	bustest.AppendOrFail(t, s, evs, true)
	if rows := spanRows(t, path); len(rows) != 0 {
		t.Fatalf("rows of batches after 100 events: %v; want none yet (spanEvents is %d)", rows, spanEvents)
	}
	// The store is still open: what is on disk is what a kill -9 now leaves.
	image := filepath.Join(t.TempDir(), "events.db")
	copyFileTo(t, path, image)
	copyFileTo(t, path+"-wal", image+"-wal")
	want := func(lo, hi int64) []uint64 {
		var out []uint64
		for i := range 100 {
			if tm := times[i%5]; tm >= lo && tm <= hi {
				out = append(out, uint64(i+1))
			}
		}
		return out
	}
	c := openSQLite(t, image)
	q := bus.Query{Since: time.Unix(20, 0), Until: time.Unix(40, 99)}
	if got := timeSeqs(t, c, q); !slices.Equal(got, want(20, 40)) {
		t.Fatalf("replay by time of events no span covers: seqs %v, want %v", got, want(20, 40))
	}
	bustest.AppendOrFail(t, c, []*abi.Event{{ID: abi.NewID(), Type: "kairo.tail.e", Time: time.Unix(5, 0), Data: bustest.Payload(t, 100)}}, true)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	rows := spanRows(t, image)
	if len(rows) != 1 || rows[0] != [4]int64{1, 101, time.Unix(5, 0).UnixNano(), time.Unix(50, 95).UnixNano()} {
		t.Fatalf("rows of batches after the crash tail and one event: %v; want one for 1..101 from 5 s to 50.000000095 s", rows)
	}
	c = openSQLite(t, image)
	defer c.Close()
	if got := timeSeqs(t, c, bus.Query{Until: time.Unix(5, 0)}); !slices.Equal(got, []uint64{101}) {
		t.Fatalf("replay by time after the tail was covered: seqs %v, want [101]", got)
	}
	if got := timeSeqs(t, c, q); !slices.Equal(got, want(20, 40)) {
		t.Fatalf("replay by time after the tail was covered: seqs %v, want %v", got, want(20, 40))
	}
}
