package bus_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"

	"github.com/kairo-os/kairo/abi"
)

// blocked is a handler stuck until release is closed, as a client that
// never reads holds its push; entered receives each call.
func blocked(entered chan<- struct{}, release <-chan struct{}) bus.Handler {
	return func([]abi.Event) error {
		if entered != nil {
			entered <- struct{}{}
		}
		<-release
		return nil
	}
}

// A budgeted subscriber that falls behind frees its buffer at once and
// catches up from the store when it is ready: bounded, and nothing lost.
func TestBudgetedSubscriberCatchesUp(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		b := bustest.NewBus(t, open, bus.Config{})
		g := b.NewBudget(bus.BudgetConfig{MaxEvents: 16})
		entered, release := make(chan struct{}, 1), make(chan struct{})
		var got []abi.Event
		slow := bustest.Subscribe(t, b, "load.>", bus.SubscribeConfig{Budget: g}, func(evs []abi.Event) error {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
			got = append(got, evs...) // run's goroutine only
			return nil
		})
		own := bustest.NewCollector()
		bustest.Subscribe(t, b, "load.>", bus.SubscribeConfig{}, own.Handle)

		bustest.PublishN(t, b, "load.x", 1)
		bustest.WaitDone(t, "the first push", entered) // seq 1 is stuck in the handler
		bustest.PublishN(t, b, "load.x", 199)
		bustest.Eventually(t, "the slow subscriber lags", func() bool { return slow.Lagging() })
		if n := g.Bytes(); n > 1<<10 {
			t.Fatalf("the slow subscriber holds %d bytes once lagging; want only the event in its handler", n)
		}
		close(release)
		bustest.CheckDense(t, own.Wait(t, 200), 1)
		bustest.Eventually(t, "the slow subscriber caught up", func() bool { return !slow.Lagging() && g.Bytes() == 0 })
		slow.Close()
		bustest.CheckDense(t, got, 1)
		if len(got) != 200 || g.Subscriptions() != 0 || b.Stats().ClientBytes != 0 {
			t.Fatalf("got %d events; budget holds %d subscriptions, bus %d bytes", len(got), g.Subscriptions(), b.Stats().ClientBytes)
		}
	})
}

// When its client holds all its budget allows, a lagging subscriber cannot
// read even a page of the store: it ends, saying where to resume.
func TestBudgetedSubscriberEnds(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		b := bustest.NewBus(t, open, bus.Config{})
		g := b.NewBudget(bus.BudgetConfig{MaxBytes: 4 << 10})
		release := make(chan struct{})
		defer close(release)
		bustest.Subscribe(t, b, "load.>", bus.SubscribeConfig{Budget: g}, blocked(nil, release))
		second := bustest.NewCollector()
		sub := bustest.Subscribe(t, b, "load.>", bus.SubscribeConfig{Budget: g}, second.Handle)
		bustest.MustPublish(t, b, &abi.Event{Type: "load.x", Data: bustest.Payload(t, make([]byte, 3<<10))})
		bustest.WaitDone(t, "the second subscription", sub.Done())
		var be *bus.BehindError
		if err := sub.Err(); !errors.As(err, &be) || be.Next != 1 || !strings.Contains(err.Error(), "fell behind by more than the 4096 bytes one client's subscriptions may hold; resubscribe from seq 1") {
			t.Fatalf("ended with %v", err)
		}
		if g.Subscriptions() != 1 {
			t.Fatalf("%d subscriptions open on the budget, want 1", g.Subscriptions())
		}
		// The control: with room in the budget, the same subscription
		// works from the seq the error named.
		other := bustest.NewCollector()
		bustest.Subscribe(t, b, "load.>", bus.SubscribeConfig{Budget: b.NewBudget(bus.BudgetConfig{}), FromSeq: be.Next}, other.Handle)
		bustest.CheckDense(t, other.Wait(t, 1), 1)
	})
}

func TestBudgetBounds(t *testing.T) {
	b := bustest.NewBus(t, func(testing.TB) bus.Store { return bus.NewMemoryStore(0) }, bus.Config{MaxClientBytes: 64 << 10})
	g := b.NewBudget(bus.BudgetConfig{MaxSubscriptions: 2})
	release := make(chan struct{})
	first := bustest.Subscribe(t, b, "a.>", bus.SubscribeConfig{Budget: g}, blocked(nil, release))
	second := bustest.Subscribe(t, b, "a.>", bus.SubscribeConfig{Budget: g}, blocked(nil, release))
	if _, err := b.Subscribe(bustest.Ctx(t), "a.>", bus.SubscribeConfig{Budget: g}, blocked(nil, release)); !errors.Is(err, bus.ErrTooManySubscriptions) {
		t.Fatalf("third subscription on a budget of 2: %v", err)
	}
	second.Close()
	third := bustest.Subscribe(t, b, "a.>", bus.SubscribeConfig{Budget: g}, blocked(nil, release))

	// The bus-wide bound: 64 KiB for every client together, whatever each
	// budget allows.
	stuck := bustest.Subscribe(t, b, "a.>", bus.SubscribeConfig{Budget: b.NewBudget(bus.BudgetConfig{})}, blocked(nil, release))
	big := bustest.Payload(t, make([]byte, 8<<10))
	for range 40 {
		bustest.MustPublish(t, b, &abi.Event{Type: "a.big", Data: big})
	}
	if st := b.Stats(); st.ClientBytes > 64<<10 {
		t.Fatalf("clients hold %d bytes, over the bus's 64 KiB", st.ClientBytes)
	}
	close(release)
	for _, s := range []*bus.Subscription{first, third, stuck} {
		s.Close()
	}
	if st := b.Stats(); st.ClientBytes != 0 {
		t.Fatalf("clients hold %d bytes after their subscriptions ended", st.ClientBytes)
	}
}

// An event's strings over their bounds are refused at publish, whoever
// publishes.
func TestPublishRefusesLongStrings(t *testing.T) {
	b := bustest.NewBus(t, func(testing.TB) bus.Store { return bus.NewMemoryStore(0) }, bus.Config{})
	_, err := b.Publish(bustest.Ctx(t), &abi.Event{Type: "a.b", Source: strings.Repeat("s", 1<<20)})
	var ae *abi.Error
	if !errors.As(err, &ae) || ae.Code != abi.CodeInvalidParams || !strings.Contains(ae.Message, "event.source has 1048576 bytes") {
		t.Fatalf("1 MiB source: %v", err)
	}
	bustest.MustPublish(t, b, &abi.Event{Type: "a.b", ID: strings.Repeat("i", abi.MaxIDLen)})
}
