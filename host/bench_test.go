package host

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"testing"
	"time"
)

// BenchmarkTickRoundTrip is one tick through a Go-SDK plugin: a batch of 3
// events of 64 B in, 3 actions out, with and without deadline enforcement.
func BenchmarkTickRoundTrip(b *testing.B) {
	for _, mode := range []string{"trusted", "enforced"} {
		b.Run(mode, func(b *testing.B) {
			p := load(b, "echo", Options{Trusted: mode == "trusted"})
			ctx := context.Background()
			if _, err := p.Init(ctx, configOf(map[string]any{"publish": false})); err != nil {
				b.Fatal(err)
			}
			batch := testBatch(3, 64)
			for range 100 { // let the guest's heap settle
				if _, err := p.Handle(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			took := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				out, err := p.Handle(ctx, batch)
				took = append(took, time.Since(start))
				if err != nil || len(out.Reply.Actions) != 3 {
					b.Fatalf("%v, %d actions", err, len(out.Reply.Actions))
				}
			}
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1e3, "p50-us")
		})
	}
}

// BenchmarkPluginStartCached starts a plugin from the on-disk compilation
// cache in a fresh Host, as after a restart: runtime, WASI and host module,
// instantiation and _initialize.
func BenchmarkPluginStartCached(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func() time.Duration {
		h, err := New(Config{CacheDir: dir, Logger: logger})
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close(ctx)
		t0 := time.Now()
		p, err := h.Load(ctx, guests["echo"], Options{Name: "echo"})
		took := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		p.Close(ctx)
		return took
	}
	start() // compiles and fills the cache
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		total += start()
	}
	b.ReportMetric(float64(total.Microseconds())/1e3/float64(b.N), "ms")
}

// BenchmarkPluginMemory is the memory one Go plugin instance holds once it
// has served: the Go heap the host grows by per instance (the guest's
// linear memory lives there) and, apart, the guest's linear memory.
func BenchmarkPluginMemory(b *testing.B) {
	ctx := context.Background()
	const n = 4
	batch := testBatch(3, 64)
	var heap, linear float64
	for range b.N {
		before := heapInUse()
		ps := make([]*Plugin, n)
		for i := range ps {
			p, err := testHost.Load(ctx, guests["echo"], Options{Name: "echo"})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.Init(ctx, configOf(nil)); err != nil {
				b.Fatal(err)
			}
			for range 100 {
				if _, err := p.Handle(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			ps[i] = p
		}
		heap = float64(heapInUse()-before) / n / (1 << 20)
		linear = float64(ps[0].mod.Memory().Size()) / (1 << 20)
		for _, p := range ps {
			p.Close(ctx)
		}
	}
	b.ReportMetric(heap, "MiB")
	b.ReportMetric(linear, "linear-MiB")
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}
