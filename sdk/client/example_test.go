package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/ipc"
	"github.com/kairo-os/kairo/sdk/client"
	"github.com/vmihailenco/msgpack/v5"
)

// A program publishes an event, follows a subject live, and replays what is
// stored. (The kernel started first is what `kairo up` runs.)
func Example() {
	sock, stop := startKernel()
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, sock)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	sub, err := c.Subscribe(ctx, "skill.transcode.>", 0)
	if err != nil {
		log.Fatal(err)
	}
	data, _ := msgpack.Marshal(map[string]any{"percent": 42})
	res, err := c.Publish(ctx, abi.Event{Type: "skill.transcode.progress", Data: data})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored at seq", res.Seq)

	ev, err := sub.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	var progress map[string]int
	msgpack.Unmarshal(ev.Data, &progress)
	fmt.Println("live:", ev.Type, progress["percent"])

	_, err = c.Replay(ctx, abi.ReplayParams{Pattern: "skill.>"}, func(ev *abi.Event) error {
		fmt.Println("replayed:", ev.Seq, ev.Type)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// stored at seq 1
	// live: skill.transcode.progress 42
	// replayed: 1 skill.transcode.progress
}

func startKernel() (string, func()) {
	dir, _ := os.MkdirTemp("", "kairo-example-")
	b := bus.New(bus.NewMemoryStore(0), bus.Config{})
	srv, err := ipc.Listen(kernel.New(b, kernel.Config{}), ipc.Config{Path: filepath.Join(dir, "kernel.sock")})
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve()
	return srv.Addr(), func() { srv.Close(); b.Close(); os.RemoveAll(dir) }
}
