package bus

import (
	"errors"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/abi"
)

// blocked is a handler stuck until release is closed, as a client that
// never reads holds its push; entered receives each call.
func blocked(entered chan<- struct{}, release <-chan struct{}) Handler {
	return func([]abi.Event) error {
		if entered != nil {
			entered <- struct{}{}
		}
		<-release
		return nil
	}
}

func behind(s *Subscription) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.behind != ""
}

// A budgeted subscriber that falls behind ends with an error that says
// where to resume, and gives back what it held; the kernel's own
// subscriber beside it catches up from the store as before.
func TestBudgetedSubscriberFallsBehind(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) Store) {
		b := newBus(t, open, Options{})
		g := b.NewBudget(BudgetOptions{MaxEvents: 16})
		entered, release := make(chan struct{}, 1), make(chan struct{})
		slow := subscribe(t, b, "load.>", SubscribeOptions{Budget: g}, blocked(entered, release))
		ok := newCollector()
		subscribe(t, b, "load.>", SubscribeOptions{Budget: b.NewBudget(BudgetOptions{})}, ok.handle)
		own := newCollector()
		subscribe(t, b, "load.>", SubscribeOptions{}, own.handle)

		publishN(t, b, "load.x", 1)
		waitDone(t, "the first push", entered) // seq 1 is stuck in the handler
		publishN(t, b, "load.x", 199)
		eventually(t, "the slow subscriber falls behind", func() bool { return behind(slow) })
		if n := g.Bytes(); n > 1<<10 {
			t.Fatalf("the slow subscriber still holds %d bytes once behind; want only the event in its handler", n)
		}
		close(release)
		waitDone(t, "the slow subscription", slow.Done())
		var be *BehindError
		if err := slow.Err(); !errors.As(err, &be) || be.Next != 2 || !strings.Contains(err.Error(), "fell behind by more than 16 events; resubscribe from seq 2") {
			t.Fatalf("slow subscriber ended with %v, want a BehindError resuming at seq 2", err)
		}
		if g.Bytes() != 0 || g.Subscriptions() != 0 {
			t.Fatalf("after it ended the budget holds %d bytes, %d subscriptions", g.Bytes(), g.Subscriptions())
		}
		// The controls: a reading client and the kernel's own subscriber
		// get everything.
		checkDense(t, ok.wait(t, 200), 1)
		checkDense(t, own.wait(t, 200), 1)
		eventually(t, "client bytes back to zero", func() bool { return b.Stats().ClientBytes == 0 })

		// Resubscribing from the seq the error named delivers the rest.
		again := newCollector()
		subscribe(t, b, "load.>", SubscribeOptions{FromSeq: be.Next, Budget: g}, again.handle)
		checkDense(t, again.wait(t, 199), 2)
	})
}

func TestBudgetBounds(t *testing.T) {
	b := newBus(t, func(testing.TB) Store { return NewMemoryStore(0) }, Options{MaxClientBytes: 64 << 10})
	g := b.NewBudget(BudgetOptions{MaxSubscriptions: 2})
	release := make(chan struct{})
	first := subscribe(t, b, "a.>", SubscribeOptions{Budget: g}, blocked(nil, release))
	second := subscribe(t, b, "a.>", SubscribeOptions{Budget: g}, blocked(nil, release))
	if _, err := b.Subscribe(testCtx(t), "a.>", SubscribeOptions{Budget: g}, blocked(nil, release)); !errors.Is(err, ErrTooManySubscriptions) {
		t.Fatalf("third subscription on a budget of 2: %v", err)
	}
	second.Close()
	third := subscribe(t, b, "a.>", SubscribeOptions{Budget: g}, blocked(nil, release))

	// The bus-wide bound: 64 KiB for every client together, whatever each
	// budget allows.
	stuck := subscribe(t, b, "a.>", SubscribeOptions{Budget: b.NewBudget(BudgetOptions{})}, blocked(nil, release))
	big := make([]byte, 8<<10)
	for range 40 {
		mustPublish(t, b, &abi.Event{Type: "a.big", Data: big})
	}
	if st := b.Stats(); st.ClientBytes > 64<<10 {
		t.Fatalf("clients hold %d bytes, over the bus's 64 KiB", st.ClientBytes)
	}
	close(release)
	for _, s := range []*Subscription{first, third, stuck} {
		waitDone(t, "a stuck subscription", s.Done())
		if err := s.Err(); err == nil || !strings.Contains(err.Error(), "fell behind by more than") {
			t.Fatalf("stuck subscription ended with %v", err)
		}
	}
	if st := b.Stats(); st.ClientBytes != 0 {
		t.Fatalf("clients hold %d bytes after their subscriptions ended", st.ClientBytes)
	}
}

// An event's strings over their bounds are refused at publish, whoever
// publishes.
func TestPublishRefusesLongStrings(t *testing.T) {
	b := newBus(t, func(testing.TB) Store { return NewMemoryStore(0) }, Options{})
	_, err := b.Publish(testCtx(t), &abi.Event{Type: "a.b", Source: strings.Repeat("s", 1<<20)})
	var ae *abi.Error
	if !errors.As(err, &ae) || ae.Code != abi.CodeInvalidParams || !strings.Contains(ae.Message, "event.source has 1048576 bytes") {
		t.Fatalf("1 MiB source: %v", err)
	}
	mustPublish(t, b, &abi.Event{Type: "a.b", ID: strings.Repeat("i", abi.MaxIDLen)})
}
