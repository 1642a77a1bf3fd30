package bus_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
	"github.com/kairo-os/kairo/kernel/bus/internal/hook"
	"github.com/kairo-os/kairo/kernel/bus/jetstream"
	"github.com/kairo-os/kairo/kernel/bus/sqlite"

	"github.com/kairo-os/kairo/abi"
)

// storeKinds are the stores every bus test runs over.
var storeKinds = []struct {
	name string
	open func(t testing.TB) bus.Store
}{
	{"memory", func(t testing.TB) bus.Store { return bus.NewMemoryStore(0) }},
	{"sqlite", func(t testing.TB) bus.Store { return openSQLite(t, filepath.Join(t.TempDir(), "events.db")) }},
	{"jetstream", func(t testing.TB) bus.Store {
		opts := jetstream.Config{Embedded: true, Dir: t.TempDir()}
		s, err := jetstream.Open(opts)
		if err != nil {
			t.Fatalf("jetstream.Open(%+v): %v", opts, err)
		}
		return s
	}},
}

func openSQLite(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(path, sqlite.Config{})
	if err != nil {
		t.Fatalf("sqlite.Open(%s): %v", path, err)
	}
	return s
}

// forEachStore runs fn as a subtest per store kind.
func forEachStore(t *testing.T, fn func(t *testing.T, open func(testing.TB) bus.Store)) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) { fn(t, k.open) })
	}
}

func TestPublishAssignsSeqAndFills(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		b := bustest.NewBus(t, open, bus.Config{Source: "unit"})
		before := time.Now()
		var sent []*abi.Event
		for i := range 10 {
			ev := &abi.Event{Type: "kairo.test.fill", Data: bustest.Payload(t, i), Seq: 99}
			res := bustest.MustPublish(t, b, ev)
			if res.Seq != uint64(i+1) || res.Duplicate {
				t.Fatalf("publish %d: got %+v, want seq %d, not a duplicate", i, res, i+1)
			}
			if ev.Seq != res.Seq {
				t.Errorf("ev.Seq = %d, want %d", ev.Seq, res.Seq)
			}
			bus.CheckV7(t, ev.ID)
			if ev.Time.Before(before) || ev.Time.After(time.Now()) {
				t.Errorf("ev.Time = %v, want the time of publishing", ev.Time)
			}
			if ev.Source != "unit" {
				t.Errorf("ev.Source = %q, want the bus default %q", ev.Source, "unit")
			}
			sent = append(sent, ev)
		}
		// Fields the publisher set are kept.
		given := &abi.Event{
			ID:            "order-42",
			Type:          "kairo.test.given",
			Source:        "cli",
			Time:          time.Date(2024, 5, 6, 7, 8, 9, 10, time.UTC),
			Data:          bustest.Payload(t, map[string]string{"k": "v"}),
			CorrelationID: "corr",
			CausationID:   sent[3].ID,
		}
		want := *given
		if res := bustest.MustPublish(t, b, given); res.Seq != 11 {
			t.Fatalf("publish with fields set: seq %d, want 11", res.Seq)
		}
		if given.ID != want.ID || given.Source != want.Source || !given.Time.Equal(want.Time) {
			t.Errorf("publish changed fields the caller set: %+v, want %+v", given, want)
		}
		sent = append(sent, given)

		if got := b.LastSeq(); got != 11 {
			t.Errorf("LastSeq = %d, want 11", got)
		}
		stored := bustest.ReplayAll(t, b, bus.Query{})
		if len(stored) != len(sent) {
			t.Fatalf("replay returned %d events, want %d", len(stored), len(sent))
		}
		for i, ev := range stored {
			w := sent[i]
			if ev.Seq != uint64(i+1) || ev.ID != w.ID || ev.Type != w.Type || ev.Source != w.Source ||
				!ev.Time.Equal(w.Time) || string(ev.Data) != string(w.Data) ||
				ev.CorrelationID != w.CorrelationID || ev.CausationID != w.CausationID {
				t.Errorf("stored event %d = %+v, want %+v", i, ev, *w)
			}
		}
		if st := b.Stats(); st.Published != 11 || st.Duplicates != 0 {
			t.Errorf("Stats = %+v, want 11 published, no duplicates", st)
		}
	})
}

func TestPublishDefaultSource(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		b := bustest.NewBus(t, open, bus.Config{})
		ev := &abi.Event{Type: "kairo.x"}
		bustest.MustPublish(t, b, ev)
		if ev.Source != "kairo" {
			t.Errorf("Source = %q, want the default %q", ev.Source, "kairo")
		}
	})
}

func TestPublishRejectsInvalidSubject(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		b := bustest.NewBus(t, open, bus.Config{})
		for _, s := range []string{"", "kairo..x", ".kairo", "kairo.", "kairo.*", "kairo.>", ">", "kairo.a b", "kairo.a*"} {
			ev := &abi.Event{Type: s}
			_, err := b.Publish(bustest.Ctx(t), ev)
			var se *abi.SubjectError
			if !errors.As(err, &se) {
				t.Errorf("Publish(%q) = %v, want a *SubjectError", s, err)
				continue
			}
			if se.Subject != s {
				t.Errorf("Publish(%q): error names %q", s, se.Subject)
			}
			if _, err := b.PublishAsync(ev); !errors.As(err, &se) {
				t.Errorf("PublishAsync(%q) = %v, want a *SubjectError", s, err)
			}
		}
		if got := b.LastSeq(); got != 0 {
			t.Fatalf("LastSeq = %d after only invalid publishes, want 0", got)
		}
		if res := bustest.MustPublish(t, b, &abi.Event{Type: "kairo.ok"}); res.Seq != 1 {
			t.Errorf("first valid publish got seq %d, want 1", res.Seq)
		}
		_, err := b.Subscribe(context.Background(), "kairo.>.x", bus.SubscribeConfig{}, bustest.NewCollector().Handle)
		var se *abi.SubjectError
		if !errors.As(err, &se) {
			t.Errorf("Subscribe with an invalid pattern = %v, want a *SubjectError", err)
		}
	})
}

func TestPublishDuplicateID(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		b := bustest.NewBus(t, open, bus.Config{})
		const upper = "0192D6C4-7A2E-7B3C-8D4E-5F6A7B8C9D0E"
		const lower = "0192d6c4-7a2e-7b3c-8d4e-5f6a7b8c9d0e"
		first := []*abi.Event{
			{Type: "kairo.dup.a", Data: bustest.Payload(t, 1)},
			{ID: "order-42", Type: "kairo.dup.b", Data: bustest.Payload(t, 2)}, // text id
			{ID: lower, Type: "kairo.dup.c", Data: bustest.Payload(t, 3)},
			{ID: upper, Type: "kairo.dup.d", Data: bustest.Payload(t, 4)}, // a different id: ids are compared as given
		}
		for i, ev := range first {
			if res := bustest.MustPublish(t, b, ev); res.Seq != uint64(i+1) || res.Duplicate {
				t.Fatalf("publish %d: %+v", i, res)
			}
		}
		live := bustest.NewCollector()
		bustest.Subscribe(t, b, ">", bus.SubscribeConfig{}, live.Handle)

		for i, orig := range first {
			again := &abi.Event{ID: orig.ID, Type: "kairo.dup.other", Data: bustest.Payload(t, 100+i)}
			res := bustest.MustPublish(t, b, again)
			if !res.Duplicate || res.Seq != orig.Seq {
				t.Errorf("republishing %q: got %+v, want duplicate of seq %d", orig.ID, res, orig.Seq)
			}
			if again.Seq != orig.Seq {
				t.Errorf("republished event's Seq = %d, want %d", again.Seq, orig.Seq)
			}
			// Through the async path too.
			a, err := b.PublishAsync(&abi.Event{ID: orig.ID, Type: "kairo.dup.other"})
			if err != nil {
				t.Fatal(err)
			}
			if res := bustest.WaitAcks(t, []*bus.Ack{a})[0]; !res.Duplicate || res.Seq != orig.Seq {
				t.Errorf("async republish of %q: got %+v, want duplicate of seq %d", orig.ID, res, orig.Seq)
			}
		}
		if got := b.LastSeq(); got != 4 {
			t.Errorf("LastSeq = %d after duplicates, want 4", got)
		}
		stored := bustest.ReplayAll(t, b, bus.Query{})
		bustest.CheckDense(t, stored, 1)
		for i, ev := range stored {
			if ev.ID != first[i].ID || ev.Type != first[i].Type || bustest.PayloadInt(t, &ev) != i+1 {
				t.Errorf("stored event %d = %+v: a duplicate replaced the original", i, ev)
			}
		}
		// Subscribers never see duplicates: the next event they get is the
		// next new one.
		bustest.MustPublish(t, b, &abi.Event{Type: "kairo.dup.sentinel"})
		if got := live.Wait(t, 1); len(got) != 1 || got[0].Type != "kairo.dup.sentinel" || got[0].Seq != 5 {
			t.Errorf("live subscriber got %+v, want only the sentinel at seq 5", got)
		}
		if st := b.Stats(); st.Duplicates != 8 || st.Published != 5 {
			t.Errorf("Stats = %+v, want 8 duplicates, 5 published", st)
		}
	})
}

// Duplicates inside one group-commit batch and across batches: each ID is
// stored once, every ack for it reports that one seq, and seqs stay dense.
func TestPublishDuplicatesInBatches(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		b := bustest.NewBus(t, open, bus.Config{})
		const pre = 40
		var preIDs []string
		for i := range pre {
			id := fmt.Sprintf("pre-%d", i)
			if i%2 == 0 {
				id = abi.NewID()
			}
			preIDs = append(preIDs, id)
		}
		preAcks := make([]*bus.Ack, pre)
		for i, id := range preIDs {
			a, err := b.PublishAsync(&abi.Event{ID: id, Type: "kairo.batch.pre", Data: bustest.Payload(t, -1-i)})
			if err != nil {
				t.Fatal(err)
			}
			preAcks[i] = a
		}
		preSeq := map[string]uint64{}
		for i, res := range bustest.WaitAcks(t, preAcks) {
			preSeq[preIDs[i]] = res.Seq
		}

		// 8 publishers, 300 events: new ids (UUID and text) that repeat
		// within the set, and ids stored before.
		var newIDs []string
		for i := range 120 {
			id := fmt.Sprintf("new-%d", i)
			if i%3 == 0 {
				id = abi.NewID()
			}
			newIDs = append(newIDs, id)
		}
		const publishers, each = 8, 300 / 8
		evs := make([][]*abi.Event, publishers)
		for p := range publishers {
			for k := range each {
				n := p*each + k
				var id string
				switch {
				case n%7 == 3:
					id = preIDs[n%pre]
				default:
					id = newIDs[(n*31)%len(newIDs)]
				}
				evs[p] = append(evs[p], &abi.Event{ID: id, Type: "kairo.batch.new", Data: bustest.Payload(t, n)})
			}
		}

		// With group commit, stall the flusher so all 300 land in one
		// batch: it takes a first batch and then waits for b.mu.
		groupCommit := b.Store().GroupCommit()
		if groupCommit {
			b.Mu().Lock()
			if _, err := b.PublishAsync(&abi.Event{Type: "kairo.batch.first"}); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(bustest.WaitLimit)
			for {
				taken := !b.Queued()
				if taken {
					break
				}
				if time.Now().After(deadline) {
					b.Mu().Unlock()
					t.Fatal("the flusher never took the first batch")
				}
				time.Sleep(time.Millisecond)
			}
		}
		acks := make([][]*bus.Ack, publishers)
		var wg sync.WaitGroup
		errs := make(chan error, publishers)
		for p := range publishers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, ev := range evs[p] {
					a, err := b.PublishAsync(ev)
					if err != nil {
						errs <- err
						return
					}
					acks[p] = append(acks[p], a)
				}
			}()
		}
		wg.Wait()
		if groupCommit {
			bt := acks[0][0].Batch()
			for p := range acks {
				for _, a := range acks[p] {
					if a.Batch() != bt {
						t.Errorf("events were split over batches; want one batch")
					}
				}
			}
			if bt.Len() <= hook.SQLiteRowsPerInsert*2 {
				t.Errorf("batch holds %d events, want more than %d", bt.Len(), hook.SQLiteRowsPerInsert*2)
			}
			b.Mu().Unlock()
		}
		close(errs)
		for err := range errs {
			t.Fatalf("PublishAsync: %v", err)
		}

		// Every ack for an id agrees; exactly one of them is new unless
		// the id was stored before.
		type seen struct {
			seq    uint64
			fresh  int
			winner int
		}
		byID := map[string]*seen{}
		dups := 0
		for p := range acks {
			for k, res := range bustest.WaitAcks(t, acks[p]) {
				ev := evs[p][k]
				s := byID[ev.ID]
				if s == nil {
					s = &seen{seq: res.Seq}
					byID[ev.ID] = s
				}
				if res.Seq != s.seq {
					t.Errorf("id %q acknowledged at seq %d and %d", ev.ID, s.seq, res.Seq)
				}
				if res.Duplicate {
					dups++
				} else {
					s.fresh++
					s.winner = bustest.PayloadInt(t, ev)
				}
			}
		}
		for id, s := range byID {
			if old, ok := preSeq[id]; ok {
				if s.fresh != 0 || s.seq != old {
					t.Errorf("id %q stored before at %d: acks say seq %d, %d new", id, old, s.seq, s.fresh)
				}
			} else if s.fresh != 1 {
				t.Errorf("id %q: %d acks say new, want exactly 1", id, s.fresh)
			}
		}

		stored := bustest.ReplayAll(t, b, bus.Query{})
		bustest.CheckDense(t, stored, 1)
		wantLast := pre + len(newIDs)
		if groupCommit {
			wantLast++ // kairo.batch.first
		}
		if got := b.LastSeq(); got != uint64(wantLast) || len(stored) != wantLast {
			t.Fatalf("LastSeq = %d, stored %d, want %d: one row per distinct id", got, len(stored), wantLast)
		}
		ids := map[string]bool{}
		for _, ev := range stored {
			if ids[ev.ID] {
				t.Errorf("id %q stored twice", ev.ID)
			}
			ids[ev.ID] = true
			if ev.Type == "kairo.batch.new" {
				s := byID[ev.ID]
				if s == nil || s.seq != ev.Seq || s.winner != bustest.PayloadInt(t, &ev) {
					t.Errorf("stored %q at seq %d is not the event acknowledged as new", ev.ID, ev.Seq)
				}
			}
		}
		if st := b.Stats(); st.Duplicates != uint64(dups) {
			t.Errorf("Stats.Duplicates = %d, want %d", st.Duplicates, dups)
		}
	})
}

func TestSubscribeFromNow(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		b := bustest.NewBus(t, open, bus.Config{})
		bustest.PublishN(t, b, "kairo.now.before", 5)
		c := bustest.NewCollector()
		sub := bustest.Subscribe(t, b, ">", bus.SubscribeConfig{}, c.Handle)
		if sub.Pattern() != ">" {
			t.Errorf("Pattern() = %q", sub.Pattern())
		}
		bustest.PublishN(t, b, "kairo.now.after", 5)
		got := c.Wait(t, 5)
		bustest.CheckDense(t, got, 6)
		for _, ev := range got {
			if ev.Type != "kairo.now.after" {
				t.Errorf("subscriber from now got %s seq %d", ev.Type, ev.Seq)
			}
		}
		bustest.MustPublish(t, b, &abi.Event{Type: "kairo.now.sentinel"})
		if got := c.Wait(t, 6); len(got) != 6 || got[5].Seq != 11 {
			t.Errorf("got %d events, last seq %d; want 6 ending at 11", len(got), got[len(got)-1].Seq)
		}
	})
}

// A subscription from a stored seq replays, then continues live while
// publishers keep going: no gap, no repeat.
func TestSubscribeFromSeqThenLive(t *testing.T) {
	for _, buf := range []int{0, 4} {
		t.Run(fmt.Sprintf("buffer=%d", buf), func(t *testing.T) {
			forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
				b := bustest.NewBus(t, open, bus.Config{SubscriberBuffer: buf})
				const stored, live = 300, 700
				bustest.PublishN(t, b, "kairo.replay.stored", stored)

				done := make(chan struct{})
				go func() {
					defer close(done)
					for i := range live {
						ev := &abi.Event{Type: "kairo.replay.live", Data: bustest.Payload(t, stored+i)}
						if _, err := b.Publish(context.Background(), ev); err != nil {
							t.Errorf("Publish: %v", err)
							return
						}
					}
				}()
				from1, from150 := bustest.NewCollector(), bustest.NewCollector()
				bustest.Subscribe(t, b, ">", bus.SubscribeConfig{FromSeq: 1}, from1.Handle)
				bustest.Subscribe(t, b, "kairo.>", bus.SubscribeConfig{FromSeq: 150}, from150.Handle)
				bustest.WaitDone(t, "publisher", done)

				for _, c := range []struct {
					c    *bustest.Collector
					from uint64
				}{{from1, 1}, {from150, 150}} {
					want := stored + live - int(c.from) + 1
					got := c.c.Wait(t, want)
					if len(got) != want {
						t.Fatalf("from %d: got %d events, want %d", c.from, len(got), want)
					}
					bustest.CheckDense(t, got, c.from)
					for _, ev := range got {
						if n := bustest.PayloadInt(t, &ev); uint64(n) != ev.Seq-1 {
							t.Fatalf("seq %d carries event %d", ev.Seq, n)
						}
					}
				}
			})
		})
	}
}

// A FromSeq beyond the last stored event starts there once it is published.
func TestSubscribeFromFutureSeq(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		b := bustest.NewBus(t, open, bus.Config{})
		bustest.PublishN(t, b, "kairo.future", 5)
		c := bustest.NewCollector()
		bustest.Subscribe(t, b, ">", bus.SubscribeConfig{FromSeq: 8}, c.Handle)
		bustest.PublishN(t, b, "kairo.future", 5)
		got := c.Wait(t, 3)
		if len(got) != 3 {
			t.Fatalf("got %d events, want 3", len(got))
		}
		bustest.CheckDense(t, got, 8)
	})
}

func TestSubscribePattern(t *testing.T) {
	subjects := []string{
		"kairo.user.message", "kairo.agent.main.message", "kairo.agent.main.thought",
		"kairo.process.exited", "kairo.process.output.throttled", "kairo.agent.x.message",
		"kairo.tool.result", "other.thing",
	}
	want := map[string][]string{
		"kairo.agent.*.message": {"kairo.agent.main.message", "kairo.agent.x.message"},
		"kairo.process.>":       {"kairo.process.exited", "kairo.process.output.throttled"},
		"kairo.user.message":    {"kairo.user.message"},
		"*.thing":               {"other.thing"},
		"kairo.*.*":             {"kairo.user.message", "kairo.process.exited", "kairo.tool.result"},
		"kairo.>":               subjects[:7],
	}
	// Each subject is published rounds times; half before the
	// subscriptions from seq 1 start (read from the store), half after.
	const rounds = 10
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		b := bustest.NewBus(t, open, bus.Config{})
		publish := func() {
			for _, s := range subjects {
				bustest.MustPublish(t, b, &abi.Event{Type: s})
			}
		}
		live := map[string]*bustest.Collector{}
		for p := range want {
			live[p] = bustest.NewCollector()
			bustest.Subscribe(t, b, p, bus.SubscribeConfig{}, live[p].Handle)
		}
		for range rounds / 2 {
			publish()
		}
		replayed := map[string]*bustest.Collector{}
		for p := range want {
			replayed[p] = bustest.NewCollector()
			bustest.Subscribe(t, b, p, bus.SubscribeConfig{FromSeq: 1}, replayed[p].Handle)
		}
		for range rounds / 2 {
			publish()
		}
		for p, subs := range want {
			var wantTypes []string
			for range rounds {
				wantTypes = append(wantTypes, subs...)
			}
			slices.Sort(wantTypes)
			check := func(how string, got []abi.Event) {
				t.Helper()
				var types []string
				for i, ev := range got {
					types = append(types, ev.Type)
					if i > 0 && ev.Seq <= got[i-1].Seq {
						t.Errorf("%s %q: seq %d after %d", how, p, ev.Seq, got[i-1].Seq)
					}
				}
				slices.Sort(types)
				if !slices.Equal(types, wantTypes) {
					t.Errorf("%s %q got %v, want %v", how, p, types, wantTypes)
				}
			}
			check("live", live[p].Wait(t, len(wantTypes)))
			check("from seq 1", replayed[p].Wait(t, len(wantTypes)))
			check("replay", bustest.ReplayAll(t, b, bus.Query{Pattern: abi.MustCompilePattern(p)}))
		}
		// Wait for one more event everywhere, then check nothing extra came.
		bustest.MustPublish(t, b, &abi.Event{Type: "other.thing"})
		n := len(live["*.thing"].Wait(t, rounds+1))
		if n != rounds+1 {
			t.Errorf("*.thing got %d events, want %d", n, rounds+1)
		}
	})
}

// A subscriber whose handler is stuck does not hold up publishers or other
// subscribers, and once released gets every event exactly once, in order,
// from the store.
func TestSlowSubscriber(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		b := bustest.NewBus(t, open, bus.Config{SubscriberBuffer: 16})
		entered := make(chan struct{})
		release := make(chan struct{})
		slow := bustest.NewCollector()
		var once sync.Once
		bustest.Subscribe(t, b, "kairo.>", bus.SubscribeConfig{}, func(evs []abi.Event) error {
			once.Do(func() {
				close(entered)
				<-release
			})
			return slow.Handle(evs)
		})
		fast := bustest.NewCollector()
		bustest.Subscribe(t, b, "kairo.>", bus.SubscribeConfig{}, fast.Handle)

		bustest.MustPublish(t, b, &abi.Event{Type: "kairo.slow.first"})
		bustest.WaitDone(t, "first delivery", entered)

		const n = 1000
		published := make(chan struct{})
		go func() {
			defer close(published)
			for i := range n {
				if _, err := b.Publish(context.Background(), &abi.Event{Type: "kairo.slow.event", Data: bustest.Payload(t, i)}); err != nil {
					t.Errorf("Publish: %v", err)
					return
				}
			}
		}()
		// Publishing completes, and the fast subscriber gets everything,
		// while the slow handler is still stuck.
		bustest.WaitDone(t, "publishing while a handler is stuck", published)
		bustest.CheckDense(t, fast.Wait(t, n+1), 1)
		if got := len(slow.Events()); got != 0 {
			t.Fatalf("stuck handler returned %d events", got)
		}
		// The fast subscriber shares the small buffer and may still be
		// finishing a catch-up of its own.
		bustest.Eventually(t, "only the stuck subscriber is lagging", func() bool { return b.Stats().Lagging == 1 })

		close(release)
		got := slow.Wait(t, n+1)
		if len(got) != n+1 {
			t.Fatalf("slow subscriber got %d events, want %d", len(got), n+1)
		}
		bustest.CheckDense(t, got, 1)
		st := b.Stats()
		if st.CatchUps == 0 {
			t.Errorf("Stats.CatchUps = 0, want the slow subscriber to have read the store")
		}
		// It rejoins the live stream.
		bustest.MustPublish(t, b, &abi.Event{Type: "kairo.slow.after"})
		if got := slow.Wait(t, n+2); len(got) != n+2 || got[n+1].Type != "kairo.slow.after" {
			t.Errorf("after catching up: got %d events, want %d ending with kairo.slow.after", len(got), n+2)
		}
		bustest.Eventually(t, "the slow subscriber is no longer lagging", func() bool { return b.Stats().Lagging == 0 })
	})
}

func TestConcurrentPublishers(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		b := bustest.NewBus(t, open, bus.Config{})
		const publishers, each = 8, 500
		subs := []*bustest.Collector{bustest.NewCollector(), bustest.NewCollector()}
		bustest.Subscribe(t, b, "kairo.>", bus.SubscribeConfig{}, subs[0].Handle)
		bustest.Subscribe(t, b, ">", bus.SubscribeConfig{}, subs[1].Handle)

		var wg sync.WaitGroup
		for p := range publishers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range each {
					ev := &abi.Event{Type: fmt.Sprintf("kairo.pub.p%d", p), Data: bustest.Payload(t, k)}
					if _, err := b.Publish(context.Background(), ev); err != nil {
						t.Errorf("publisher %d: %v", p, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		const total = publishers * each
		for i, c := range subs {
			got := c.Wait(t, total)
			if len(got) != total {
				t.Fatalf("subscriber %d got %d events, want %d", i, len(got), total)
			}
			bustest.CheckDense(t, got, 1)
			// Each publisher's events arrive in the order it published them,
			// each named by the bus, none like another.
			next := map[string]int{}
			ids := make(map[string]bool, total)
			for _, ev := range got {
				bus.CheckV7(t, ev.ID)
				if ids[ev.ID] {
					t.Fatalf("subscriber %d: id %s given twice", i, ev.ID)
				}
				ids[ev.ID] = true
				if k := bustest.PayloadInt(t, &ev); k != next[ev.Type] {
					t.Fatalf("subscriber %d: %s event %d arrived when %d was due", i, ev.Type, k, next[ev.Type])
				}
				next[ev.Type]++
			}
		}
		if got := b.LastSeq(); got != total {
			t.Errorf("LastSeq = %d, want %d", got, total)
		}
		if st := b.Stats(); st.Published != total {
			t.Errorf("Stats.Published = %d, want %d", st.Published, total)
		}
		// Delivered is counted just after each handler call returns.
		bustest.Eventually(t, fmt.Sprintf("Stats.Delivered reaches %d", 2*total), func() bool { return b.Stats().Delivered == 2*total })
	})
}

// Acks queued before Close complete; afterwards every call says the bus is
// closed.
func TestCloseCompletesQueuedAcks(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		store := open(t)
		b := bus.New(store, bus.Config{})
		const n = 2000
		acks := make([]*bus.Ack, n)
		for i := range n {
			a, err := b.PublishAsync(&abi.Event{Type: "kairo.close.queued", Data: bustest.Payload(t, i)})
			if err != nil {
				t.Fatal(err)
			}
			acks[i] = a
		}
		if err := b.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		for i, a := range acks {
			select {
			case <-a.Done():
			default:
				t.Fatalf("ack %d still pending after Close returned", i)
			}
			res, err := a.Wait(context.Background())
			if err != nil || res.Seq != uint64(i+1) {
				t.Fatalf("ack %d = %+v, %v; want seq %d", i, res, err, i+1)
			}
		}

		if _, err := b.PublishAsync(&abi.Event{Type: "kairo.close.after"}); !errors.Is(err, bus.ErrClosed) {
			t.Errorf("PublishAsync after Close = %v, want ErrClosed", err)
		}
		if _, err := b.Publish(context.Background(), &abi.Event{Type: "kairo.close.after"}); !errors.Is(err, bus.ErrClosed) {
			t.Errorf("Publish after Close = %v, want ErrClosed", err)
		}
		if err := b.Replay(context.Background(), bus.Query{}, func(*abi.Event) error { return nil }); !errors.Is(err, bus.ErrClosed) {
			t.Errorf("Replay after Close = %v, want ErrClosed", err)
		}
		if _, err := b.Subscribe(context.Background(), ">", bus.SubscribeConfig{}, bustest.NewCollector().Handle); !errors.Is(err, bus.ErrClosed) {
			t.Errorf("Subscribe after Close = %v, want ErrClosed", err)
		}
		if err := b.Close(); err != nil {
			t.Errorf("second Close = %v, want nil", err)
		}
		if s, ok := store.(*sqlite.Store); ok {
			re := openSQLite(t, strings.TrimPrefix(s.Describe(), "sqlite:"))
			defer re.Close()
			if got := re.LastSeq(); got != n {
				t.Errorf("reopened store has LastSeq %d, want %d", got, n)
			}
		}
	})
}

// Publishers racing with Close: every publish either fails with ErrClosed
// or is acknowledged; none waits forever.
func TestCloseRacingPublishers(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		b := bus.New(open(t), bus.Config{MaxPending: 64})
		const publishers = 8
		acks := make([][]*bus.Ack, publishers)
		started := make(chan struct{}, publishers)
		var wg sync.WaitGroup
		for p := range publishers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					a, err := b.PublishAsync(&abi.Event{Type: "kairo.close.race"})
					if err != nil {
						if !errors.Is(err, bus.ErrClosed) {
							t.Errorf("PublishAsync: %v", err)
						}
						return
					}
					acks[p] = append(acks[p], a)
					if i == 100 {
						started <- struct{}{}
					}
				}
			}()
		}
		for range publishers {
			<-started
		}
		if err := b.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wg.Wait()
		var seqs []uint64
		for p := range acks {
			for i, a := range acks[p] {
				select {
				case <-a.Done():
				case <-time.After(bustest.WaitLimit):
					t.Fatalf("publisher %d ack %d never completed", p, i)
				}
				res, err := a.Wait(context.Background())
				if err != nil {
					t.Fatalf("publisher %d ack %d: %v", p, i, err)
				}
				seqs = append(seqs, res.Seq)
			}
		}
		slices.Sort(seqs)
		for i, s := range seqs {
			if s != uint64(i+1) {
				t.Fatalf("acknowledged seqs are not 1..%d: position %d holds %d", len(seqs), i, s)
			}
		}
	})
}

func TestSubscriptionEnds(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		b := bustest.NewBus(t, open, bus.Config{})

		t.Run("Close", func(t *testing.T) {
			calls := 0
			sub := bustest.Subscribe(t, b, ">", bus.SubscribeConfig{}, func([]abi.Event) error { calls++; return nil })
			if st := b.Stats(); st.Subscriptions != 1 {
				t.Fatalf("Stats.Subscriptions = %d, want 1", st.Subscriptions)
			}
			sub.Close()
			select {
			case <-sub.Done():
			default:
				t.Fatal("Done not closed after Close returned")
			}
			if err := sub.Err(); err != nil {
				t.Errorf("Err after Close = %v, want nil", err)
			}
			if st := b.Stats(); st.Subscriptions != 0 {
				t.Errorf("Stats.Subscriptions = %d after Close, want 0", st.Subscriptions)
			}
			bustest.PublishN(t, b, "kairo.ends.close", 3)
			if calls != 0 {
				t.Errorf("closed subscription's handler ran %d times", calls)
			}
			sub.Close() // twice is fine
		})

		t.Run("context", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			sub, err := b.Subscribe(ctx, ">", bus.SubscribeConfig{}, bustest.NewCollector().Handle)
			if err != nil {
				t.Fatal(err)
			}
			cancel()
			bustest.WaitDone(t, "subscription after its context ended", sub.Done())
			if err := sub.Err(); err != nil {
				t.Errorf("Err after the context ended = %v, want nil", err)
			}
		})

		t.Run("handler error", func(t *testing.T) {
			boom := errors.New("boom")
			calls := 0
			sub, err := b.Subscribe(context.Background(), ">", bus.SubscribeConfig{}, func([]abi.Event) error { calls++; return boom })
			if err != nil {
				t.Fatal(err)
			}
			bustest.PublishN(t, b, "kairo.ends.err", 2)
			bustest.WaitDone(t, "subscription whose handler failed", sub.Done())
			if err := sub.Err(); !errors.Is(err, boom) {
				t.Errorf("Err = %v, want the handler's error", err)
			}
			bustest.PublishN(t, b, "kairo.ends.err", 2)
			if calls != 1 {
				t.Errorf("failed handler called %d times, want 1", calls)
			}
		})

		// Closing a subscription while it reads the store must not hang.
		t.Run("while catching up", func(t *testing.T) {
			bustest.PublishN(t, b, "kairo.ends.backlog", 3000)
			entered, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			sub, err := b.Subscribe(context.Background(), ">", bus.SubscribeConfig{FromSeq: 1}, func([]abi.Event) error {
				once.Do(func() { close(entered); <-release })
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			bustest.WaitDone(t, "first catch-up delivery", entered)
			closed := make(chan struct{})
			go func() { sub.Close(); close(closed) }()
			bustest.WaitDone(t, "context cancel", sub.Ctx().Done())
			close(release)
			bustest.WaitDone(t, "Close of a subscription catching up", closed)
		})
	})
}

// Closing the bus ends its subscriptions.
func TestBusCloseEndsSubscriptions(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		b := bus.New(open(t), bus.Config{})
		c := bustest.NewCollector()
		sub, err := b.Subscribe(context.Background(), ">", bus.SubscribeConfig{}, c.Handle)
		if err != nil {
			t.Fatal(err)
		}
		bustest.PublishN(t, b, "kairo.busclose", 3)
		c.Wait(t, 3)
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-sub.Done():
		default:
			t.Fatal("subscription still running after the bus closed")
		}
		if err := sub.Err(); err != nil {
			t.Errorf("Err = %v, want nil", err)
		}
	})
}
