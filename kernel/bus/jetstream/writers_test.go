package jetstream

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kairo-os/kairo/abi"
)

// jsListenAddr is a loopback address with a port free a moment ago.
func jsListenAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// twoWriters opens two stores on one stream of a server on loopback: two
// writers, as two hosts of a cluster are. (What an embedded server lets
// the hosts that join it do is TestJetStreamPeerPermissions'.)
func twoWriters(t *testing.T) (a, b *Store) {
	url := "nats://" + plainServer(t)
	a = openJetStream(t, Config{URL: url})
	b = openJetStream(t, Config{URL: url})
	t.Cleanup(func() {
		b.Close()
		a.Close()
	})
	return a, b
}

// A stream in the format of an earlier Kairo, one message per event, is
// refused with what to do, and left as it was.
func TestJetStreamOldFormat(t *testing.T) {
	dir := t.TempDir()
	s := openJetStream(t, Config{Embedded: true, Dir: dir})
	ctx := bustest.Ctx(t)
	if _, err := s.js.CreateStream(ctx, jetstream.StreamConfig{Name: "OLD", Subjects: []string{"OLD.>"}}); err != nil {
		t.Fatal(err)
	}
	env, _ := s.EncodeEnv(bustest.StoreEvent(t, "old-1", 1))
	if _, err := s.js.Publish(ctx, "OLD.old-1.kairo.store.e", env); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(Config{Embedded: true, Dir: dir, Stream: "OLD"})
	if err == nil {
		t.Fatal("a stream of the earlier format opened")
	}
	for _, want := range []string{"stream OLD", "earlier Kairo", "nats stream rm OLD", "another name"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
}

// An append larger than a message is split in several, each of whole
// events; seqs stay dense, a duplicate of an event in an earlier message of
// the same append is found, and a reopened store finds them all.
func TestJetStreamSplitAppend(t *testing.T) {
	dir := t.TempDir()
	s := openJetStream(t, Config{Embedded: true, Dir: dir})
	s.maxData = 4 << 10
	bustest.AppendN(t, s, 0, 3)
	var evs []*abi.Event
	for i := range 60 {
		ev := bustest.StoreEvent(t, fmt.Sprintf("split-%d", i), i)
		ev.Data = bustest.Payload(t, strings.Repeat("x", 300))
		evs = append(evs, ev)
	}
	evs = append(evs, bustest.StoreEvent(t, "split-2", 99), bustest.StoreEvent(t, "ev-0", 0)) // of this append, of an earlier one
	dup := bustest.AppendOrFail(t, s, evs, true)
	for i := range 60 {
		if dup[i] || evs[i].Seq != uint64(4+i) {
			t.Fatalf("event %d: seq %d dup %v, want seq %d", i, evs[i].Seq, dup[i], 4+i)
		}
	}
	if !dup[60] || evs[60].Seq != 6 || !dup[61] || evs[61].Seq != 1 {
		t.Fatalf("duplicates: %v seq %d, %v seq %d; want seqs 6 and 1", dup[60], evs[60].Seq, dup[61], evs[61].Seq)
	}
	if len(s.seqs) < 5 {
		t.Fatalf("60 events of 300 bytes went into %d messages of at most 4 KiB", len(s.seqs))
	}
	s.Close()
	s = openJetStream(t, Config{Embedded: true, Dir: dir})
	defer s.Close()
	if s.LastSeq() != 63 {
		t.Fatalf("LastSeq after reopen = %d, want 63", s.LastSeq())
	}
	got := bustest.ScanAll(t, s, bus.Query{FromSeq: 30, ToSeq: 40})
	if len(got) != 11 || got[0].ID != "split-26" || got[0].Seq != 30 {
		t.Fatalf("scan 30..40 after reopen: %d events from %+v", len(got), got[0])
	}
	again := []*abi.Event{bustest.StoreEvent(t, "split-59", 0), bustest.StoreEvent(t, "new", 0)}
	dup = bustest.AppendOrFail(t, s, again, false)
	if !dup[0] || again[0].Seq != 63 || dup[1] || again[1].Seq != 64 {
		t.Fatalf("after reopen: dup %v, seqs %d %d", dup, again[0].Seq, again[1].Seq)
	}
}

// An append whose later message is refused keeps its earlier ones, which
// a host may have read already: their events are duplicates when published
// again, and the refused ones are not.
func TestJetStreamSplitAppendFull(t *testing.T) {
	s := openJetStream(t, Config{Embedded: true, Dir: t.TempDir(), MaxBytes: 64 << 10})
	defer s.Close()
	s.maxData = 4 << 10
	big := bustest.Payload(t, strings.Repeat("x", 1000))
	for i := 0; ; i++ {
		info, err := s.stream.Info(bustest.Ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Bytes > 52<<10 {
			break
		}
		ev := bustest.StoreEvent(t, fmt.Sprintf("fill-%d", i), i)
		ev.Data = big
		bustest.AppendOrFail(t, s, []*abi.Event{ev}, false)
	}
	last, stored := s.LastSeq(), len(bustest.ScanAll(t, s, bus.Query{}))
	var evs []*abi.Event
	for i := range 20 {
		ev := bustest.StoreEvent(t, fmt.Sprintf("over-%d", i), i)
		ev.Data = big
		evs = append(evs, ev)
	}
	err := s.Append(evs, nil, make([]bool, len(evs)))
	if !bus.IsDiskFull(err) {
		t.Fatalf("an append past max_bytes: %v; want a full stream", err)
	}
	// The messages stored before the refusal stay (another host may have
	// read them), and the error says which events they hold.
	kept := s.LastSeq() - last
	if kept == 0 || kept >= uint64(len(evs)) || len(bustest.ScanAll(t, s, bus.Query{})) != stored+int(kept) {
		t.Fatalf("after the refusal LastSeq is %d (was %d) and %d events are stored (were %d); want some of the append's first messages stored", s.LastSeq(), last, len(bustest.ScanAll(t, s, bus.Query{})), stored)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("seq %d..%d, are stored", last+1, last+kept)) {
		t.Fatalf("the error does not say which events are stored: %v", err)
	}
	again := bustest.StoreEvent(t, "over-0", 0)
	if dup := bustest.AppendOrFail(t, s, []*abi.Event{again}, false); !dup[0] || again.Seq != last+1 {
		t.Fatalf("an ID of the stored part: dup %v seq %d, want a duplicate at %d", dup[0], again.Seq, last+1)
	}
	// Control: an ID the refused part held is new, and the stream takes
	// it once there is room for it.
	small := bustest.StoreEvent(t, fmt.Sprintf("over-%d", len(evs)-1), 0)
	if dup := bustest.AppendOrFail(t, s, []*abi.Event{small}, false); dup[0] || small.Seq != last+kept+1 {
		t.Fatalf("an ID of the refused part: dup %v seq %d, want a new event at %d", dup[0], small.Seq, last+kept+1)
	}
}

// Two IDs with one hash: the second is stored, not taken for the first,
// and each is a duplicate of itself afterwards, also after a reopen.
func TestJetStreamHashCollision(t *testing.T) {
	dir := t.TempDir()
	s := openJetStream(t, Config{Embedded: true, Dir: dir})
	first := bustest.StoreEvent(t, "first", 1)
	bustest.AppendOrFail(t, s, []*abi.Event{first}, false)
	s.ids.addSum(s.ids.sum("second"), first.Seq) // as if "second" hashed as "first" does
	second := bustest.StoreEvent(t, "second", 2)
	if dup := bustest.AppendOrFail(t, s, []*abi.Event{second}, false); dup[0] || second.Seq != first.Seq+1 {
		t.Fatalf("an ID whose hash another has: dup %v seq %d", dup[0], second.Seq)
	}
	check := func(when string) {
		for _, want := range []*abi.Event{first, second} {
			again := bustest.StoreEvent(t, want.ID, 9)
			if dup := bustest.AppendOrFail(t, s, []*abi.Event{again}, false); !dup[0] || again.Seq != want.Seq {
				t.Fatalf("%s: %s again: dup %v seq %d, want seq %d", when, want.ID, dup[0], again.Seq, want.Seq)
			}
		}
	}
	check("at once")
	s.Close()
	s = openJetStream(t, Config{Embedded: true, Dir: dir})
	defer s.Close()
	check("after a reopen")
}

// A message of a failed append that lands later (its acknowledgement was
// lost) is read by its store as another writer's would be: its events are
// stored, and publishing them again finds them as duplicates at their seqs.
// Nothing is deleted, since another host may have read it already.
func TestJetStreamLostMessage(t *testing.T) {
	s := openJetStream(t, Config{Embedded: true, Dir: t.TempDir()})
	defer s.Close()
	bustest.AppendN(t, s, 0, 2)
	env, _ := s.EncodeEnv(bustest.StoreEvent(t, "lost", 0))
	m := &jsMessage{first: 3, count: 1, maxTime: 0, msgID: s.writer + ".lost", data: appendFrame([]byte{jsFormat}, env)}
	if _, err := s.js.PublishMsg(bustest.Ctx(t), &nats.Msg{Subject: s.subject, Header: m.header(s.lastStream), Data: m.data}); err != nil {
		t.Fatal(err)
	}
	evs := []*abi.Event{bustest.StoreEvent(t, "lost", 1), bustest.StoreEvent(t, "next", 2)}
	if dup := bustest.AppendOrFail(t, s, evs, false); !dup[0] || dup[1] || evs[0].Seq != 3 || evs[1].Seq != 4 {
		t.Fatalf("after a lost message: dup %v, seqs %d %d; want the lost one a duplicate at 3, the next at 4", dup, evs[0].Seq, evs[1].Seq)
	}
	if n := len(bustest.ScanAll(t, s, bus.Query{})); n != 4 {
		t.Fatalf("the store holds %d events, want 4", n)
	}
}

// Two writers on one stream: interleaved appends get dense seqs, each
// store reads the other's events, a duplicate of an ID the other stored is
// found with its seq, and Follow tells of the other's appends.
func TestJetStreamTwoWriters(t *testing.T) {
	a, b := twoWriters(t)
	app := func(s *Store, ids ...string) []*abi.Event {
		t.Helper()
		var evs []*abi.Event
		for _, id := range ids {
			evs = append(evs, bustest.StoreEvent(t, id, len(id)))
		}
		bustest.AppendOrFail(t, s, evs, true)
		return evs
	}
	app(a, "a1", "a2")
	app(b, "b1")
	app(a, "a3")
	got := app(b, "b2", "a2", "b3") // a2 is a's: b learns of it as it appends
	if got[0].Seq != 5 || got[1].Seq != 2 || got[2].Seq != 6 {
		t.Fatalf("b's append after a's: seqs %d %d %d, want 5, 2 (a's) and 6", got[0].Seq, got[1].Seq, got[2].Seq)
	}
	if a.LastSeq() != 4 || b.LastSeq() != 6 {
		t.Fatalf("LastSeq: a %d, b %d; want 4 (a has not seen b's last append) and 6", a.LastSeq(), b.LastSeq())
	}

	notified := make(chan uint64, 16)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a.Follow(ctx, func(last uint64) { notified <- last })
	waitNotified := func(want uint64) {
		t.Helper()
		deadline := time.After(bustest.WaitLimit)
		for {
			select {
			case got := <-notified:
				if got == want {
					return
				}
			case <-deadline:
				t.Fatalf("Follow did not notify seq %d", want)
			}
		}
	}
	waitNotified(6)
	app(b, "b4")
	waitNotified(7)
	for _, s := range []*Store{a, b} {
		var ids []string
		for _, ev := range bustest.ScanAll(t, s, bus.Query{}) {
			ids = append(ids, ev.ID)
		}
		if got := strings.Join(ids, " "); got != "a1 a2 b1 a3 b2 b3 b4" {
			t.Fatalf("%s reads %s", s.Describe(), got)
		}
	}
	if dup := app(a, "b4"); dup[0].Seq != 7 {
		t.Fatalf("a duplicate on a of b's event got seq %d, want 7", dup[0].Seq)
	}
}

// Both writers append at once, in many batches with IDs shared between
// them: every ID is stored once, seqs are dense, and both stores agree.
func TestJetStreamWritersRace(t *testing.T) {
	a, b := twoWriters(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a.Follow(ctx, func(uint64) {})
	const batches, each = 30, 10
	var wg sync.WaitGroup
	for _, s := range []*Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range batches {
				var evs []*abi.Event
				for j := range each {
					n := i*each + j
					id := fmt.Sprintf("shared-%d", n)
					if n%2 == 0 {
						id = fmt.Sprintf("%s-%d", s.writer, n)
					}
					evs = append(evs, bustest.StoreEvent(t, id, n))
				}
				if err := s.Append(evs, nil, make([]bool, len(evs))); err != nil {
					t.Errorf("%s: %v", s.Describe(), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	want := batches*each + batches*each/2 // each writer's own, and the shared ones once
	bustest.Eventually(t, "a follows b", func() bool { return a.LastSeq() == uint64(want) })
	app := []*abi.Event{bustest.StoreEvent(t, "last", 0)}
	bustest.AppendOrFail(t, b, app, false) // b learns of a's last appends
	for _, s := range []*Store{a, b} {
		evs := bustest.ScanAll(t, s, bus.Query{})
		if len(evs) != want+1 && s == b || len(evs) < want {
			t.Fatalf("%s reads %d events, want %d", s.Describe(), len(evs), want)
		}
		seen := map[string]bool{}
		for i, ev := range evs {
			if ev.Seq != uint64(i+1) {
				t.Fatalf("%s: event %d has seq %d", s.Describe(), i, ev.Seq)
			}
			if seen[ev.ID] {
				t.Fatalf("%s: %s is stored twice", s.Describe(), ev.ID)
			}
			seen[ev.ID] = true
		}
	}
}

// BenchmarkJetStreamOpen measures opening a store of n events (200k, or
// KAIRO_BENCH_OPEN_EVENTS) in messages of 1024, and the memory of its id
// index per event.
func BenchmarkJetStreamOpen(b *testing.B) {
	n := 200_000
	if v := os.Getenv("KAIRO_BENCH_OPEN_EVENTS"); v != "" {
		fmt.Sscanf(v, "%d", &n)
	}
	dir := b.TempDir()
	s := openJetStream(b, Config{Embedded: true, Dir: dir})
	data := bustest.Payload(b, make([]byte, 256))
	for i := 0; i < n; i += 1024 {
		var evs []*abi.Event
		for j := i; j < min(i+1024, n); j++ {
			evs = append(evs, &abi.Event{ID: abi.NewID(), Type: "kairo.bench.event", Source: "kairo", Time: time.Now(), Data: data})
		}
		bustest.AppendOrFail(b, s, evs, false)
	}
	s.Close()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		s := openJetStream(b, Config{Embedded: true, Dir: dir})
		if s.LastSeq() != uint64(n) {
			b.Fatalf("LastSeq %d, want %d", s.LastSeq(), n)
		}
		s.Close()
	}
	b.ReportMetric(time.Since(start).Seconds()/float64(b.N)*1e6/float64(n), "open-s/Mevents")
	b.StopTimer()
	// The id index alone, built as opening builds it.
	ids := make([][]byte, n)
	for i := range ids {
		ids[i] = []byte(abi.NewID())
	}
	heap0 := jsHeapInUse()
	x := newIDIndex()
	for i, id := range ids {
		x.addBytes(id, uint64(i+1))
	}
	b.ReportMetric(float64(jsHeapInUse()-heap0)/float64(n), "idindex-B/event")
	runtime.KeepAlive(x)
	runtime.KeepAlive(ids)
}

func jsHeapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}
