package jetstream

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
	"github.com/kairo-os/kairo/kernel/bus/internal/hook"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// Options that cannot work are refused before anything starts, naming the
// field.
func TestOpenJetStreamErrors(t *testing.T) {
	for _, tc := range []struct {
		opts Config
		want string
	}{
		{Config{}, "embedded"},
		{Config{Embedded: true}, "dir"},
		{Config{Embedded: true, Dir: "x", URL: "nats://h:4222"}, "not both"},
		{Config{Embedded: true, Dir: "x", Stream: "a.b"}, "stream"},
		{Config{Embedded: true, Dir: "x", Prefix: "a.*"}, "prefix"},
		{Config{Embedded: true, Dir: "x", Replicas: 7}, "replicas"},
		{Config{Embedded: true, Dir: "x", MaxBytes: -1}, "negative"},
		{Config{Embedded: true, Dir: "x", CredsFile: "c"}, "credentials"},
		{Config{URL: "nats://h:4222", CertFile: "c"}, "key_file"},
		{Config{URL: "nats://127.0.0.1:1", Timeout: 200 * time.Millisecond, OpenTimeout: 500 * time.Millisecond}, "connect"},
	} {
		s, err := Open(tc.opts)
		if err == nil {
			s.Close()
			t.Errorf("OpenJetStream(%+v) opened", tc.opts)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("OpenJetStream(%+v): %v; want it to say %q", tc.opts, err, tc.want)
		}
	}
}

func TestJetStreamDescribe(t *testing.T) {
	dir := t.TempDir()
	s := openJetStream(t, Config{Embedded: true, Dir: dir})
	defer s.Close()
	if got, want := s.Describe(), "jetstream embedded at "+dir; got != want {
		t.Fatalf("Describe = %q, want %q", got, want)
	}
}

// An append that fails part way stores nothing of its events: the ones
// the server took are deleted again, and publishing them once more stores
// them (they are not duplicates of events that were never acknowledged).
func TestJetStreamAppendFailureStoresNothing(t *testing.T) {
	s := openJetStream(t, Config{Embedded: true, Dir: t.TempDir()})
	defer s.Close()
	bustest.AppendN(t, s, 0, 3)
	huge := bustest.StoreEvent(t, "huge", 2)
	huge.Data = bustest.Payload(t, make([]byte, bus.MaxEventData+128<<10)) // over the server's limit
	evs := []*abi.Event{bustest.StoreEvent(t, "a", 0), bustest.StoreEvent(t, "b", 1), huge}
	if err := s.Append(evs, nil, make([]bool, 3)); err == nil {
		t.Fatal("an append with an event over the server's maximum payload succeeded")
	}
	for _, ev := range evs {
		if ev.Seq != 0 {
			t.Fatalf("event %s has seq %d after a failed append", ev.ID, ev.Seq)
		}
	}
	if got := bustest.ScanAll(t, s, bus.Query{}); len(got) != 3 || s.LastSeq() != 3 {
		t.Fatalf("after a failed append: %d events, LastSeq %d; want the 3 before it", len(got), s.LastSeq())
	}
	dup := bustest.AppendOrFail(t, s, evs[:2], true)
	if dup[0] || dup[1] || evs[0].Seq <= 3 || evs[1].Seq <= evs[0].Seq {
		t.Fatalf("publishing the undone events again: dup %v, seqs %d %d", dup, evs[0].Seq, evs[1].Seq)
	}
	got := bustest.ScanAll(t, s, bus.Query{FromSeq: 4})
	if len(got) != 2 || got[0].ID != "a" || got[1].ID != "b" {
		t.Fatalf("after the retry the store holds %+v", got)
	}
}

// A stream at its MaxBytes refuses through the bus as a full disk does:
// a DiskFullError naming the limit, reads still served, and once old
// events expire (MaxAge) the bus reports the store writable and takes
// events again.
func TestJetStreamFullThroughBus(t *testing.T) {
	defer func(d time.Duration) { hook.ProbeInterval = d }(hook.ProbeInterval)
	hook.ProbeInterval = 20 * time.Millisecond
	s := openJetStream(t, Config{Embedded: true, Dir: t.TempDir(), MaxBytes: 32 << 10, MaxAge: 2 * time.Second})
	b := bus.New(s, bus.Config{})
	defer b.Close()
	writable := bustest.NewCollector()
	bustest.Subscribe(t, b, bus.SubjectStoreWritable, bus.SubscribeConfig{}, writable.Handle)
	big := bustest.Payload(t, strings.Repeat("x", 2000))
	var full *bus.DiskFullError
	acked := 0
	for {
		_, err := b.Publish(bustest.Ctx(t), &abi.Event{Type: "kairo.test.full", Data: big})
		if errors.As(err, &full) {
			break
		}
		if err != nil {
			t.Fatalf("publish into a stream with room: %v", err)
		}
		if acked++; acked > 100 {
			t.Fatal("a stream of 32 KiB took 200 KB")
		}
	}
	for _, want := range []string{"max_bytes", "32768", "full"} {
		if !strings.Contains(full.Error(), want) {
			t.Errorf("the refusal %q does not say %q", full, want)
		}
	}
	if n := len(bustest.ReplayAll(t, b, bus.Query{})); n != acked {
		t.Fatalf("a full stream replays %d of %d events", n, acked)
	}
	evs := writable.Wait(t, 1) // once the first events expire
	var w bus.StoreWritable
	if err := msgpack.Unmarshal(evs[0].Data, &w); err != nil || w.Refused == 0 {
		t.Fatalf("writable event %+v (%v)", w, err)
	}
	// The stream expires its messages a few at a time: the probe's small
	// event may find room before a large one does.
	bustest.Eventually(t, "room for a large event", func() bool {
		info, err := s.stream.Info(bustest.Ctx(t))
		return err == nil && info.State.Bytes < 16<<10
	})
	bustest.MustPublish(t, b, &abi.Event{Type: "kairo.test.full", Data: big})
}

// BenchmarkJetStreamReplay reads a store of 200k events back with Scan:
// 196 messages of 1024 events each.
func BenchmarkJetStreamReplay(b *testing.B) {
	s := openJetStream(b, Config{Embedded: true, Dir: b.TempDir()})
	defer s.Close()
	const n = 200_000
	data := bustest.Payload(b, make([]byte, 256))
	for i := 0; i < n; i += 1024 {
		var evs []*abi.Event
		for j := i; j < min(i+1024, n); j++ {
			evs = append(evs, &abi.Event{ID: abi.NewID(), Type: "kairo.bench.event", Source: "kairo", Time: time.Now(), Data: data})
		}
		bustest.AppendOrFail(b, s, evs, false)
	}
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		count := 0
		if err := s.Scan(ctx, bus.Query{}, func(*abi.Event) error { count++; return nil }); err != nil {
			b.Fatal(err)
		}
		if count != n {
			b.Fatalf("replayed %d of %d events", count, n)
		}
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "events/s")
}

func openJetStream(t testing.TB, opts Config) *Store {
	t.Helper()
	s, err := Open(opts)
	if err != nil {
		t.Fatalf("OpenJetStream(%+v): %v", opts, err)
	}
	return s
}
