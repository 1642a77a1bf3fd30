package bench

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/ipc"
)

func startKernel(b *testing.B) (*bus.Bus, string) {
	dir, err := os.MkdirTemp("", "kairo-bench-")
	if err != nil {
		b.Fatal(err)
	}
	bs := bus.New(bus.NewMemoryStore(1<<20), bus.Config{})
	k := kernel.New(bs, kernel.Config{})
	path := filepath.Join(dir, "kernel.sock")
	srv, err := ipc.Listen(k, ipc.Config{Path: path})
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve()
	b.Cleanup(func() {
		srv.Close()
		k.Close()
		bs.Close()
		os.RemoveAll(dir)
	})
	return bs, path
}

// BenchmarkIPCPing is the kernel.ping round trip over the socket, one call
// at a time; it reports the median.
func BenchmarkIPCPing(b *testing.B) {
	_, path := startKernel(b)
	ctx := context.Background()
	c := dial(b, path)
	for i := 0; i < 1000; i++ { // warm up connections, pools and the scheduler
		if _, err := c.Ping(ctx); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range lat {
		d, err := c.Ping(ctx)
		if err != nil {
			b.Fatal(err)
		}
		lat[i] = d
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-us")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-us")
}

// BenchmarkIPCPush is events pushed to one subscriber over the socket:
// published in-process with 256-byte payloads, counted as the client reads
// them.
func BenchmarkIPCPush(b *testing.B) {
	bs, path := startKernel(b)
	ctx := context.Background()
	c := dial(b, path)
	sub, err := c.Subscribe(ctx, "kairo.>", 0)
	if err != nil {
		b.Fatal(err)
	}
	data := benchPayload(b)
	b.ResetTimer()
	start := time.Now()
	errc := make(chan error, 1)
	go func() {
		for i := 0; i < b.N; i++ {
			if _, err := bs.Publish(ctx, &abi.Event{Type: "kairo.bench.event", Data: data}); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	var last uint64
	for n := 0; n < b.N; n++ {
		ev, err := sub.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if ev.Seq <= last {
			b.Fatalf("seq %d after %d", ev.Seq, last)
		}
		last = ev.Seq
	}
	elapsed := time.Since(start)
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}
