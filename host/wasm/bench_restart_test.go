package wasm

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/kairo-os/kairo/abi"
)

// BenchmarkPluginRestart is a failed plugin back to serving, as its unit
// restarts it: its last instance closed, its files read again (the module
// from the unit's last read, as the file is unchanged), an instance made of
// the module the unit holds, and initialised. Beside each, in the same loop,
// the floor: wazero instantiating the same module, already compiled, in the
// same runtime, which has its imports, and running its _initialize.
// Restarts and floors alternate, each round in the other order (ABBA), so a
// busy machine slows both alike; it reports the p50 of each in ms and the
// median of the rounds' ratios.
func BenchmarkPluginRestart(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "echo.wasm")
	if err := os.WriteFile(path, guests["echo"], 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "echo.toml"), []byte("[plugin]\nname = \"echo\"\nkinds = [\"policy\"]\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"trusted", "enforced"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			opts := InstanceConfig{Name: "echo", Trusted: mode == "trusted"}
			// The unit's own code: readFiles and instance.
			u := &unit{m: &Manager{cfg: ManagerConfig{Engine: testEngine}}, files: pluginFiles{wasm: path, stamp: stampOf(path)}}
			defer u.dropModules()
			restart := func() time.Duration {
				t0 := time.Now()
				_, wasm, err := u.readFiles()
				var p *Plugin
				if err == nil {
					p, err = u.instance(ctx, wasm, opts)
				}
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
			restart() // the unit's first start: prepares the module

			// The floor's runtime: the module's, and its compiled guest.
			// Its instance's host functions serve held, as an instance's
			// serve their plugin.
			held, err := u.held.prep.Instantiate(ctx, opts)
			if err != nil {
				b.Fatal(err)
			}
			defer held.Close(ctx)
			floor := floorOf(b, held.module, held)
			restart()
			floor()
			took := make([]time.Duration, 0, b.N)
			floors := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				took, floors = inTurn(i, took, floors, restart, floor)
			}
			b.StopTimer()
			reportRatio(b, took, floors)
		})
	}
}

// floorOf is the floor of a plugin's start: wazero instantiating mod's
// compiled guest in its runtime and running its _initialize, the host
// functions serving p, under a name registered for the benchmark.
func floorOf(b *testing.B, mod *Module, p *Plugin) func() time.Duration {
	ctx := context.Background()
	name := mod.register("floor", p)
	b.Cleanup(func() { mod.unregister(name) })
	mcfg := wazero.NewModuleConfig().WithName(name).WithStartFunctions()
	return func() time.Duration {
		t0 := time.Now()
		g, err := mod.rt.InstantiateModule(ctx, mod.compiled, mcfg)
		if err == nil {
			_, err = g.ExportedFunction(abi.ExportInitialize).Call(ctx)
		}
		took := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		g.Close(ctx)
		return took
	}
}

// inTurn runs one round of a and its floor, in turn: a first in even
// rounds, the floor first in odd ones (ABBA), so neither is always the one
// that runs after the other; it appends their times.
func inTurn(round int, took, floors []time.Duration, a, floor func() time.Duration) ([]time.Duration, []time.Duration) {
	if round%2 == 0 {
		t := a()
		return append(took, t), append(floors, floor())
	}
	f := floor()
	return append(took, a()), append(floors, f)
}

// reportRatio reports the medians of took and floors in ms, and as the
// ratio the median of the rounds' ratios, took[i] over floors[i]: a round
// the machine slowed slows both of its runs, so its ratio holds where a
// ratio of medians would pair runs of different rounds.
func reportRatio(b *testing.B, took, floors []time.Duration) {
	ratio := medianRatio(took, floors)
	b.ReportMetric(p50ms(took), "ms")
	b.ReportMetric(p50ms(floors), "floor-ms")
	b.ReportMetric(ratio, "ratio")
}

// medianRatio is the median of took[i] over floors[i].
func medianRatio(took, floors []time.Duration) float64 {
	ratios := make([]float64, len(took))
	for i := range took {
		ratios[i] = float64(took[i]) / float64(max(floors[i], 1))
	}
	slices.Sort(ratios)
	return ratios[len(ratios)/2]
}

// withCPU is f, recording in cpu the CPU time the process spent, on all
// its threads, over each call.
func withCPU(f func() time.Duration, cpu *[]time.Duration) func() time.Duration {
	return func() time.Duration {
		c0 := processCPU()
		d := f()
		*cpu = append(*cpu, processCPU()-c0)
		return d
	}
}

// processCPU is the user and system CPU time of the process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// p50ms is the median of d in ms.
func p50ms(d []time.Duration) float64 {
	slices.Sort(d)
	return float64(d[len(d)/2].Microseconds()) / 1e3
}
