package bus_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
)

// Match narrows a subscription's pattern, for the events it reads from the
// store and for the live ones alike; the control is the same subscription
// without it, which gets every event of the pattern.
func TestSubscribeMatch(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		b := bustest.NewBus(t, open, bus.Config{})
		pub := func(subject string) {
			bustest.MustPublish(t, b, &abi.Event{Type: subject, Data: bustest.Payload(t, 1)})
		}
		pub("kairo.test.keep")
		pub("kairo.test.skip")
		got := func(match func(string) bool) func() []string {
			var mu sync.Mutex
			var seen []string
			sub, err := b.Subscribe(context.Background(), "kairo.test.>", bus.SubscribeConfig{FromSeq: 1, Match: match}, func(evs []abi.Event) error {
				mu.Lock()
				defer mu.Unlock()
				for _, ev := range evs {
					seen = append(seen, ev.Type)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sub.Close)
			return func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(seen) }
		}
		narrowed := got(func(s string) bool { return s != "kairo.test.skip" })
		all := got(nil)
		pub("kairo.test.skip")
		pub("kairo.test.keep")
		want := []string{"kairo.test.keep", "kairo.test.keep"}
		deadline := time.Now().Add(5 * time.Second)
		for (len(all()) < 4 || len(narrowed()) < 2) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if n := narrowed(); !slices.Equal(n, want) {
			t.Errorf("with Match: %v, want %v", n, want)
		}
		if a := all(); len(a) != 4 {
			t.Errorf("without Match: %v, want all 4", a)
		}
	})
}
