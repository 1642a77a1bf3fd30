package bus

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// A Driver opens the stores of one kind. Each store that needs more than
// the standard library (SQLite, JetStream) is a package of its own under
// kernel/bus that registers its Driver with [Register] in an init
// function, as database/sql drivers do: a program links only the stores
// it imports, so one that embeds Kairo with SQLite never links the NATS
// server. [MemoryStore] has no driver: it needs only [NewMemoryStore].
// See docs/RATIONALE.md#stores-are-drivers.
type Driver interface {
	// Open opens the store cfg describes, creating it when it is new, and
	// returns it ready for [New]. It may block while it reaches the
	// store (a JetStream cluster), for as long as its own settings allow.
	Open(cfg OpenConfig) (Store, error)
}

// OpenConfig is what [OpenStore] hands a [Driver].
type OpenConfig struct {
	// Home is the daemon's data folder: relative paths of Settings are
	// under it.
	Home string
	// Settings is the daemon's configuration as its reader parsed it,
	// from which each driver takes its own table: a *manifests.Config
	// for the drivers Kairo ships. The bus does not read it; it lives
	// below the package that parses it.
	Settings any
	// Logger receives what the store reports while it opens and runs;
	// nil discards it.
	Logger *slog.Logger
}

var (
	driversMu sync.RWMutex
	drivers   = map[string]Driver{}
)

// Register makes a store kind available to [OpenStore]. A driver's
// package calls it from its init function; a second driver of the same
// kind, or a nil one, is a programming error and panics, as
// database/sql's Register does.
func Register(kind string, d Driver) {
	driversMu.Lock()
	defer driversMu.Unlock()
	if d == nil {
		panic("bus: Register of a nil driver for store kind " + kind)
	}
	if _, dup := drivers[kind]; dup {
		panic("bus: Register called twice for store kind " + kind)
	}
	drivers[kind] = d
}

// Drivers returns the registered store kinds, sorted.
func Drivers() []string {
	driversMu.RLock()
	defer driversMu.RUnlock()
	kinds := make([]string, 0, len(drivers))
	for k := range drivers {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return kinds
}

// OpenStore opens a store of the given kind with its registered [Driver].
// A kind no driver registered is an error that names the registered
// kinds and the import the program lacks.
func OpenStore(kind string, cfg OpenConfig) (Store, error) {
	driversMu.RLock()
	d := drivers[kind]
	driversMu.RUnlock()
	if d == nil {
		registered := strings.Join(Drivers(), ", ")
		if registered == "" {
			registered = "none"
		}
		return nil, fmt.Errorf("no event store driver for kind %q is registered (registered: %s): the program must import its driver, import _ \"github.com/kairo-os/kairo/kernel/bus/%s\"", kind, registered, kind)
	}
	return d.Open(cfg)
}
