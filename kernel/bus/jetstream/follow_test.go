package jetstream

import (
	"context"
	"fmt"
	"runtime"
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

// twoHosts starts a nats-server with JetStream on loopback and two buses,
// of hosts "a" and "b", each over its own store on one stream through it,
// as the kairo daemons of two hosts of a cluster share one; both are
// closed at the end of the test. opts.Host is replaced.
func twoHosts(t *testing.T, opts bus.Config) (a, b *bus.Bus) {
	t.Helper()
	port := freePorts(t, 1)[0]
	startNATS(t, port, t.TempDir())
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	open := func(host string) *bus.Bus {
		o := opts
		o.Host = host
		hb := bus.New(openJetStream(t, Config{URL: url, Stream: "HOSTS", Host: host}), o)
		t.Cleanup(func() {
			if err := hb.Close(); err != nil {
				t.Errorf("Close of host %s's bus: %v", host, err)
			}
		})
		return hb
	}
	return open("a"), open("b")
}

// withHost is opts for the store of host.
func withHost(opts Config, host string) Config {
	opts.Host = host
	return opts
}

// settle waits a moment and fails if c received more than n events: what
// was awaited came once, and nothing after it.
func settle(t *testing.T, what string, c *bustest.Collector, n int) {
	t.Helper()
	time.Sleep(200 * time.Millisecond)
	if got := len(c.Events()); got != n {
		t.Fatalf("%s received %d events, want %d", what, got, n)
	}
}

// checkEvents fails unless evs come from host, each with the ID want
// names, in that order.
func checkEvents(t *testing.T, what string, evs []abi.Event, host string, want []string) {
	t.Helper()
	if len(evs) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(evs), len(want))
	}
	for i, ev := range evs {
		if ev.ID != want[i] || ev.Host != host {
			t.Fatalf("%s: event %d is %s from host %q, want %s from host %q", what, i, ev.ID, ev.Host, want[i], host)
		}
	}
}

// publishIDs publishes one event per id on subject, one at a time, and
// returns the ids.
func publishIDs(t *testing.T, b *bus.Bus, subject string, ids ...string) []string {
	t.Helper()
	for _, id := range ids {
		bustest.MustPublish(t, b, &abi.Event{ID: id, Type: subject, Data: bustest.Payload(t, id)})
	}
	return ids
}

func idRange(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return ids
}

// A subscriber on host b receives host a's events live, in order, each
// once and marked as a's, though b publishes nothing; so does one that
// starts from the store and joins the live stream. The control: what b
// publishes itself follows them as before.
func TestFollowLive(t *testing.T) {
	a, b := twoHosts(t, bus.Config{})
	got := bustest.NewCollector()
	bustest.Subscribe(t, b, ">", bus.SubscribeConfig{}, got.Handle)

	sent := publishIDs(t, a, "test.a", idRange("a", 20)...)
	checkEvents(t, "b's subscriber", got.Wait(t, len(sent)), "a", sent)
	late := bustest.NewCollector()
	bustest.Subscribe(t, b, ">", bus.SubscribeConfig{FromSeq: 1}, late.Handle)
	sent = append(sent, publishIDs(t, a, "test.a", idRange("a2", 20)...)...)
	for _, c := range []*bustest.Collector{got, late} {
		evs := c.Wait(t, len(sent))
		checkEvents(t, "b's subscriber", evs, "a", sent)
		bustest.CheckDense(t, evs, 1)
		settle(t, "b's subscriber", c, len(sent))
	}
	if st := b.Stats(); st.Followed != 40 || st.Published != 0 {
		t.Fatalf("b's stats: %d followed, %d published; want 40 and 0", st.Followed, st.Published)
	}

	own := publishIDs(t, b, "test.b", idRange("b", 5)...) // the control
	for _, c := range []*bustest.Collector{got, late} {
		evs := c.Wait(t, len(sent)+len(own))
		checkEvents(t, "b's own events", evs[len(sent):], "b", own)
		bustest.CheckDense(t, evs, 1)
		settle(t, "b's subscriber", c, len(sent)+len(own))
	}
}

// Both hosts publish at once, from several publishers each: a subscriber
// on either bus sees every event of both once, with dense seqs, and the
// replay of either store is the same sequence. The subscribers keep up
// with small buffers too, and when the bus leaves every subscriber to read
// others' events from the store itself.
func TestFollowInterleaved(t *testing.T) {
	for _, tc := range []struct {
		name   string
		buffer int
		read   uint64 // maxFollowRead
	}{
		{"live", 0, hook.MaxFollowRead},
		{"small buffers", 4, hook.MaxFollowRead},
		{"subscribers read the store", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Put back after the buses closed, which the cleanups of
			// twoHosts do, running before this one.
			t.Cleanup(func(n uint64) func() { return func() { hook.MaxFollowRead = n } }(hook.MaxFollowRead))
			hook.MaxFollowRead = tc.read
			a, b := twoHosts(t, bus.Config{SubscriberBuffer: tc.buffer})
			buses := map[string]*bus.Bus{"a": a, "b": b}
			got := map[string]*bustest.Collector{"a": bustest.NewCollector(), "b": bustest.NewCollector()}
			for host, hb := range buses {
				bustest.Subscribe(t, hb, ">", bus.SubscribeConfig{}, got[host].Handle)
			}

			const publishers, each = 3, 100
			var wg sync.WaitGroup
			for host, hb := range buses {
				for p := range publishers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						ctx := bustest.Ctx(t)
						for i := range each {
							ev := &abi.Event{ID: fmt.Sprintf("%s-%d-%03d", host, p, i), Type: "test." + host, Data: bustest.Payload(t, i)}
							if _, err := hb.Publish(ctx, ev); err != nil {
								t.Errorf("host %s publisher %d: %v", host, p, err)
								return
							}
						}
					}()
				}
			}
			wg.Wait()
			if t.Failed() {
				return
			}

			const total = 2 * publishers * each
			for host, hb := range buses { // the last appends of the other may be on their way
				bustest.Eventually(t, "host "+host+" has read every event", func() bool { return hb.LastSeq() == total })
			}
			replay := bustest.ReplayAll(t, a, bus.Query{})
			bustest.CheckDense(t, replay, 1)
			if len(replay) != total {
				t.Fatalf("a replays %d events, want %d", len(replay), total)
			}
			for _, ev := range replay {
				if ev.Type != "test."+ev.Host {
					t.Fatalf("event %s of type %s is marked as host %q's", ev.ID, ev.Type, ev.Host)
				}
			}
			if fromB := bustest.ReplayAll(t, b, bus.Query{}); !slices.EqualFunc(replay, fromB, func(x, y abi.Event) bool { return x.ID == y.ID && x.Seq == y.Seq }) {
				t.Fatalf("the replays of a and b differ")
			}
			for host, c := range got {
				evs := c.Wait(t, total)
				bustest.CheckDense(t, evs, 1)
				for i, ev := range evs {
					if ev.ID != replay[i].ID || ev.Host != replay[i].Host {
						t.Fatalf("host %s's subscriber: event %d is %s of %q, the store holds %s of %q", host, i, ev.ID, ev.Host, replay[i].ID, replay[i].Host)
					}
				}
				settle(t, "host "+host+"'s subscriber", c, total)
			}
			for host, hb := range buses {
				if st := hb.Stats(); st.Published != publishers*each || st.Followed != publishers*each {
					t.Errorf("host %s: %d published, %d followed; want %d each", host, st.Published, st.Followed, publishers*each)
				}
			}
		})
	}
}

// A pattern subscription on b gets only the matching events of a, and of
// b itself (the control).
func TestFollowPattern(t *testing.T) {
	a, b := twoHosts(t, bus.Config{})
	got := bustest.NewCollector()
	bustest.Subscribe(t, b, "test.even.>", bus.SubscribeConfig{}, got.Handle)
	var even []string
	for i := range 30 {
		kind := []string{"even", "odd"}[i%2]
		id := fmt.Sprintf("a-%02d", i)
		publishIDs(t, a, "test."+kind+".n", id)
		if kind == "even" {
			even = append(even, id)
		}
	}
	evs := got.Wait(t, len(even))
	checkEvents(t, "b's even subscriber", evs, "a", even)
	settle(t, "b's even subscriber", got, len(even))

	publishIDs(t, b, "test.odd.n", "b-odd")
	own := publishIDs(t, b, "test.even.n", "b-even")
	evs = got.Wait(t, len(even)+1)
	checkEvents(t, "b's even subscriber, b's events", evs[len(even):], "b", own)
	if evs[len(even)].Seq != 32 {
		t.Fatalf("b's even event has seq %d, want 32", evs[len(even)].Seq)
	}
	settle(t, "b's even subscriber", got, len(even)+1)
}

// unfollowed hides a store's Follow: the bus learns of other writers'
// events only when the store does, during the bus's own appends.
type unfollowed struct{ bus.Store }

// An append of b's that the store places after a's events, which it
// learnt of while appending, delivers a's first: b's subscriber sees both
// in seq order, with no gap.
func TestFollowGapOnAppend(t *testing.T) {
	port := freePorts(t, 1)[0]
	startNATS(t, port, t.TempDir())
	opts := Config{URL: fmt.Sprintf("nats://127.0.0.1:%d", port), Stream: "GAP"}
	a := bus.New(openJetStream(t, withHost(opts, "a")), bus.Config{Host: "a"})
	defer a.Close()
	b := bus.New(unfollowed{openJetStream(t, withHost(opts, "b"))}, bus.Config{Host: "b"})
	defer b.Close()
	got := bustest.NewCollector()
	bustest.Subscribe(t, b, ">", bus.SubscribeConfig{}, got.Handle)

	ownFirst := publishIDs(t, b, "test.b", "b-0") // the control
	checkEvents(t, "b's first event", got.Wait(t, 1), "b", ownFirst)
	others := publishIDs(t, a, "test.a", idRange("a", 5)...)
	time.Sleep(100 * time.Millisecond)
	if n := len(got.Events()); n != 1 {
		t.Fatalf("b's subscriber received %d events before b appended again, want 1: b does not follow", n)
	}
	res := bustest.PublishN(t, b, "test.b", 3)
	if res[0].Seq != 7 {
		t.Fatalf("b's append after a's five events got seq %d, want 7", res[0].Seq)
	}
	evs := got.Wait(t, 9)
	bustest.CheckDense(t, evs, 1)
	checkEvents(t, "a's events on b", evs[1:6], "a", others)
	for _, ev := range evs[6:] {
		if ev.Host != "b" {
			t.Fatalf("event %d is from host %q, want b", ev.Seq, ev.Host)
		}
	}
	settle(t, "b's subscriber", got, 9)
}

// Close of a bus that follows its store ends the follower and the store's
// watch promptly, while the other host keeps publishing, and leaves no
// goroutine behind.
func TestFollowClose(t *testing.T) {
	port := freePorts(t, 1)[0]
	startNATS(t, port, t.TempDir())
	opts := Config{URL: fmt.Sprintf("nats://127.0.0.1:%d", port), Stream: "CLOSE"}
	if left := busGoroutines(); len(left) > 0 {
		t.Fatalf("goroutines of buses or NATS clients run before the test:\n%s", strings.Join(left, "\n\n"))
	}

	a := bus.New(openJetStream(t, withHost(opts, "a")), bus.Config{Host: "a"})
	b := bus.New(openJetStream(t, withHost(opts, "b")), bus.Config{Host: "b"})
	got := bustest.NewCollector()
	bustest.Subscribe(t, b, ">", bus.SubscribeConfig{}, got.Handle)
	publishIDs(t, b, "test.b", "b-0") // the control
	publishIDs(t, a, "test.a", idRange("a", 10)...)
	got.Wait(t, 11)

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // a keeps b's follower busy while b closes
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			if _, err := a.Publish(ctx, &abi.Event{Type: "test.a", Data: bustest.Payload(t, i)}); err != nil && ctx.Err() == nil {
				t.Errorf("a's publish %d: %v", i, err)
				return
			}
		}
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := b.Close(); err != nil {
		t.Fatalf("b's Close: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("b's Close took %v", d)
	}
	select {
	case <-hook.FollowerDone(b):
	default:
		t.Fatal("b's follower runs after Close")
	}
	stop()
	bustest.WaitDone(t, "a's publisher", done)
	if err := a.Close(); err != nil {
		t.Fatalf("a's Close: %v", err)
	}
	deadline := time.Now().Add(bustest.WaitLimit)
	for {
		left := busGoroutines()
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines of the buses or their NATS clients run after Close:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(time.Millisecond)
	}
}

// busGoroutines are the stacks of the goroutines, other than the caller's,
// that run code of this package or of the NATS client: none are left once
// every bus and store is closed. The nats-server's own may stay.
func busGoroutines() []string {
	buf := make([]byte, 4<<20)
	all := strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n")
	var ours []string
	for _, g := range all[1:] { // the first is the caller's
		if strings.Contains(g, "kairo/kernel/bus.") || strings.Contains(g, "nats-io/nats.go") {
			ours = append(ours, g)
		}
	}
	return ours
}
