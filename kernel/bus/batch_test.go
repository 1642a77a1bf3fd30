package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"

	"github.com/kairo-os/kairo/abi"
)

func TestPublishBatch(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) bus.Store) {
		b := bustest.NewBus(t, open, bus.Config{})
		ctx := context.Background()
		got := make(chan abi.Event, 256)
		sub, err := b.Subscribe(ctx, "batch.>", bus.SubscribeConfig{}, func(evs []abi.Event) error {
			for _, ev := range evs {
				got <- ev
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()

		first, err := b.Publish(ctx, &abi.Event{ID: "before", Type: "batch.one"})
		if err != nil {
			t.Fatal(err)
		}
		evs := make([]*abi.Event, 100)
		for i := range evs {
			evs[i] = &abi.Event{Type: "batch.many"}
		}
		evs[10].ID = "before" // stored before the batch
		evs[20].ID = "twice"  // and a duplicate inside it
		evs[21].ID = "twice"
		res, err := b.PublishBatch(ctx, evs)
		if err != nil {
			t.Fatal(err)
		}
		next := first.Seq + 1
		var twice uint64
		for i, r := range res {
			switch {
			case i == 10:
				if !r.Duplicate || r.Seq != first.Seq {
					t.Fatalf("event 10 = %+v, want duplicate of seq %d", r, first.Seq)
				}
			case i == 21:
				if !r.Duplicate || r.Seq != twice {
					t.Fatalf("event 21 = %+v, want duplicate of seq %d", r, twice)
				}
			default:
				if r.Duplicate || r.Seq != next {
					t.Fatalf("event %d = %+v, want new at seq %d", i, r, next)
				}
				if i == 20 {
					twice = r.Seq
				}
				next++
			}
		}
		for i, ev := range evs {
			if ev.ID == "" || ev.Time.IsZero() || ev.Source == "" {
				t.Fatalf("event %d not filled in: %+v", i, ev)
			}
		}
		// The subscriber sees the first event and the 98 new ones, in order.
		want := first.Seq
		for n := 0; n < 99; n++ {
			select {
			case ev := <-got:
				if ev.Seq != want {
					t.Fatalf("delivered seq %d, want %d", ev.Seq, want)
				}
				want++
			case <-time.After(10 * time.Second):
				t.Fatalf("only %d of 99 events delivered", n)
			}
		}
		if _, err := b.PublishBatch(ctx, []*abi.Event{{Type: "batch.ok"}, {Type: "bad..subject"}}); err == nil {
			t.Fatal("a batch with an invalid subject was accepted")
		}
		if b.LastSeq() != next-1 {
			t.Fatalf("LastSeq = %d after a refused batch, want %d", b.LastSeq(), next-1)
		}
	})
}
