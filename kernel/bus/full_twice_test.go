package bus_test

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/internal/hook"

	"github.com/kairo-os/kairo/abi"
)

// fillable is a store whose disk can be made full: its appends fail with
// ENOSPC, as a real full disk's do (TestStoreFullDisk fills a real one).
type fillable struct {
	bus.Store
	full atomic.Bool
}

func (f *fillable) Append(evs []*abi.Event, envs [][]byte, dup []bool) error {
	if f.full.Load() {
		return syscall.ENOSPC
	}
	return f.Store.Append(evs, envs, dup)
}

// A disk that fills, is freed, and fills again: each episode is refused
// and ends with its own kairo.system.store.writable (a second episode once
// closed the first probe's channel again, a panic), and Close after the
// second is clean.
func TestStoreFullTwice(t *testing.T) {
	defer func(d time.Duration) { hook.ProbeInterval = d }(hook.ProbeInterval)
	hook.ProbeInterval = 10 * time.Millisecond
	st := &fillable{Store: bus.NewMemoryStore(0)}
	b := bus.New(st, bus.Config{})
	defer b.Close()
	ctx := context.Background()
	for episode := 1; episode <= 2; episode++ {
		if _, err := b.Publish(ctx, &abi.Event{Type: "test.ok"}); err != nil { // the control
			t.Fatalf("episode %d: a publish before the disk filled: %v", episode, err)
		}
		st.full.Store(true)
		if _, err := b.Publish(ctx, &abi.Event{Type: "test.refused"}); !bus.IsDiskFull(err) {
			t.Fatalf("episode %d: a publish on the full disk: %v; want a full-disk error", episode, err)
		}
		st.full.Store(false)
		deadline := time.Now().Add(10 * time.Second)
		for {
			n := 0
			b.Replay(ctx, bus.Query{}, func(ev *abi.Event) error {
				if ev.Type == bus.SubjectStoreWritable {
					n++
				}
				return nil
			})
			if n == episode {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("episode %d: %d writable events within 10s; want %d", episode, n, episode)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
