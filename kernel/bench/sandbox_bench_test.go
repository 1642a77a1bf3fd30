package bench

import (
	"bytes"
	"cmp"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/sandbox"
	"github.com/kairo-os/kairo/sdk/client"
	"github.com/vmihailenco/msgpack/v5"
)

// BenchmarkSandboxSpawn is the time from process.spawn of /bin/true to its
// kairo.process.exited event at a subscribed client, p50, through a `kairo
// up` that sandboxes it (p50-ms), against bubblewrap starting the same
// /bin/true with `--unshare-all --ro-bind / /` (bwrap-p50-ms) in the same
// loop: bwrap-ratio is the median of the per-iteration ratios of the two,
// the figure of issue 36 (goal: 0.5 or less). The same loop times a `kairo
// up` with sandbox.mode = "off" (bare-p50-ms; ratio is the median of the
// per-iteration ratios of the sandboxed daemon to it); the sandbox as the
// kernel launches it, with no socket or durable store in between
// (launcher-p50-ms: the Sandboxed launcher with its warm helpers and, as
// root where the host has them, a cgroup per tree made and removed, under
// a process manager on a memory bus); and a plain fork and exec
// (exec-p50-ms). Each iteration runs every kind once, in the opposite
// order to the one before (ABBA), so that whatever else the machine does,
// and what one spawn leaves to do in the background (a warm helper
// started to replace the one taken, a cgroup removed), weighs on each
// alike. Without bwrap installed, bwrap-ratio is not reported. Then, up to
// 60 times, the sandboxed spawn and bwrap alone, each after a pause of
// settle: settled-bwrap-ratio, settled-p50-ms and settled-bwrap-p50-ms
// are a spawn's latency when spawns are spaced, the back-to-back loop's
// leftovers (the pool's refill, namespaces torn down, bwrap's network
// namespace cleaned up by the kernel) done before it starts.
//
// The floor is the plain exec: a sandbox costs at least a fork and exec of
// its target. Where the time went, measured on 2 shared cores (perf and
// pprof of the launcher alone, -benchtime 300x, before the work of issue
// 36): of about 3.3 ms of CPU per spawn on its path, the exec of the
// target from the Go helper and the target's run were 1.4 ms (the floor,
// and the Go helper's address space torn down at exec); the kernel's
// Launch 0.7 ms (its policy's paths stat'ed and resolved again for every
// spawn, 0.45 ms; a uid lock file taken, 0.2 ms); the helper's receipt of
// the plan and its confinement 0.6 ms (the Landlock ruleset, 0.15 ms; the
// seccomp filter compiled by the kernel, 0.13 ms; the capability bounding
// set emptied call by call, 0.09 ms); the reap of the exit 0.3 ms. The
// daemon's own path — the request on the socket, the spawned and exited
// events committed to the store and delivered — is in bare-p50-ms too.
//
// bwrap is no floor to beat by much: it pays a fork, namespaces and the
// target's exec, as the sandbox does. A timeline of one spawn inside `kairo
// up` (temporary timestamps in the daemon, the helper and the client, with
// perf's sched_process_exec/exit and signal_generate in the same clock;
// 30 spawns, medians, 2 cores at load 15-24) found, before the filter and
// the namespace moved off the path: the target's exit reached the daemon
// 2 to 6 ms after it exited (0.06-0.2 ms without the sandbox), because the
// exit of the last process of a mount namespace — the helper's, made for
// the private /proc — tears it down and waits for an RCU grace period
// before it tells the parent (the kernel now holds the namespace and
// closes it after the exited event); and the seccomp filter's install,
// 330 µs (now done while the helper waits). What is on the path now, in
// microseconds: the request reaching the daemon 200-270; the Launch 300,
// of which the helper's command (sandbox.Command: the program looked up,
// the plan made and encoded, the pipes) 200-250; the handoff and the
// helper's wake 250-300; Landlock 50-80, the uid drop 30-60, the limits
// 10; the exec of the target from the Go helper 370-870 (its runtime's
// threads ended and its address space torn down: an exec from a small
// process would not pay most of it); /bin/true 450-750; the exit's reap,
// the pipes' end and the spawned and exited events committed and
// delivered 1-2 ms, which a spawn without the sandbox pays too
// (bare-p50-ms). On 2 loaded cores each of these also waits for a core,
// and the figures swing from run to run: bwrap-ratio 1.47 and 1.29 before
// the namespace was held, 0.68 and 0.94 after.
//
// The daemon's own path, which bare-p50-ms pays too, timed the same way
// (60 spawns spaced by 20 ms, medians from the client's call, load 8 on 2
// cores, sandbox off): the request read by the daemon at 280 µs, the spawn
// handler reached at 460; the fork and exec 1.1 ms; the response written
// at 2.4 ms, after the spawned event's commit, which ran on the other core
// meanwhile; the reap at 3.1 ms, the pipes' end at 3.1-3.2; the exited
// event published at 3.5 (one goroutine hand-off between the pipes' end
// and the reap, two before), committed at 3.7, written to the client at
// 3.9 and read there at 3.9, against 2.0 ms for a plain fork and exec in
// the same run. The daemon spent 2.1-2.4 ms of CPU a spawn (/proc's utime
// and stime), as much as the plain exec takes from end to end; pprof: the
// fork and exec and the three pipes 17 %, the collector 18 % and the read
// buffers made and cleared 7 %, the two commits 13 %, the pumps 11 %, the
// reap 6 %. With the buffers from a pool, 1.95 ms against 2.4 alternated
// in one run. A sandboxing daemon spent 4-6 ms of CPU a spawn (3.5 with
// the buffer pool against 4.0, alternated): the warm pool's refill about
// 1 ms of it (a helper started, its cgroup and uid lock made), the
// janitor's removals and the closed mount namespace 0.4 ms. On a spawn's own path (load 13,
// 60 spawns, medians): the Launch 350-410 µs; the helper's receipt of the
// spawn 470 µs after; its confinement 200 µs; its exec of the target until
// the daemon sees the status pipe close 1.7 ms; then as without the
// sandbox. A Go program like the waiting helper (GOMAXPROCS=1, a locked
// thread, 4-5 threads while it waits) that execs /bin/true when told took
// 1.8-2.2 ms from the word to the exit, a shell 1.5 ms: the threads ended
// and the address space torn down at exec. On 2 cores shared with the
// client, the target and the helpers, the daemon's CPU is the largest item
// left that a change of the daemon alone can cut; the next are the
// helper's exec and the pool's refill, which back to back lands on the
// spawns after.
//
// A second pass (perf's sys_enter_execve, sched_process_exec and
// sched_process_exit, 60-200 spawns, load 10-18 on 2 cores; medians): the
// warm helper's execve of /bin/true took 500-670 µs, a vfork'd child's of
// the benchmark 200 and bwrap's 260. The helper's 3-4 other threads
// (sysmon, the template thread LockOSThread starts, one or two idle Ms)
// were gone 160-200 µs in; the rest is its Go address space unmapped and
// /bin/true loaded. /bin/true's own run, exec to exit, took 690 µs under
// Landlock and the filter, 610 plain, 630 under bwrap. Tried and not kept:
// the helper run from an init function, where the runtime has locked the
// main thread and no template thread is started (one thread fewer, their
// end 196 -> 170 µs, a shorter tail), which changes how a binary embeds
// the helper; the helper's mappings of its code dropped (madvise) while it
// waits, 80 µs less in one build and 40 µs more in another of the same
// code; the janitor's removals held 2 ms past the exited event, no change
// measurable. Kept: the uid lock files, on the disk (/run), are no longer
// truncated and no longer written under the launcher's mutex, which every
// spawn's Launch takes. A truncation is a journalled change of the file,
// and on a busy disk a free under the mutex held up the next spawn: in
// the daemon's profile free was 9 % of its CPU; alternated with the code
// before (4 rounds, load 11-19), launcher-p50-ms 3.9-5.8 -> 2.9-3.8 and
// bwrap-ratio 0.52-0.75 (median 0.68) -> 0.53-0.59 (0.57), while
// settled-bwrap-ratio did not improve (0.51-0.72 -> 0.66-0.69; 0.56-0.96
// -> 0.57-0.68 in five earlier rounds of the first change). On the quieter
// machine (7 rounds, load 2-5) the two were close: bwrap-ratio 0.51-0.66
// (median 0.57) -> 0.51-0.61 (0.53), settled 0.45-0.61 (0.55) -> 0.44-0.63
// (0.53): the mutex held across a journalled write cost most where the
// disk was busy.
//
// A third pass (the sandboxing daemon's pprof under this benchmark, 200
// spawns, load 16 on 2 cores; 7.6 ms of its CPU a spawn): the pool's
// refill 24 % (the helper's fork and exec a third of it, its move into
// the cgroup v1 hierarchies, cgroup.procs written, a quarter, the tree's
// cgroups made an eighth), the spawn's request and Launch 13 %, the
// commits 9 %, the reap 9 % (memory.events read for the OOM count, the
// cgroup's kill check), sandbox.Command 6 %. Kept: a spawn handed to a
// warm helper makes no policy pipe (the plan travels in the handoff:
// sandbox.HandoffCommand), and Command's pipes stay out of the runtime's
// poller but for the status pipe's read end, which Started's deadline
// needs: Command's CPU a spawn 159-219 µs (median 177) -> 129-193 (144),
// alternated, 8 rounds of 2000 at load 35-40. The figure itself could not
// resolve it: at load 23-42 bwrap-p50-ms swung between 100 and 255 ms and
// bwrap-ratio between 0.33 and 0.60 from run to run of the same binary.
// Reasoned and not tried: the target exec'd from a vfork'd child of the
// helper's confined thread spares the exec the Go address space, but
// leaves the helper's own exit (its threads ended, the same address space
// torn down) between the target's exit and the daemon's reap, unless the
// target is the daemon's child (CLONE_PARENT) and the Session waits for
// it rather than for the helper: a change of the reap, not of the helper
// alone. The move into the cgroup that the refill pays could be spared by
// clone3's CLONE_INTO_CGROUP (SysProcAttr.UseCgroupFD), on cgroup v2
// only; the machines measured have memory and pids on v1.
//
// A fourth pass, on why the daemon's sandboxed spawn cost about 10 ms
// more back to back than spaced (17 against 6.5 ms at load 2) while the
// launcher's, also warm and in cgroups, did not: in this loop the
// launcher's spawns are never next to one of their own, the daemon's are
// at each odd-even boundary. Sandboxed spawns in runs of three back to
// back (a temporary benchmark, 20 rounds, load 6.5-7.7): the first 20 ms,
// the second 37-40, the third 89; the launcher's alone the same (second
// 38-43). The pool's refill, a helper started 5 ms after a spawn ended,
// held the leaders' lock (reaper.go) while the helper's runtime started,
// and the next spawn's handoff and its exit's reap (forgetLeader, before
// the exited event) waited for all of it. Kept: the lock covers the
// helper's fork alone (sandbox.BeginWarm, then WaitWarm outside it): the
// second spawn 14-15 ms, as the first, the third 46-48 (the pool empty:
// it starts its own helper on its path); alternated, 8 runs of 60x at
// load 2.4-10.4, bwrap-ratio 0.61-0.71 (median 0.62) -> 0.40-0.58 (0.42),
// ratio to bare 2.08-2.43 -> 1.58-1.94, settled-bwrap-ratio unchanged
// (0.38-0.49 against 0.36-0.45). With pairs back to back against pairs
// 20 ms apart, the second of a pair was no longer clearly slower (11-33
// against 11-19 ms at load 8, two runs each: noise larger than the gap).
// Kept too: the refill waits 15 ms after a spawn's end (refillEnd), not
// 5, which had landed in the middle of a spawn that came right after;
// alternated, 8 runs of 60x at load 4.1-5.1, bwrap-ratio 0.46-0.63
// (median 0.53) -> 0.40-0.44 (0.43), ratio to bare 1.62-1.96 ->
// 1.38-1.61, settled unchanged (0.44-0.48 against 0.41-0.48).
//
// The goal of 0.5 was met in every run of the last eight, at load 4-5;
// before the refill's wait, not on a quiet machine (0.58 at load 2.4,
// where bwrap runs fastest), which has not been measured since. What stands
// between the sandboxed spawn and half of bwrap's: the daemon's own path,
// which bare-p50-ms pays as well (1.2-1.6 ms over the plain exec: two
// commits, the hand-offs to the reap and the pumps); the exec from a Go
// helper, about 300 µs over a vfork'd exec; the helper's wake and
// confinement, 0.5-0.7 ms loaded; the Launch, 0.3 ms of the daemon's CPU;
// the pool's refill, about 1.8 ms of the daemon's CPU a spawn, which back
// to back still competes with the spawns after for the 2 cores (no longer
// through the lock, and mostly after the next spawn); a third spawn in a
// row, which finds the pool empty and starts its own helper.
func BenchmarkSandboxSpawn(b *testing.B) {
	sandboxed := newSpawner(b, "")
	bare := newSpawner(b, "[sandbox]\nmode = \"off\"\n")
	launcher := newLauncherSpawner(b)
	bwrap, _ := exec.LookPath("bwrap")
	if bwrap == "" {
		b.Log("bwrap is not installed (apt-get install bubblewrap): no bwrap-ratio")
	}
	lat, bareLat := make([]time.Duration, b.N), make([]time.Duration, b.N)
	launchLat, execLat, bwrapLat := make([]time.Duration, b.N), make([]time.Duration, b.N), make([]time.Duration, b.N)
	kinds := []func(i int){
		func(i int) { lat[i] = sandboxed.spawnExit(b, "/bin/true") },
		func(i int) { bareLat[i] = bare.spawnExit(b, "/bin/true") },
		func(i int) { launchLat[i] = launcher.spawnExit(b, "/bin/true") },
		func(i int) { execLat[i] = timeRun(b, exec.Command("/bin/true")) },
		func(i int) {
			if bwrap != "" {
				bwrapLat[i] = timeRun(b, exec.Command(bwrap, "--unshare-all", "--ro-bind", "/", "/", "/bin/true"))
			}
		},
	}
	// The first spawn of each starts its warm helpers: not timed.
	sandboxed.spawnExit(b, "/bin/true")
	bare.spawnExit(b, "/bin/true")
	launcher.spawnExit(b, "/bin/true")
	time.Sleep(100 * time.Millisecond)
	b.ResetTimer()
	for i := range b.N {
		for k := range kinds {
			if i%2 == 1 {
				k = len(kinds) - 1 - k
			}
			kinds[k](i)
		}
	}
	b.StopTimer()
	ms := func(ds []time.Duration) float64 { return median(ds).Seconds() * 1e3 }
	ratio := func(num, den []time.Duration) float64 {
		rs := make([]float64, len(num))
		for i := range num {
			rs[i] = num[i].Seconds() / den[i].Seconds()
		}
		return medianOf(rs)
	}
	if bwrap != "" {
		// Settled: the same two, each spawn after a pause in which what
		// the one before left to do (a warm helper started in its place,
		// a namespace torn down, bwrap's network namespace cleaned up by
		// the kernel) is done: a spawn's latency when spawns are spaced,
		// as an agent's tool calls are, where the loop above measures
		// them back to back, each paying for its neighbours' leftovers.
		n := min(b.N, 60)
		slat, sbw := make([]time.Duration, n), make([]time.Duration, n)
		for i := range n {
			pair := []func(){
				func() { slat[i] = sandboxed.spawnExit(b, "/bin/true") },
				func() {
					sbw[i] = timeRun(b, exec.Command(bwrap, "--unshare-all", "--ro-bind", "/", "/", "/bin/true"))
				},
			}
			if i%2 == 1 {
				pair[0], pair[1] = pair[1], pair[0]
			}
			for _, run := range pair {
				time.Sleep(settle)
				run()
			}
		}
		b.ReportMetric(ratio(slat, sbw), "settled-bwrap-ratio")
		b.ReportMetric(ms(slat), "settled-p50-ms")
		b.ReportMetric(ms(sbw), "settled-bwrap-p50-ms")
	}
	b.ReportMetric(0, "ns/op") // an iteration is several spawns: p50-ms and bwrap-ratio are the figures
	b.ReportMetric(ratio(lat, bareLat), "ratio")
	if bwrap != "" {
		b.ReportMetric(ratio(lat, bwrapLat), "bwrap-ratio")
		b.ReportMetric(ms(bwrapLat), "bwrap-p50-ms")
	}
	b.ReportMetric(ms(lat), "p50-ms")
	b.ReportMetric(ms(bareLat), "bare-p50-ms")
	b.ReportMetric(ms(launchLat), "launcher-p50-ms")
	b.ReportMetric(ms(execLat), "exec-p50-ms")
}

// settle is the pause before each spawn of BenchmarkSandboxSpawn's
// settled figures: longer than a warm helper's start or a namespace's
// teardown on a loaded machine.
const settle = 40 * time.Millisecond

// timeRun is how long cmd takes from start to exit.
func timeRun(b *testing.B, cmd *exec.Cmd) time.Duration {
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%v: %v", cmd.Args, err)
	}
	return time.Since(start)
}

// launcherSpawner runs processes through the kernel's Sandboxed launcher
// and a process manager, with no socket or durable store in between.
type launcherSpawner struct {
	m *proc.Manager
}

func newLauncherSpawner(b *testing.B) *launcherSpawner {
	b.Helper()
	root, err := proc.ScratchRoot("bench-" + strconv.Itoa(os.Getpid()))
	if err != nil {
		b.Fatal(err)
	}
	l := &proc.Sandboxed{Helper: filepath.Join(filepath.Dir(kairoBinary(b)), "kairo-sandbox"), Root: root, Warm: 2}
	if cgs, err := proc.FindCgroups(); err == nil {
		h, err := cgs.Home("kairo-bench-" + strconv.Itoa(os.Getpid()))
		if err != nil {
			b.Fatal(err)
		}
		l.Cgroups = h
		b.Cleanup(func() {
			h.Sweep()
			for _, d := range h.Dirs() {
				syscall.Rmdir(d)
			}
		})
	}
	bs := bus.New(bus.NewMemoryStore(1<<16), bus.Config{})
	m := proc.NewManager(bs, proc.Config{Launcher: l})
	b.Cleanup(func() {
		m.Close()
		l.Close()
		bs.Close()
		os.RemoveAll(root)
	})
	return &launcherSpawner{m}
}

func (s *launcherSpawner) spawnExit(b *testing.B, argv ...string) time.Duration {
	start := time.Now()
	p, err := s.m.Spawn(proc.Spec{Argv: argv}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	p.Wait(context.Background())
	return time.Since(start)
}

// spawner is a client of one daemon, subscribed to its exits.
type spawner struct {
	c     *client.Client
	exits *client.Subscription
}

// newSpawner starts a daemon with config as its kairo.toml.
func newSpawner(b *testing.B, config string) *spawner {
	b.Helper()
	path, _ := startDaemonConfig(b, config)
	c := dial(b, path)
	exits, err := c.Subscribe(context.Background(), "kairo.process.exited", 0)
	if err != nil {
		b.Fatal(err)
	}
	return &spawner{c, exits}
}

// spawnExit spawns argv and returns the time until its exit event arrives.
func (s *spawner) spawnExit(b *testing.B, argv ...string) time.Duration {
	ctx := context.Background()
	start := time.Now()
	var info abi.ProcessInfo
	if err := s.c.Call(ctx, abi.MethodProcessSpawn, abi.SpawnParams{Argv: argv}, &info); err != nil {
		b.Fatal(err)
	}
	for {
		ev, err := s.exits.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var data struct {
			ProcessID string `msgpack:"processId"`
		}
		msgpack.Unmarshal(ev.Data, &data)
		if data.ProcessID == info.ID {
			return time.Since(start)
		}
	}
}

// BenchmarkSandboxSyscall is what the seccomp filter adds to a system call
// inside a running child, timed by the child itself (testdata/sysloop). The
// call is ioctl(-1, TCGETS): the filter reads ioctl's request argument, so
// the kernel's seccomp cache cannot allow it unseen and every call runs the
// filter's dispatch. ns/syscall is the sandboxed figure, bare-ns/syscall
// the same probe exec'd plainly as the same uid, overhead-ns/syscall the
// difference; cached-overhead-ns/syscall is the difference for getppid, a
// call the cache allows without running the filter. Each figure is the
// median over b.N runs of the probe.
func BenchmarkSandboxSyscall(b *testing.B) {
	const calls = 10000
	p := newProbe(b)
	sandboxed, bare := p.compare(b, "syscall", strconv.Itoa(calls))
	ns, bareNS := sandboxed["ioctl"], bare["ioctl"]
	b.ReportMetric(0, "ns/op") // an iteration is two runs of the probe
	b.ReportMetric(ns, "ns/syscall")
	b.ReportMetric(bareNS, "bare-ns/syscall")
	b.ReportMetric(ns-bareNS, "overhead-ns/syscall")
	b.ReportMetric(sandboxed["getppid"]-bare["getppid"], "cached-overhead-ns/syscall")
}

// BenchmarkSandboxOpen is what the Landlock ruleset (and the filter) add
// to an open and close of a file in a granted folder inside a running
// child: ns/open sandboxed, bare-ns/open exec'd plainly as the same uid,
// overhead-ns/open the difference; medians over b.N runs of the probe.
// The file is three folders below the root, and Landlock's walk up the
// path is what grows with depth.
func BenchmarkSandboxOpen(b *testing.B) {
	const opens = 1000
	p := newProbe(b)
	sandboxed, bare := p.compare(b, "open", strconv.Itoa(opens), p.data)
	ns, bareNS := sandboxed["open"], bare["open"]
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ns, "ns/open")
	b.ReportMetric(bareNS, "bare-ns/open")
	b.ReportMetric(ns-bareNS, "overhead-ns/open")
}

// sandboxUID is the uid the probe runs as when the benchmark is root: the
// helper refuses to keep root, and the bare run takes the same uid so that
// the difference is the sandbox's alone.
const sandboxUID = 2000000200

// probe is testdata/sysloop built static into a folder the sandbox's uid
// can reach, with a file to open beside it.
type probe struct {
	helper string // kairo, the sandbox helper
	bin    string
	data   string
	policy *sandbox.Policy
}

func newProbe(b *testing.B) *probe {
	b.Helper()
	helper := kairoBinary(b)
	dir, err := os.MkdirTemp("", "kairo-bench-sysloop-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	p := &probe{helper: helper, bin: filepath.Join(dir, "sysloop"), data: filepath.Join(dir, "data")}
	build := exec.Command("go", "build", "-o", p.bin, "./testdata/sysloop")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build sysloop: %v\n%s", err, out)
	}
	work, tmp := filepath.Join(dir, "work"), filepath.Join(dir, "tmp")
	for _, d := range []string{work, tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(p.data, []byte("sysloop\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	// Whatever the umask: the sandbox's uid must reach all of it.
	for f, mode := range map[string]os.FileMode{dir: 0o755, work: 0o755, tmp: 0o755, p.bin: 0o755, p.data: 0o644} {
		if err := os.Chmod(f, mode); err != nil {
			b.Fatal(err)
		}
	}
	p.policy = sandbox.Default(work, tmp, nil)
	p.policy.Exec = append(p.policy.Exec, dir)
	p.policy.Read = append(p.policy.Read, dir)
	if os.Geteuid() == 0 {
		p.policy.UID, p.policy.GID = sandboxUID, sandboxUID
	}
	return p
}

// compare runs the probe with args b.N times sandboxed and b.N times bare,
// interleaved, and returns the median of each figure it printed.
func (p *probe) compare(b *testing.B, args ...string) (sandboxed, bare map[string]float64) {
	b.Helper()
	var runs, bareRuns []map[string]float64
	b.ResetTimer()
	for range b.N {
		runs = append(runs, p.run(b, true, args))
		bareRuns = append(bareRuns, p.run(b, false, args))
	}
	b.StopTimer()
	return medians(runs), medians(bareRuns)
}

// run runs the probe once and parses its "name ns" lines.
func (p *probe) run(b *testing.B, sandboxed bool, args []string) map[string]float64 {
	b.Helper()
	var out, errOut bytes.Buffer
	var err error
	if sandboxed {
		err = p.runSandboxed(args, &out, &errOut)
	} else {
		cmd := exec.Command(p.bin, args...)
		cmd.Env = p.policy.Env
		cmd.Dir = p.policy.Dir
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: sandboxUID, Gid: sandboxUID}}
		}
		err = cmd.Run()
	}
	if err != nil {
		b.Fatalf("sysloop %s (sandboxed %v): %v\n%s", strings.Join(args, " "), sandboxed, err, errOut.Bytes())
	}
	figures := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		name, v, ok := strings.Cut(line, " ")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil {
			b.Fatalf("sysloop printed %q, not \"name ns\"", line)
		}
		figures[name] = f
	}
	return figures
}

func (p *probe) runSandboxed(args []string, stdout, stderr *bytes.Buffer) error {
	c, err := sandbox.Command(p.helper, p.policy, append([]string{p.bin}, args...))
	if err != nil {
		return err
	}
	c.Stdout, c.Stderr = stdout, stderr
	startErr := c.Start()
	if err := c.Started(); err != nil {
		if startErr == nil {
			c.Wait()
		}
		return err
	}
	if startErr != nil {
		return startErr
	}
	return c.Wait()
}

// medians is, for each name, the median of its figures over runs.
func medians(runs []map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for name := range runs[0] {
		var vs []float64
		for _, r := range runs {
			vs = append(vs, r[name])
		}
		slices.Sort(vs)
		out[name] = vs[len(vs)/2]
	}
	return out
}

// median is the median of ds; it sorts ds.
func median(ds []time.Duration) time.Duration { return medianOf(ds) }

// medianOf is the median of v; it sorts v.
func medianOf[T cmp.Ordered](v []T) T {
	slices.Sort(v)
	return v[len(v)/2]
}
