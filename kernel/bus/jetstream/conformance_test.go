package jetstream

import (
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
)

// TestConformance runs the suite every store passes (bustest.Conform)
// against the JetStream store on an embedded server, and on three
// nats-servers on loopback ports with the stream on all three.
func TestConformance(t *testing.T) {
	t.Run("jetstream-embedded", func(t *testing.T) {
		bustest.Conform(t, bustest.ConformanceStore{
			Name:    "jetstream-embedded",
			Durable: true,
			Open: func(t testing.TB, dir string) bus.Store {
				return openJetStream(t, Config{Embedded: true, Dir: dir, DuplicateWindow: 100 * time.Millisecond})
			},
			Full: func(t *testing.T) (bus.Store, func()) {
				// MaxBytes is the limit; raising it is what frees room.
				opts := Config{Embedded: true, Dir: t.TempDir(), MaxBytes: 64 << 10}
				s := openJetStream(t, opts)
				return s, func() {
					s.Close()
					opts.MaxBytes = 1 << 20
					applyJetStream(t, opts)
					*s = *openJetStream(t, opts)
				}
			},
			FullSays:       "max_bytes",
			AfterDupWindow: func() { time.Sleep(300 * time.Millisecond) },
		})
	})
	t.Run("jetstream-cluster", func(t *testing.T) { bustest.Conform(t, clusterStore(startCluster(t))) })
}
