package sqlite

import (
	"fmt"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/manifests"
)

// init registers the SQLite store as [manifests.StoreSQLite] with
// [bus.Register]: a program that imports this package can open it with
// [bus.OpenStore].
func init() { bus.Register(manifests.StoreSQLite, opener{}) }

// opener opens the SQLite store that a daemon's kairo.toml describes.
type opener struct{}

// Open opens the store at [manifests.Config.StorePath] with the [store]
// table's synchronous and wal_max.
func (opener) Open(cfg bus.OpenConfig) (bus.Store, error) {
	c, ok := cfg.Settings.(*manifests.Config)
	if !ok {
		return nil, fmt.Errorf("the SQLite store is opened from a *manifests.Config, not %T", cfg.Settings)
	}
	return Open(c.StorePath(cfg.Home), Config{Synchronous: c.Store.Synchronous, WALMax: int64(c.Store.WALMax), Logger: cfg.Logger})
}
