package bustest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"

	"github.com/kairo-os/kairo/abi"
)

// ConformanceStore is one store under the conformance suite: Open opens
// (or reopens) the store kept in dir.
type ConformanceStore struct {
	Name    string
	Durable bool // keeps its events across a close and reopen
	Open    func(t testing.TB, dir string) bus.Store
	// Full returns a store that fills up, and a function that frees room;
	// nil skips the test.
	Full func(t *testing.T) (bus.Store, func())
	// AfterDupWindow waits past the store's own duplicate window, if any.
	AfterDupWindow func()
	// FullSays is what a full store's refusal says besides "full" (the
	// limit it names); "" asks nothing more.
	FullSays string
}

// Conform runs the contract against the store cs opens.
func Conform(t *testing.T, cs ConformanceStore) {
	t.Run("publish", func(t *testing.T) { conformPublish(t, cs) })
	t.Run("replay", func(t *testing.T) { conformReplay(t, cs) })
	t.Run("duplicates", func(t *testing.T) { conformDuplicates(t, cs) })
	t.Run("subscriptions", func(t *testing.T) { conformSubscriptions(t, cs) })
	t.Run("reopen", func(t *testing.T) { conformReopen(t, cs) })
	t.Run("full", func(t *testing.T) { conformFull(t, cs) })
}

// Every acknowledgement carries a new sequence number, higher than the
// one before it, and the store's LastSeq is the last of them.
func conformPublish(t *testing.T, cs ConformanceStore) {
	b := bus.New(cs.Open(t, t.TempDir()), bus.Config{})
	defer b.Close()
	var last uint64
	for i := range 5 {
		res := MustPublish(t, b, &abi.Event{Type: "kairo.test.one", Data: Payload(t, i)})
		if res.Duplicate || res.Seq <= last {
			t.Fatalf("publish %d: %+v after seq %d", i, res, last)
		}
		last = res.Seq
	}
	for _, res := range PublishN(t, b, "kairo.test.many", 700) {
		if res.Duplicate || res.Seq <= last {
			t.Fatalf("async publish: %+v after seq %d", res, last)
		}
		last = res.Seq
	}
	if got := b.LastSeq(); got != last {
		t.Fatalf("LastSeq = %d, want %d", got, last)
	}
}

// conformEvents publishes events on a mix of subjects, times and
// envelope fields, and returns them as acknowledged.
func conformEvents(t *testing.T, b *bus.Bus) []abi.Event {
	subjects := []string{"kairo.process.started", "kairo.process.exited", "kairo.user.message", "kairo.process.tool.done", "other.thing"}
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var evs []*abi.Event
	for i := range 300 {
		ev := &abi.Event{
			Type:   subjects[i%len(subjects)],
			Source: fmt.Sprintf("test/%d", i%3),
			Time:   base.Add(time.Duration(i) * time.Second),
			Data:   Payload(t, i),
		}
		if i%4 == 0 {
			ev.CorrelationID = fmt.Sprintf("run-%d", i/40)
			ev.CausationID = fmt.Sprintf("cause %d", i) // not a subject token
		}
		if i%7 == 0 {
			ev.ID = fmt.Sprintf("custom id #%d.*>", i) // must be encoded
		}
		if i%50 == 49 {
			ev.Time = base.Add(-time.Hour) // published late, out of time order
		}
		evs = append(evs, ev)
	}
	for i := 0; i < len(evs); i += 64 {
		if _, err := b.PublishBatch(Ctx(t), evs[i:min(i+64, len(evs))]); err != nil {
			t.Fatalf("PublishBatch: %v", err)
		}
	}
	out := make([]abi.Event, len(evs))
	for i, ev := range evs {
		out[i] = *ev
	}
	return out
}

// SameEvent fails unless got is want as published: every field of the
// envelope and the seq.
func SameEvent(t *testing.T, what string, got, want abi.Event) {
	t.Helper()
	if got.ID != want.ID || got.Type != want.Type || got.Source != want.Source || !got.Time.Equal(want.Time) ||
		string(got.Data) != string(want.Data) || got.CorrelationID != want.CorrelationID ||
		got.CausationID != want.CausationID || got.Seq != want.Seq {
		t.Fatalf("%s: got %+v, want %+v", what, got, want)
	}
}

// Replay by sequence, time and pattern gives the events the query selects,
// in sequence order, as they were published.
func conformReplay(t *testing.T, cs ConformanceStore) {
	b := bus.New(cs.Open(t, t.TempDir()), bus.Config{})
	defer b.Close()
	all := conformEvents(t, b)
	base := all[0].Time
	queries := []struct {
		name string
		q    bus.Query
	}{
		{"all", bus.Query{}},
		{"from seq", bus.Query{FromSeq: all[100].Seq}},
		{"seq range", bus.Query{FromSeq: all[10].Seq, ToSeq: all[20].Seq}},
		{"past the end", bus.Query{FromSeq: all[len(all)-1].Seq + 1}},
		{"since", bus.Query{Since: base.Add(250 * time.Second)}},
		{"until", bus.Query{Until: base.Add(10 * time.Second)}},
		{"time range", bus.Query{Since: base.Add(30 * time.Second), Until: base.Add(60 * time.Second)}},
		{"exact", bus.Query{Pattern: abi.MustCompilePattern("kairo.process.exited")}},
		{"star", bus.Query{Pattern: abi.MustCompilePattern("kairo.*.exited")}},
		{"star last", bus.Query{Pattern: abi.MustCompilePattern("kairo.process.*")}},
		{"tail", bus.Query{Pattern: abi.MustCompilePattern("kairo.process.>")}},
		{"everything", bus.Query{Pattern: abi.MustCompilePattern(">")}},
		{"no match", bus.Query{Pattern: abi.MustCompilePattern("nobody.*")}},
		{"combined", bus.Query{FromSeq: all[50].Seq, Since: base.Add(60 * time.Second), Pattern: abi.MustCompilePattern("kairo.>")}},
		{"limit", bus.Query{Pattern: abi.MustCompilePattern("kairo.user.>"), Limit: 7}},
	}
	for _, tc := range queries {
		t.Run(tc.name, func(t *testing.T) {
			var want []abi.Event
			// The pattern is the reference: abi's FuzzMatch holds
			// Pattern.Match to the NATS rule written token by token.
			for _, ev := range all {
				q := tc.q
				if q.FromSeq > 0 && ev.Seq < q.FromSeq || q.ToSeq > 0 && ev.Seq > q.ToSeq ||
					!q.Since.IsZero() && ev.Time.Before(q.Since) || !q.Until.IsZero() && ev.Time.After(q.Until) ||
					q.Pattern != nil && !q.Pattern.Match(ev.Type) {
					continue
				}
				if q.Limit > 0 && len(want) == q.Limit {
					break
				}
				want = append(want, ev)
			}
			got := ReplayAll(t, b, tc.q)
			if len(got) != len(want) {
				t.Fatalf("replayed %d events, want %d", len(got), len(want))
			}
			for i := range got {
				SameEvent(t, fmt.Sprintf("event %d", i), got[i], want[i])
			}
		})
	}
	t.Run("stop", func(t *testing.T) {
		n := 0
		err := b.Replay(Ctx(t), bus.Query{}, func(*abi.Event) error {
			if n++; n == 3 {
				return bus.ErrStop
			}
			return nil
		})
		if err != nil || n != 3 {
			t.Fatalf("ErrStop after 3 events: %d events, %v", n, err)
		}
		boom := errors.New("boom")
		if err := b.Replay(Ctx(t), bus.Query{}, func(*abi.Event) error { return boom }); !errors.Is(err, boom) {
			t.Fatalf("a callback's error came back as %v", err)
		}
	})
}

// Publishing an ID already stored is a no-op that returns the stored seq:
// in one batch, later, with another type, past JetStream's own duplicate
// window, and after the store is closed and opened again.
func conformDuplicates(t *testing.T, cs ConformanceStore) {
	dir := t.TempDir()
	b := bus.New(cs.Open(t, dir), bus.Config{})
	closed := false
	defer func() {
		if !closed {
			b.Close()
		}
	}()
	orig := &abi.Event{ID: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", Type: "kairo.dup.first", Data: Payload(t, 1)}
	odd := &abi.Event{ID: "odd id/with.dots*", Type: "kairo.dup.first", Data: Payload(t, 2)}
	first := MustPublish(t, b, orig)
	firstOdd := MustPublish(t, b, odd)
	PublishN(t, b, "kairo.dup.filler", 20)
	last := b.LastSeq()

	check := func(when string) {
		t.Helper()
		for _, c := range []struct {
			ev   abi.Event
			want uint64
		}{{*orig, first.Seq}, {*odd, firstOdd.Seq}} {
			again := c.ev
			again.Seq = 0
			again.Type = "kairo.dup.other" // another type: still the same ID
			res := MustPublish(t, b, &again)
			if !res.Duplicate || res.Seq != c.want {
				t.Fatalf("%s: publishing %q again gave %+v, want a duplicate of seq %d", when, c.ev.ID, res, c.want)
			}
		}
		// A batch with an ID twice, and one already stored.
		fresh := fmt.Sprintf("fresh-%s", strings.ReplaceAll(when, " ", "-"))
		res, err := b.PublishBatch(Ctx(t), []*abi.Event{
			{ID: fresh, Type: "kairo.dup.batch"},
			{ID: orig.ID, Type: "kairo.dup.batch"},
			{ID: fresh, Type: "kairo.dup.batch"},
		})
		if err != nil {
			t.Fatalf("%s: PublishBatch: %v", when, err)
		}
		if res[0].Duplicate || res[0].Seq <= last || !res[1].Duplicate || res[1].Seq != first.Seq ||
			!res[2].Duplicate || res[2].Seq != res[0].Seq {
			t.Fatalf("%s: batch with duplicates gave %+v", when, res)
		}
		last = res[0].Seq
		n := 0
		b.Replay(Ctx(t), bus.Query{}, func(ev *abi.Event) error {
			if ev.ID == orig.ID || ev.ID == odd.ID || ev.ID == fresh {
				n++
			}
			return nil
		})
		if n != 3 {
			t.Fatalf("%s: %d events of the three IDs are stored, want 3", when, n)
		}
	}
	check("at once")
	if cs.AfterDupWindow != nil {
		cs.AfterDupWindow()
		check("past the duplicate window")
	}
	if !cs.Durable {
		return
	}
	closed = true
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = bus.New(cs.Open(t, dir), bus.Config{})
	closed = false
	check("after a reopen")
}

// Subscribers see every event once, in order: live ones, and one so slow
// that it falls back to reading the store.
func conformSubscriptions(t *testing.T, cs ConformanceStore) {
	b := bus.New(cs.Open(t, t.TempDir()), bus.Config{SubscriberBuffer: 16})
	defer b.Close()
	PublishN(t, b, "kairo.sub.before", 10)
	live := NewCollector()
	Subscribe(t, b, "kairo.sub.>", bus.SubscribeConfig{}, live.Handle)
	fromStart := NewCollector()
	Subscribe(t, b, "kairo.sub.>", bus.SubscribeConfig{FromSeq: 1}, fromStart.Handle)
	release := make(chan struct{})
	slow := NewCollector()
	Subscribe(t, b, "kairo.*.during", bus.SubscribeConfig{}, func(evs []abi.Event) error {
		<-release
		return slow.Handle(evs)
	})

	const publishers, each = 4, 250
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			acks := make([]*bus.Ack, each)
			for i := range each {
				a, err := b.PublishAsync(&abi.Event{Type: "kairo.sub.during", Data: Payload(t, p*each+i)})
				if err != nil {
					t.Errorf("PublishAsync: %v", err)
					return
				}
				acks[i] = a
			}
			for _, a := range acks {
				if _, err := a.Wait(Ctx(t)); err != nil {
					t.Errorf("ack: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	close(release)
	const n = publishers * each
	checkOnce := func(name string, evs []abi.Event, want int) {
		t.Helper()
		if len(evs) != want {
			t.Fatalf("%s subscriber got %d events, want %d", name, len(evs), want)
		}
		seen := map[string]bool{}
		for i, ev := range evs {
			if i > 0 && ev.Seq <= evs[i-1].Seq {
				t.Fatalf("%s subscriber: seq %d after %d", name, ev.Seq, evs[i-1].Seq)
			}
			seen[fmt.Sprint(ev.Type, PayloadInt(t, &ev))] = true
		}
		if len(seen) != want {
			t.Fatalf("%s subscriber saw %d distinct events of %d", name, len(seen), want)
		}
	}
	checkOnce("live", live.Wait(t, n), n)
	checkOnce("from seq 1", fromStart.Wait(t, n+10), n+10)
	checkOnce("slow", slow.Wait(t, n), n)
	time.Sleep(50 * time.Millisecond) // nothing more arrives
	checkOnce("live", live.Events(), n)
	checkOnce("slow", slow.Events(), n)
}

// A store closed and opened again holds every event as it was, and goes
// on after the last sequence number.
func conformReopen(t *testing.T, cs ConformanceStore) {
	if !cs.Durable {
		t.Skip("the store keeps nothing across a reopen")
	}
	dir := t.TempDir()
	b := bus.New(cs.Open(t, dir), bus.Config{})
	all := conformEvents(t, b)
	last := b.LastSeq()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = bus.New(cs.Open(t, dir), bus.Config{})
	defer b.Close()
	if got := b.LastSeq(); got != last {
		t.Fatalf("LastSeq after reopen = %d, want %d", got, last)
	}
	got := ReplayAll(t, b, bus.Query{})
	if len(got) != len(all) {
		t.Fatalf("replayed %d events after reopen, want %d", len(got), len(all))
	}
	for i := range got {
		SameEvent(t, fmt.Sprintf("event %d after reopen", i), got[i], all[i])
	}
	if res := MustPublish(t, b, &abi.Event{Type: "kairo.test.after"}); res.Seq <= last {
		t.Fatalf("publish after reopen got seq %d, want more than %d", res.Seq, last)
	}
}

// A full store refuses with an error that says so and what to do; the
// events it had stay readable, and once it has room it takes events again.
func conformFull(t *testing.T, cs ConformanceStore) {
	if cs.Full == nil {
		t.Skip("the store has no bound to reach")
	}
	s, free := cs.Full(t)
	defer func() { s.Close() }()
	stored := 0
	var err error
	for i := 0; i < 1_000_000; i++ {
		ev := StoreEvent(t, fmt.Sprintf("full-%d", i), i)
		ev.Data = Payload(t, strings.Repeat("x", 1000))
		if err = s.Append([]*abi.Event{ev}, nil, make([]bool, 1)); err != nil {
			break
		}
		stored++
	}
	if !bus.IsDiskFull(err) {
		t.Fatalf("a full store refused with %v; want an error IsDiskFull recognises", err)
	}
	if !strings.Contains(err.Error(), "full") {
		t.Fatalf("the refusal %q does not say the store is full", err)
	}
	if cs.FullSays != "" && !strings.Contains(err.Error(), cs.FullSays) {
		t.Fatalf("the refusal %q does not name the limit", err)
	}
	if n := len(ScanAll(t, s, bus.Query{})); n < stored {
		t.Fatalf("a full store reads %d of its %d events", n, stored)
	}
	free()
	AppendOrFail(t, s, []*abi.Event{StoreEvent(t, "after-full", 0)}, true)
}
