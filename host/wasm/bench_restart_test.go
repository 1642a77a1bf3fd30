package wasm

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host/internal/meter"
)

// BenchmarkPluginRestart is a failed plugin back to serving, as its unit
// restarts it: its last instance closed, the module loaded again in the
// same Host (from its compilation cache) and initialised. Beside each, in
// the same loop, the floor: wazero instantiating the same module, already
// compiled, in a runtime that already has its imports, and running its
// _initialize. Restarts and floors alternate, so a busy machine slows both
// alike; it reports the p50 of each in ms and their ratio.
func BenchmarkPluginRestart(b *testing.B) {
	for _, mode := range []string{"trusted", "enforced"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			opts := Options{Name: "echo", Trusted: mode == "trusted"}
			wasm := guests["echo"]
			restart := func() time.Duration {
				t0 := time.Now()
				p, err := testHost.Load(ctx, wasm, opts)
				if err == nil {
					_, err = p.Init(ctx, configOf(nil))
				}
				took := time.Since(t0)
				if err != nil {
					b.Fatal(err)
				}
				p.Close(ctx)
				return took
			}

			// The floor's runtime: an instance's, kept open, whose module
			// stays compiled in the host's engine.
			held, err := testHost.Load(ctx, wasm, opts)
			if err != nil {
				b.Fatal(err)
			}
			defer held.Close(ctx)
			var bin []byte
			if held.metered {
				bin, err = meter.Rewrite(wasm)
			} else {
				bin, err = meter.Compact(wasm)
			}
			if err != nil {
				b.Fatal(err)
			}
			compiled, err := held.rt.CompileModule(ctx, bin)
			if err != nil {
				b.Fatal(err)
			}
			mcfg := wazero.NewModuleConfig().WithName("").WithStartFunctions()
			floor := func() time.Duration {
				t0 := time.Now()
				mod, err := held.rt.InstantiateModule(ctx, compiled, mcfg)
				if err == nil {
					_, err = mod.ExportedFunction(abi.ExportInitialize).Call(ctx)
				}
				took := time.Since(t0)
				if err != nil {
					b.Fatal(err)
				}
				mod.Close(ctx)
				return took
			}

			restart()
			floor()
			took := make([]time.Duration, 0, b.N)
			floors := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				took = append(took, restart())
				floors = append(floors, floor())
			}
			b.StopTimer()
			p50 := func(d []time.Duration) float64 {
				slices.Sort(d)
				return float64(d[len(d)/2].Microseconds()) / 1e3
			}
			r, f := p50(took), p50(floors)
			b.ReportMetric(r, "ms")
			b.ReportMetric(f, "floor-ms")
			b.ReportMetric(r/f, "ratio")
		})
	}
}
