package sandbox

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// BenchmarkSpawnPrivateProc is what the sandbox's own /proc (procfs.go)
// costs a spawn: start to exit of /bin/true under the default profile, p50,
// with the private /proc (p50-ms) and without it (shared-p50-ms), through a
// helper started for the spawn; the same through a warm helper, which
// makes its /proc before the spawn is asked for (warm-p50-ms); and, spawn
// for spawn in the same run, a plain fork and exec (exec-p50-ms) and, where
// it is installed, bubblewrap --unshare-all with its own /proc and /dev
// (bwrap-p50-ms) and with only `--ro-bind / /` (bwrap-ro-p50-ms, the
// reference of kernel/bench's BenchmarkSandboxSpawn). Root only: the
// private /proc needs it.
func BenchmarkSpawnPrivateProc(b *testing.B) {
	if !hidesProc() {
		b.Skip("not root: no private /proc to measure")
	}
	uid := 2100000000 - 2 - os.Getpid()%1000
	dir := b.TempDir()
	os.Chmod(dir, 0o755)
	work, tmp := dir+"/work", dir+"/tmp"
	for _, d := range []string{work, tmp} {
		os.Mkdir(d, 0o700)
		os.Chown(d, uid, uid)
	}
	policy := func(shared bool) *Policy {
		p := Default(work, tmp, nil)
		p.UID, p.GID, p.SharedProc = uid, uid, shared
		return p
	}
	bwrap, _ := exec.LookPath("bwrap")
	var private, shared, warm, plain, bw, bwRO []time.Duration
	b.Cleanup(func() { killUID(uid) })
	b.ResetTimer()
	for range b.N {
		private = append(private, timeSpawn(b, policy(false), nil))
		shared = append(shared, timeSpawn(b, policy(true), nil))
		b.StopTimer()
		cmd, ctl, err := StartWarm(os.Args[0], nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		warm = append(warm, timeSpawn(b, policy(false), &warmHelper{cmd, ctl}))
		plain = append(plain, timeExec(b, exec.Command("/bin/true")))
		if bwrap != "" {
			bw = append(bw, timeExec(b, exec.Command(bwrap, "--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "/bin/true")))
			bwRO = append(bwRO, timeExec(b, exec.Command(bwrap, "--ro-bind", "/", "/", "/bin/true")))
		}
	}
	b.StopTimer()
	ms := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return ds[len(ds)/2].Seconds() * 1e3
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(private), "p50-ms")
	b.ReportMetric(ms(shared), "shared-p50-ms")
	b.ReportMetric(ms(warm), "warm-p50-ms")
	b.ReportMetric(ms(plain), "exec-p50-ms")
	if bwrap != "" {
		b.ReportMetric(ms(bw), "bwrap-p50-ms")
		b.ReportMetric(ms(bwRO), "bwrap-ro-p50-ms")
	}
}

type warmHelper struct {
	cmd *exec.Cmd
	ctl *os.File
}

// timeSpawn is how long /bin/true under p takes from Command to its exit,
// through w when it is not nil.
func timeSpawn(b *testing.B, p *Policy, w *warmHelper) time.Duration {
	start := time.Now()
	c, err := Command(os.Args[0], p, []string{"/bin/true"})
	if err != nil {
		b.Fatal(err)
	}
	wait := c.Cmd
	if w != nil {
		err = c.Handoff(w.ctl, os.Stdin, os.Stdout, os.Stderr, false)
		w.ctl.Close()
		wait = w.cmd
	} else {
		err = c.Start()
	}
	if serr := c.Started(); serr != nil {
		b.Fatal(serr)
	}
	if err != nil {
		b.Fatal(err)
	}
	if err := wait.Wait(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

func timeExec(b *testing.B, cmd *exec.Cmd) time.Duration {
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%v: %v", cmd.Args, err)
	}
	return time.Since(start)
}
