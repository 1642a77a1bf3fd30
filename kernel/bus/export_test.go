package bus

import (
	"context"
	"sync"
	"testing"

	"github.com/kairo-os/kairo/abi"
)

// What the tests in package bus_test reach inside the bus. They are an
// external test package because they run over the store drivers, which
// import the bus; this file, in package bus, is compiled into the tests
// only. The drivers' own tests reach the bus through
// kernel/bus/internal/hook instead.

// CheckV7 fails t unless id is a UUIDv7, as [abi.NewID] makes them.
func CheckV7(t *testing.T, id string) {
	t.Helper()
	if u := [16]byte{}; !abi.ParseUUID(id, &u) || u[6]>>4 != 7 || u[8]>>6 != 0b10 {
		t.Fatalf("id %q is not a UUIDv7 (abi.NewID)", id)
	}
}

// FormatUUID is the canonical form of the 16 bytes b.
func FormatUUID(b []byte) string { return abi.FormatUUID([16]byte(b)) }

// Mu is the lock that orders appends with delivery: a test holding it
// stalls the flusher after it takes a batch.
func (b *Bus) Mu() *sync.Mutex { return &b.mu }

// Queued reports whether a batch waits for the flusher to take it.
func (b *Bus) Queued() bool {
	b.qmu.Lock()
	defer b.qmu.Unlock()
	return b.cur != nil
}

// Batch is the batch of the group commit a's event was appended in.
func (a *Ack) Batch() *batch { return a.b }

// Len is how many events the batch holds.
func (bt *batch) Len() int { return len(bt.evs) }

// Ctx is the subscription's context, which Close cancels.
func (s *Subscription) Ctx() context.Context { return s.ctx }

// Lagging reports whether the subscription's buffer overflowed, so that
// what follows must come from the store.
func (s *Subscription) Lagging() bool {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	return s.isLagging()
}
