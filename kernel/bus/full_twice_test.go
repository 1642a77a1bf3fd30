package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
	"github.com/kairo-os/kairo/kernel/bus/internal/hook"

	"github.com/kairo-os/kairo/abi"
)

// A disk that fills, is freed, and fills again: each episode is refused
// and ends with its own kairo.system.store.writable (a second episode once
// closed the first probe's channel again, a panic), and Close after the
// second is clean. Stats counts the refusals of both episodes, though
// each episode's own count starts again.
func TestStoreFullTwice(t *testing.T) {
	defer func(d time.Duration) { hook.ProbeInterval = d }(hook.ProbeInterval)
	hook.ProbeInterval = 10 * time.Millisecond
	st := &bustest.Fillable{Store: bus.NewMemoryStore(0)}
	b := bus.New(st, bus.Config{})
	defer b.Close()
	ctx := context.Background()
	for episode := 1; episode <= 2; episode++ {
		if _, err := b.Publish(ctx, &abi.Event{Type: "test.ok"}); err != nil { // the control
			t.Fatalf("episode %d: a publish before the disk filled: %v", episode, err)
		}
		st.Full.Store(true)
		if _, err := b.Publish(ctx, &abi.Event{Type: "test.refused"}); !bus.IsDiskFull(err) {
			t.Fatalf("episode %d: a publish on the full disk: %v; want a full-disk error", episode, err)
		}
		st.Full.Store(false)
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
	if n := b.Stats().RefusedFull; n != 2 {
		t.Errorf("after two episodes of one refusal each, Stats counts %d refused; want 2", n)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
