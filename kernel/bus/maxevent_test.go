package bus_test

import (
	"strings"
	"testing"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"

	"github.com/kairo-os/kairo/abi"
)

// An event whose data is over MaxEventData is refused before it is stored,
// by every publish path, with an error that names the bound; one at the
// bound is stored.
func TestPublishRefusesOversizedEvent(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		b := bustest.NewBus(t, open, bus.Config{})
		big := &abi.Event{Type: "kairo.big", Data: make([]byte, bus.MaxEventData+1)}
		if _, err := b.Publish(bustest.Ctx(t), big); err == nil || !strings.Contains(err.Error(), "bus.MaxEventData") {
			t.Fatalf("Publish of %d bytes = %v; want a refusal naming bus.MaxEventData", len(big.Data), err)
		}
		if _, err := b.PublishAsync(big); err == nil || !strings.Contains(err.Error(), "bus.MaxEventData") {
			t.Fatalf("PublishAsync = %v; want a refusal naming bus.MaxEventData", err)
		}
		if _, err := b.PublishBatch(bustest.Ctx(t), []*abi.Event{{Type: "kairo.small"}, big}); err == nil || !strings.Contains(err.Error(), "bus.MaxEventData") {
			t.Fatalf("PublishBatch = %v; want a refusal naming bus.MaxEventData", err)
		}
		if got := b.LastSeq(); got != 0 {
			t.Fatalf("LastSeq = %d after refused publishes, want 0", got)
		}
		if res := bustest.MustPublish(t, b, &abi.Event{Type: "kairo.fits", Data: make([]byte, bus.MaxEventData)}); res.Seq != 1 {
			t.Fatalf("an event at the bound got seq %d, want 1", res.Seq)
		}
	})
}
