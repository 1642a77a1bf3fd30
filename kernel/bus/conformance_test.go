package bus_test

import (
	"testing"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
)

// TestConformance runs the suite every store passes against the memory
// store; each driver's package runs it against its own (kernel/bus/sqlite,
// kernel/bus/jetstream): what the bus promises its users does not depend
// on where the events are kept.
func TestConformance(t *testing.T) {
	bustest.Conform(t, bustest.ConformanceStore{
		Name: "memory",
		Open: func(testing.TB, string) bus.Store { return bus.NewMemoryStore(0) },
	})
}
