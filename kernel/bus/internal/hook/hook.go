// Package hook is where the bus, its store drivers and their tests meet
// below the exported API: the bus's tunables, which the bus reads at each
// use and tests shrink; the SQLite store's sizes, by which the tests every
// store runs are sized; and views of a bus's private state, which package
// bus installs for the drivers' tests that check what the API cannot show.
// It is internal to kernel/bus: only the bus, its drivers and their tests
// import it, and a program gets no handle on any of it.
//
// A test that sets a tunable puts it back when it ends, after the buses
// that read it have closed, and does not run in parallel with others.
package hook

import "time"

// Tunables of the bus. Production code never sets them.
var (
	// ProbeInterval spaces the bus's attempts to publish
	// kairo.system.store.writable while the disk is full.
	ProbeInterval = time.Second

	// MaxFollowRead bounds the events of other writers the bus reads
	// once, under its lock, for all its live subscribers. Past it, or
	// when the read fails, each subscriber reads them from the store
	// itself, as after an overflow.
	MaxFollowRead uint64 = 4096

	// MaxKept is how many facts the bus keeps while its store is away:
	// bus.MaxKept, which package bus sets it to when it is initialised,
	// smaller in tests.
	MaxKept int
)

// Sizes of the SQLite store (kernel/bus/sqlite), by which the tests that
// every store runs (in kernel/bus) cross its boundaries.
const (
	// SQLiteRowsPerInsert is how many rows one INSERT statement carries:
	// multi-row statements halve the per-row cost of binding and stepping.
	SQLiteRowsPerInsert = 32

	// SQLiteScanChunk is how many sequence numbers one replay worker reads
	// at a time.
	SQLiteScanChunk = 4096
)

// Views of a bus's private state, installed by package bus when it is
// initialised. Their argument is a *bus.Bus, which this package cannot
// name (the bus imports it); any other value panics.
var (
	// FollowerDone returns the channel closed when the goroutine that
	// follows the other writers of the bus's store has ended; nil for a
	// store without other writers.
	FollowerDone func(b any) <-chan struct{}

	// StopProbe ends the probe that waits for an unreachable store to
	// answer again, if one runs, and waits for it, as Close does.
	StopProbe func(b any)

	// Probing reports whether that probe runs.
	Probing func(b any) bool
)
