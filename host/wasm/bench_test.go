package wasm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/kairo-os/kairo/abi"
)

// BenchmarkTickRoundTrip is one tick through a Go-SDK plugin: a batch of 3
// events of 64 B in, 3 actions out, with and without deadline enforcement.
// Beside each, in the same loop, the floor: a bare wazero call of an
// exported function passing the same bytes in and out, with nothing of the
// host around it. Ticks and floor calls alternate, so a machine busy with
// other work slows both alike, and each mode reports its p50, the floor's,
// and its ratio to the floor (ns/op counts a tick and floorGroup floor
// calls; allocs/op is the tick's, as the floor allocates nothing).
func BenchmarkTickRoundTrip(b *testing.B) {
	batch := testBatch(3, 64)
	for _, mode := range []string{"trusted", "enforced"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			floor := floorCall(b, batch)
			p := load(b, "echo", InstanceConfig{Trusted: mode == "trusted"})
			if _, err := p.Init(ctx, configOf(map[string]any{"publish": false})); err != nil {
				b.Fatal(err)
			}
			tick := func() error {
				out, err := p.Handle(ctx, batch)
				if err == nil && len(out.Reply.Actions) != 3 {
					err = fmt.Errorf("%d actions, want 3", len(out.Reply.Actions))
				}
				return err
			}
			for range 100 { // let the guest's heap settle
				if err := tick(); err != nil {
					b.Fatal(err)
				}
				if err := floor(); err != nil {
					b.Fatal(err)
				}
			}
			// A floor call takes about as long as reading the clock: time
			// floorGroup of them at once, counting as their mean.
			const floorGroup = 16
			took := make([]time.Duration, 0, b.N)
			floors := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				err := tick()
				took = append(took, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				start = time.Now()
				for range floorGroup {
					if err := floor(); err != nil {
						b.Fatal(err)
					}
				}
				floors = append(floors, time.Since(start)/floorGroup)
			}
			b.StopTimer()
			p50 := func(d []time.Duration) float64 {
				slices.Sort(d)
				return float64(d[len(d)/2].Nanoseconds()) / 1e3
			}
			tp, fp := p50(took), p50(floors)
			b.ReportMetric(tp, "p50-us")
			b.ReportMetric(fp, "floor-p50-us")
			b.ReportMetric(tp/fp, "ratio")
		})
	}
}

// floorCall returns a bare wazero call: the batch's bytes written into a
// guest's memory, an exported function called, as many bytes read back out
// and copied, in a runtime configured as the host configures its own.
func floorCall(b *testing.B, batch *abi.Batch) func() error {
	ctx := context.Background()
	in := abi.AppendBatch(nil, batch)
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	b.Cleanup(func() { rt.Close(ctx) })
	_, err := rt.NewHostModuleBuilder(abi.HostModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {}),
			[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, nil).
		Export(abi.ImportLog).Instantiate(ctx)
	if err != nil {
		b.Fatal(err)
	}
	// kairo_handle returns the input buffer, as long as the input.
	wasm := asmGuest{version: 1, handle: returns(asmInput, uint32(len(in)))}.bytes()
	mod, err := rt.Instantiate(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	fn, mem := mod.ExportedFunction(abi.ExportHandle), mod.Memory()
	var stack [1]uint64
	var out []byte
	return func() error {
		if !mem.Write(asmInput, in) {
			return errors.New("floor: write out of range")
		}
		stack[0] = uint64(len(in))
		if err := fn.CallWithStack(ctx, stack[:]); err != nil {
			return err
		}
		ptr, n := abi.UnpackPtrLen(stack[0])
		view, ok := mem.Read(ptr, n)
		if !ok {
			return errors.New("floor: read out of range")
		}
		out = append(out[:0], view...)
		if len(out) != len(in) {
			return fmt.Errorf("floor: %d bytes out, %d in", len(out), len(in))
		}
		return nil
	}
}

// BenchmarkPluginStartCached starts a plugin from the on-disk compilation
// cache in a fresh Engine, as after a restart: runtime, WASI and host module,
// instantiation and _initialize.
func BenchmarkPluginStartCached(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func() time.Duration {
		h, err := NewEngine(EngineConfig{CacheDir: dir, Logger: logger})
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close(ctx)
		t0 := time.Now()
		p, err := h.Load(ctx, guests["echo"], InstanceConfig{Name: "echo"})
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
			p, err := testEngine.Load(ctx, guests["echo"], InstanceConfig{Name: "echo"})
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
