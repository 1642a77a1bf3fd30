package bus_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/kairo-os/kairo/internal/smalldisk"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
	"github.com/kairo-os/kairo/kernel/bus/jetstream"
)

// conformanceStores are the stores that keep the Store contract. A NATS
// cluster joins them later.
var conformanceStores = []bustest.ConformanceStore{
	{
		name: "memory",
		open: func(testing.TB, string) bus.Store { return bus.NewMemoryStore(0) },
	},
	{
		name:    "sqlite",
		durable: true,
		open: func(t testing.TB, dir string) bus.Store {
			return sqlite.openSQLite(t, filepath.Join(dir, "events.db"))
		},
		full: func(t *testing.T) (bus.Store, func()) {
			dir := smalldisk.Mount(t, 6<<20)
			s := sqlite.openSQLite(t, filepath.Join(dir, "events.db"))
			bustest.AppendN(t, s, 0, 10)
			return s, smalldisk.Fill(t, dir)
		},
	},
	{
		name:    "jetstream-embedded",
		durable: true,
		open: func(t testing.TB, dir string) bus.Store {
			return jetstream.openJetStream(t, jetstream.Options{Embedded: true, Dir: dir, DuplicateWindow: 100 * time.Millisecond})
		},
		full: func(t *testing.T) (bus.Store, func()) {
			// MaxBytes is the limit; raising it is what frees room.
			opts := jetstream.Options{Embedded: true, Dir: t.TempDir(), MaxBytes: 64 << 10}
			s := jetstream.openJetStream(t, opts)
			return s, func() {
				s.Close()
				opts.MaxBytes = 1 << 20
				jetstream.applyJetStream(t, opts)
				*s = *jetstream.openJetStream(t, opts)
			}
		},
		afterDupWindow: func() { time.Sleep(300 * time.Millisecond) },
	},
}

// TestConformance runs one suite against every store: what the bus
// promises its users does not depend on where the events are kept.
func TestConformance(t *testing.T) {
	for _, cs := range conformanceStores {
		t.Run(cs.name, func(t *testing.T) { bustest.Conform(t, cs) })
	}
	// Three nats-servers on loopback ports, the stream on all three.
	t.Run("jetstream-cluster", func(t *testing.T) { bustest.Conform(t, jetstream.clusterStore(jetstream.startCluster(t))) })
}
