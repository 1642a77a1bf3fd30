package bustest

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
)

// AppendN appends the n events numbered from from on (StoreEvent, ID
// ev-<number>) to s directly, 256 to an append.
func AppendN(t testing.TB, s bus.Store, from, n int) {
	t.Helper()
	for i := from; i < from+n; i += 256 {
		var evs []*abi.Event
		for j := i; j < min(i+256, from+n); j++ {
			evs = append(evs, StoreEvent(t, fmt.Sprintf("ev-%d", j), j))
		}
		AppendOrFail(t, s, evs, true)
	}
}

// AppendOrFail appends evs to s directly, as the bus does, and returns the
// dup flags.
func AppendOrFail(t testing.TB, s bus.Store, evs []*abi.Event, withEnvs bool) []bool {
	t.Helper()
	var envs [][]byte
	if enc, ok := s.(bus.EnvEncoder); ok && withEnvs {
		for _, ev := range evs {
			env, err := enc.EncodeEnv(ev)
			if err != nil {
				t.Fatalf("EncodeEnv: %v", err)
			}
			envs = append(envs, env)
		}
	}
	dup := make([]bool, len(evs))
	if err := s.Append(evs, envs, dup); err != nil {
		t.Fatalf("Append of %d events: %v", len(evs), err)
	}
	return dup
}

// ScanAll returns every event of s that matches q.
func ScanAll(t testing.TB, s bus.Store, q bus.Query) []abi.Event {
	t.Helper()
	var out []abi.Event
	if err := s.Scan(context.Background(), q, func(ev *abi.Event) error {
		out = append(out, *ev)
		return nil
	}); err != nil {
		t.Fatalf("Scan(%+v): %v", q, err)
	}
	return out
}

// StoreEvent is an event with the given id and data n, at a time that
// n sets, ready for Append.
func StoreEvent(t testing.TB, id string, n int) *abi.Event {
	return &abi.Event{ID: id, Type: "kairo.store.e", Source: "test", Time: time.Unix(1_700_000_000, int64(n)), Data: Payload(t, n)}
}

// Fillable is a store whose disk can be made full: while Full is set, its
// appends fail with ENOSPC, as a real full disk's do
// (kernel/bus/sqlite's TestStoreFullDisk fills a real one).
type Fillable struct {
	bus.Store
	Full atomic.Bool
}

// Append fails with ENOSPC while f.Full is set, else appends to the store.
func (f *Fillable) Append(evs []*abi.Event, envs [][]byte, dup []bool) error {
	if f.Full.Load() {
		return syscall.ENOSPC
	}
	return f.Store.Append(evs, envs, dup)
}
