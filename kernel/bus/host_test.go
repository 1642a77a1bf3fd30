package bus_test

import (
	"testing"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"

	"github.com/kairo-os/kairo/abi"
)

// A publisher cannot speak for another host: the bus sets its own host on
// every event, whatever the event said, and none on a bus without one. The
// control: an event that names the bus's own host keeps it.
func TestPublisherCannotNameAnotherHost(t *testing.T) {
	for _, c := range []struct{ bus, claimed, stored string }{
		{"a", "b", "a"}, // another host's name, claimed
		{"a", "", "a"},
		{"a", "a", "a"}, // the control
		{"", "b", ""},   // a store of one host names none
	} {
		b := bus.New(bus.NewMemoryStore(16), bus.Config{Host: c.bus})
		ev := &abi.Event{Type: "test.host", Host: c.claimed}
		res := bustest.MustPublish(t, b, ev)
		var stored abi.Event
		if err := b.Replay(bustest.Ctx(t), bus.Query{FromSeq: res.Seq, ToSeq: res.Seq}, func(e *abi.Event) error { stored = *e; return nil }); err != nil {
			t.Fatal(err)
		}
		if stored.Host != c.stored {
			t.Errorf("bus of host %q, event claiming %q: stored with host %q, want %q", c.bus, c.claimed, stored.Host, c.stored)
		}
		b.Close()
	}
}
