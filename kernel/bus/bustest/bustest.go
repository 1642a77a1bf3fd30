package bustest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/vmihailenco/msgpack/v5"
)

// WaitLimit bounds every wait in these tests; reaching it is a failure
// (a lost event or a hang), not a timing assumption.
const WaitLimit = 20 * time.Second

// Ctx is a context that ends at WaitLimit or with the test.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	t.Cleanup(cancel)
	return ctx
}

// Payload is a small MsgPack value that identifies an event in the tests.
func Payload(t testing.TB, v any) msgpack.RawMessage {
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// PayloadInt is the int an event's data holds, as Payload encoded it.
func PayloadInt(t testing.TB, ev *abi.Event) int {
	t.Helper()
	var n int
	if err := msgpack.Unmarshal(ev.Data, &n); err != nil {
		t.Fatalf("event seq %d: data % x is not an int: %v", ev.Seq, ev.Data, err)
	}
	return n
}

// NewBus returns a bus over the store open returns, closed when the test
// ends.
func NewBus(t testing.TB, open func(testing.TB) bus.Store, opts bus.Config) *bus.Bus {
	t.Helper()
	b := bus.New(open(t), opts)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// MustPublish publishes ev and fails the test if it is not stored.
func MustPublish(t testing.TB, b *bus.Bus, ev *abi.Event) bus.Result {
	t.Helper()
	res, err := b.Publish(Ctx(t), ev)
	if err != nil {
		t.Fatalf("Publish(%s): %v", ev.Type, err)
	}
	return res
}

// PublishN publishes n events on subject with data 0..n-1 through
// PublishAsync (so the SQLite store batches them) and waits for them all.
func PublishN(t testing.TB, b *bus.Bus, subject string, n int) []bus.Result {
	t.Helper()
	acks := make([]*bus.Ack, n)
	for i := range n {
		a, err := b.PublishAsync(&abi.Event{Type: subject, Data: Payload(t, i)})
		if err != nil {
			t.Fatalf("PublishAsync %d: %v", i, err)
		}
		acks[i] = a
	}
	return WaitAcks(t, acks)
}

// WaitAcks waits for every ack and returns their results, failing the
// test on an error.
func WaitAcks(t testing.TB, acks []*bus.Ack) []bus.Result {
	t.Helper()
	ctx := Ctx(t)
	out := make([]bus.Result, len(acks))
	for i, a := range acks {
		res, err := a.Wait(ctx)
		if err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
		out[i] = res
	}
	return out
}

// ReplayAll returns every stored event matching q.
func ReplayAll(t testing.TB, b *bus.Bus, q bus.Query) []abi.Event {
	t.Helper()
	var out []abi.Event
	if err := b.Replay(Ctx(t), q, func(ev *abi.Event) error {
		out = append(out, *ev)
		return nil
	}); err != nil {
		t.Fatalf("Replay(%+v): %v", q, err)
	}
	return out
}

// Collector is a Handler that keeps copies of what it receives.
type Collector struct {
	mu      sync.Mutex
	evs     []abi.Event
	changed chan struct{}
}

// NewCollector returns an empty Collector.
func NewCollector() *Collector { return &Collector{changed: make(chan struct{}, 1)} }

// Handle is the Handler: it keeps a copy of evs.
func (c *Collector) Handle(evs []abi.Event) error {
	c.mu.Lock()
	c.evs = append(c.evs, evs...)
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
	return nil
}

// Events returns a copy of the events received so far.
func (c *Collector) Events() []abi.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.evs)
}

// Wait returns the received events once there are at least n of them.
func (c *Collector) Wait(t testing.TB, n int) []abi.Event {
	t.Helper()
	deadline := time.NewTimer(WaitLimit)
	defer deadline.Stop()
	for {
		if evs := c.Events(); len(evs) >= n {
			return evs
		}
		select {
		case <-c.changed:
		case <-deadline.C:
			t.Fatalf("received %d events after %v, want %d", len(c.Events()), WaitLimit, n)
		}
	}
}

// Subscribe subscribes h to pattern on b until the test ends.
func Subscribe(t testing.TB, b *bus.Bus, pattern string, opts bus.SubscribeConfig, h bus.Handler) *bus.Subscription {
	t.Helper()
	sub, err := b.Subscribe(context.Background(), pattern, opts, h)
	if err != nil {
		t.Fatalf("Subscribe(%q): %v", pattern, err)
	}
	t.Cleanup(sub.Close)
	return sub
}

// CheckDense fails unless evs have sequence numbers from, from+1, ...
func CheckDense(t testing.TB, evs []abi.Event, from uint64) {
	t.Helper()
	for i, ev := range evs {
		if want := from + uint64(i); ev.Seq != want {
			t.Fatalf("event %d has seq %d, want %d (seqs must be dense, in order, without repeats)", i, ev.Seq, want)
		}
	}
}

// Eventually polls cond until it holds, failing the test at WaitLimit.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(WaitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, WaitLimit)
		}
		time.Sleep(time.Millisecond)
	}
}

// WaitDone waits for done to be closed, failing the test at WaitLimit.
func WaitDone(t testing.TB, what string, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(WaitLimit):
		t.Fatalf("%s did not finish within %v", what, WaitLimit)
	}
}
