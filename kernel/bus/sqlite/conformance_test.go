package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/kairo-os/kairo/internal/smalldisk"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
)

// TestConformance runs the suite every store passes (bustest.Conform)
// against the SQLite store, which keeps its events across a reopen and
// fills up with its disk (a real tmpfs).
func TestConformance(t *testing.T) {
	bustest.Conform(t, bustest.ConformanceStore{
		Name:    "sqlite",
		Durable: true,
		Open: func(t testing.TB, dir string) bus.Store {
			return openSQLite(t, filepath.Join(dir, "events.db"))
		},
		Full: func(t *testing.T) (bus.Store, func()) {
			dir := smalldisk.Mount(t, 6<<20)
			s := openSQLite(t, filepath.Join(dir, "events.db"))
			bustest.AppendN(t, s, 0, 10)
			return s, smalldisk.Fill(t, dir)
		},
	})
}
