package wasm

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus/sqlite"

	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
)

// reloadManifest is echo's, with a config that keeps its batches off the
// bus: a reload's first batch is the plugin's work alone.
const reloadManifest = `[plugin]
name = "echo"
kinds = ["policy"]

[grants]
subscribe = ["demo.>"]
publish = ["echo.>"]

[limits]
memory = "32MiB"

[config]
subscribe = "demo.>"
publish = false
`

// BenchmarkHotReload is a plugin's module file written again with the same
// bytes, as `make plugins` writes it (a temporary file renamed over it), to
// the reloaded plugin having handled its first batch: the manager's rescan
// (what its watcher runs once the folder has been quiet for settle, a
// pause left out here) stops the old unit, and the new one reads the file,
// finds its bytes are the module the old unit held, makes an instance of it
// and initialises it, subscribes, and takes a tick. Beside each, in the
// same loop, the floor of BenchmarkPluginRestart: wazero instantiating the
// same module, already compiled, and running its _initialize. Reloads and
// floors alternate, each round in the other order; it reports the p50 of
// each in ms and the median of the rounds' ratios; as cpu-ratio, the same
// of the process's CPU time over each (the reload's work on every
// goroutine, and whatever else the process did meanwhile); and fails if a
// reload compiled.
//
// The floor is wazero's: a reload cannot do less than make an instance of
// the module and initialise it. Where a reload's time went (echo,
// enforced, p50 of 200 on a loaded 2-core machine, with a floor of 3.6
// ms), before the manifest was kept and the memory's data left to the
// instantiation: 1.5 ms telling the file holds the bytes the old unit's
// module was made of (reading 3.9 MB from the page cache and comparing
// them, ~1 ms, which nothing short of reading them can tell; and reading,
// parsing and authorizing the manifest), 0.5 ms stopping the old unit
// (clearing its memory, now but for the ~1.9 MB its data segments write
// again), 0.3 ms the new unit reading its manifest again (now taken as the
// rescan read it) and authorizing it, 2.6 ms wazero's instantiation and
// _initialize (less than the floor's, as the memory comes from the
// module's pool), 0.8 ms the guest's init and 0.5 ms its first tick (the
// guest's own code, on its first calls), and 0.3 ms subscribing and
// reporting the start: 6.6 ms in all. With them, at the same floor: 1.5,
// 0.4, 0.1, 2.55, 0.85 and 0.4, 0.2 ms; 6.05 ms in all, a ratio of 1.69.
//
// Measured again, one reload's steps in order (marks around each, on a
// machine loaded 13-21 on its 2 cores; CPU profile of 300 reloads): the
// rescan's scan 0.13 ms, the compare 1.6-2.1 (1.3 ms of CPU: the read
// 0.7, the compare 0.5), the manifest and its authority 0.4, the old
// unit's stop 0.4-0.6 (its memory cleared), wazero's instantiation
// 1.2-1.5, _initialize 1.75-2.0, the guest's init 0.9, subscribing and
// reporting the start 0.25, the first tick 0.5-0.6: 7.7 ms, all of it on
// one path. What the floor does not do is all CPU (the guest's init and
// first tick, the read, the compare, the clearing), so it cannot be made
// shorter than it is without taking work from the guest's SDK; it can
// only run beside the instance's making. So the rescan now makes the new
// unit's instance while it compares the file (readyInstance), runs the
// guest's init while the old unit stops, and takes the manifest the old
// unit read when its file is unchanged. With a core to spare, a reload
// is the manifest, the longer of the compare and the instance's making,
// the init, subscribing and the first tick: by the steps above ~5.5 ms
// against the 7.7, an estimate, not a measure. On a machine with no core
// to spare the two paths take turns, and the ratio stays where it was
// (1.72 with the instance made after the compare, 1.77 with it made
// beside, in blocks of ten reloads alternated in one run at a load of
// 21). Runs of the code before and after, alternated (30x): 1.44, 1.44
// before; 1.50 after at a load of ~20, 1.07 at ~10. At a load of ~5,
// four runs of each: 1.55, 1.38, 1.67, 1.59 before (median 1.57); 1.10,
// 1.51, 1.34, 1.48 after (median 1.41). CPU is unchanged (cpu-ratio
// 1.38-1.69 before, 1.41-1.53 after). What remains above 1.3 is the
// guest's init and first tick on the serial path, and the compare where
// no core is free.
//
// Measured again (2026-11-30, marks along each reload, enforced, 60
// reloads, load 1-2; times from the rescan's start, medians): the scan,
// the manifest and the instance's start done at 0.13 ms; the compare at
// 0.59; the old unit stopped at 0.72; the new unit waiting for its
// instance from 0.79; the instance made at 1.61 (1.48 ms, where the
// floor's instantiation and _initialize together took 1.31, alone on its
// core); the guest's init done at 2.01; the unit serving at 2.09 and
// subscribed at 2.11; the first batch handled at 2.28. The instance is
// the path: the compare ends a millisecond before it. So the guest's
// init run at once, before the compare's verdict (tried), moved nothing
// the marks could see; four runs of each alternated gave 1.70, 1.57,
// 1.42, 1.52 without it and 1.36, 1.45, 1.43, 1.41 with it, the spread of
// five runs of this code that day (1.51-1.73), and it was not kept. What
// stands between the figure and 1.3 is what the floor does not run: the
// scan (0.13 ms), the guest's init (0.4) and its first batch (0.2), 0.7
// ms on a floor of 1.3, a ratio of 1.5 before any of Kairo's own work.
// Only an instance made before the rescan — when the watcher first sees
// the write, in the settle pause this benchmark leaves out — would take
// them off the path.
// Bytes that changed pay a compile (wazero's compiler, or its cache on
// disk): new-bytes-ms is one such reload, of the module with a custom
// section added, which wazero has never seen; measured once per mode.
func BenchmarkHotReload(b *testing.B) {
	for _, mode := range []string{"trusted", "enforced"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			folder := Folder{Path: b.TempDir(), Granted: true}
			if mode == "trusted" {
				folder = Folder{Path: folder.Path, Builtin: true}
			}
			path := filepath.Join(folder.Path, "echo.wasm")
			if err := os.WriteFile(filepath.Join(folder.Path, "echo.toml"), []byte(reloadManifest), 0o600); err != nil {
				b.Fatal(err)
			}
			write := func(wasm []byte) {
				tmp := path + ".tmp"
				if err := os.WriteFile(tmp, wasm, 0o600); err != nil {
					b.Fatal(err)
				}
				if err := os.Rename(tmp, path); err != nil {
					b.Fatal(err)
				}
			}
			write(guests["echo"])
			m := startBenchManager(b, folder)
			batch := testBatch(1, 64)
			// reload rescans after the file was written, and waits for
			// the new unit's first batch.
			reload := func() time.Duration {
				t0 := time.Now()
				m.Rescan()
				for {
					batch.Time = time.Now()
					_, err := m.Decide(ctx, "echo", batch)
					if err == nil {
						break
					}
					if time.Since(t0) > time.Minute {
						b.Fatalf("the reloaded plugin does not serve: %v", err)
					}
				}
				return time.Since(t0)
			}
			reload()

			// The floor, in a runtime of its own: one the benchmark held
			// would keep the module for the reloads.
			u, _ := m.unit("echo")
			u.mu.Lock()
			pages := u.held.prep.key.pages
			u.mu.Unlock()
			opts := InstanceConfig{Name: "echo", Trusted: mode == "trusted", MemoryPages: pages}
			opts.defaults()
			fm, err := testEngine.prepare(ctx, guests["echo"], &opts)
			if err != nil {
				b.Fatal(err)
			}
			defer fm.close()
			floor := floorOf(b, fm, &Plugin{opts: opts})
			write(guests["echo"])
			reload()
			floor()
			compiles := testEngine.compileCount()
			took := make([]time.Duration, 0, b.N)
			floors := make([]time.Duration, 0, b.N)
			// The CPU time of the process over each, which other
			// processes on the machine do not lengthen as they do the
			// wall time.
			var cpuTook, cpuFloors []time.Duration
			reloadCPU := withCPU(reload, &cpuTook)
			floorCPU := withCPU(floor, &cpuFloors)
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				write(guests["echo"])
				b.StartTimer()
				took, floors = inTurn(i, took, floors, reloadCPU, floorCPU)
			}
			b.StopTimer()
			if n := testEngine.compileCount() - compiles; n != 0 {
				b.Fatalf("%d reloads of the same bytes prepared the module %d times, want 0", b.N, n)
			}
			reportRatio(b, took, floors)
			b.ReportMetric(medianRatio(cpuTook, cpuFloors), "cpu-ratio")

			newBytesOnce[mode].Do(func() {
				wasm := withCustomSection(guests["echo"], "bench", strconv.FormatInt(time.Now().UnixNano(), 10))
				write(wasm)
				newBytes[mode] = reload()
				write(guests["echo"])
				reload()
			})
			b.ReportMetric(float64(newBytes[mode].Microseconds())/1e3, "new-bytes-ms")
		})
	}
}

// One reload of new bytes per mode and test binary: it compiles.
var (
	newBytesOnce = map[string]*sync.Once{"trusted": {}, "enforced": {}}
	newBytes     = map[string]time.Duration{}
)

// withCustomSection is wasm with a custom section name holding text added.
func withCustomSection(wasm []byte, name, text string) []byte {
	body := uleb(nil, uint64(len(name)))
	body = append(append(body, name...), text...)
	out := append([]byte(nil), wasm...)
	out = append(out, 0)
	out = uleb(out, uint64(len(body)))
	return append(out, body...)
}

// startBenchManager starts a manager over folder on a kernel of its own,
// with the shared host; it stops when the benchmark ends.
func startBenchManager(tb testing.TB, folder Folder) *Manager {
	tb.Helper()
	store, err := sqlite.Open(filepath.Join(tb.TempDir(), "events.db"), sqlite.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	bs := bus.New(store, bus.Config{})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	k := kernel.New(bs, kernel.Config{Logger: logger})
	m := NewManager(ManagerConfig{Engine: testEngine, Kernel: k, Folders: []Folder{folder}, Logger: logger})
	tb.Cleanup(func() {
		m.Stop()
		k.Close()
		bs.Close()
	})
	if err := m.Start(); err != nil {
		tb.Fatal(err)
	}
	return m
}
