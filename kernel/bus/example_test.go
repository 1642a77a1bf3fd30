package bus_test

import (
	"context"
	"fmt"
	"log"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
)

// Publish is acknowledged once the event is stored; a subscriber gets what
// matches its pattern, live or from a sequence number; Replay reads the
// store. The memory store stands in for SQLite (sqlite.Open, in
// kernel/bus/sqlite), which keeps the log across restarts.
func Example() {
	ctx := context.Background()
	b := bus.New(bus.NewMemoryStore(0), bus.Config{})
	defer b.Close()

	// A live subscriber: every order event published from now on.
	live := make(chan abi.Event, 8)
	sub, err := b.Subscribe(ctx, "app.order.>", bus.SubscribeConfig{}, func(evs []abi.Event) error {
		for _, ev := range evs {
			live <- ev
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()

	for _, typ := range []string{"app.order.created", "app.user.login", "app.order.paid"} {
		res, err := b.Publish(ctx, &abi.Event{ID: typ + "-1", Type: typ})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("stored", typ, "at seq", res.Seq)
	}
	// Publishing an ID that is stored already stores nothing.
	res, _ := b.Publish(ctx, &abi.Event{ID: "app.order.paid-1", Type: "app.order.paid"})
	fmt.Println("again: seq", res.Seq, "duplicate", res.Duplicate)

	for range 2 {
		ev := <-live
		fmt.Println("live:", ev.Seq, ev.Type)
	}

	// The store, read back by sequence number and subject.
	b.Replay(ctx, bus.Query{FromSeq: 2, Pattern: abi.MustCompilePattern("app.*.*")}, func(ev *abi.Event) error {
		fmt.Println("replayed:", ev.Seq, ev.Type)
		return nil
	})
	// Output:
	// stored app.order.created at seq 1
	// stored app.user.login at seq 2
	// stored app.order.paid at seq 3
	// again: seq 3 duplicate true
	// live: 1 app.order.created
	// live: 3 app.order.paid
	// replayed: 2 app.user.login
	// replayed: 3 app.order.paid
}

// A subscriber that starts from a sequence number reads what is stored
// first, then joins the live stream with no gap and no repeat: how a
// client that was away catches up.
func ExampleBus_Subscribe_fromSeq() {
	ctx := context.Background()
	b := bus.New(bus.NewMemoryStore(0), bus.Config{})
	defer b.Close()
	for i := 1; i <= 3; i++ {
		b.Publish(ctx, &abi.Event{Type: fmt.Sprintf("app.tick.%d", i)})
	}

	got := make(chan abi.Event, 8)
	sub, err := b.Subscribe(ctx, "app.>", bus.SubscribeConfig{FromSeq: 2}, func(evs []abi.Event) error {
		for _, ev := range evs {
			got <- ev
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	b.Publish(ctx, &abi.Event{Type: "app.tick.4"})

	for range 3 {
		ev := <-got
		fmt.Println(ev.Seq, ev.Type)
	}
	// Output:
	// 2 app.tick.2
	// 3 app.tick.3
	// 4 app.tick.4
}
