package bus_test

import (
	"context"
	"sync"
	"testing"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
)

// appendCounter is a store that records how many events each Append
// carried.
type appendCounter struct {
	bus.Store
	mu    sync.Mutex
	sizes []int
}

func (c *appendCounter) Append(evs []*abi.Event, envs [][]byte, dup []bool) error {
	c.mu.Lock()
	c.sizes = append(c.sizes, len(evs))
	c.mu.Unlock()
	return c.Store.Append(evs, envs, dup)
}

// encodingCounter is an appendCounter over a store that encodes its
// events (SQLite), which the bus must still see as one.
type encodingCounter struct{ *appendCounter }

func (c encodingCounter) EncodeEnv(ev *abi.Event) ([]byte, error) {
	return c.Store.(bus.EnvEncoder).EncodeEnv(ev)
}

// TestPublishAsyncBatchOneCommit: the events of one PublishAsyncBatch
// reach the store in one Append, in order, however soon the committer
// wakes.
func TestPublishAsyncBatchOneCommit(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		var c *appendCounter
		b := bustest.NewBus(t, func(tb testing.TB) bus.Store {
			c = &appendCounter{Store: open(tb)}
			if _, ok := c.Store.(bus.EnvEncoder); ok {
				return encodingCounter{c}
			}
			return c
		}, bus.Config{})
		for round := range 50 {
			evs := make([]*abi.Event, 5)
			for i := range evs {
				evs[i] = &abi.Event{Type: "batch.async"}
			}
			c.mu.Lock()
			c.sizes = nil
			c.mu.Unlock()
			acks, err := b.PublishAsyncBatch(evs)
			if err != nil {
				t.Fatal(err)
			}
			var seqs []uint64
			for _, a := range acks {
				r, err := a.Wait(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				seqs = append(seqs, r.Seq)
			}
			for i := 1; i < len(seqs); i++ {
				if seqs[i] != seqs[0]+uint64(i) {
					t.Fatalf("round %d: seqs %v, want consecutive in the batch's order", round, seqs)
				}
			}
			c.mu.Lock()
			sizes := c.sizes
			c.mu.Unlock()
			if len(sizes) != 1 || sizes[0] != len(evs) {
				t.Fatalf("round %d: the store's appends carried %v events, want one append of %d", round, sizes, len(evs))
			}
		}
		if _, err := b.PublishAsyncBatch([]*abi.Event{{Type: "batch.async"}, {Type: "bad subject!"}}); err == nil {
			t.Fatal("a batch with an invalid subject was queued")
		}
	})
}
