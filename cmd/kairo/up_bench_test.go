package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkUpReady is `kairo up` (the real binary, its built-in plugins
// compiled in) from exec to ready: answering `kairo send "run true"`. Cold is
// a new home and an empty user compilation cache; warm the same home
// started again, its cache filled; newhome another new home of the same
// user, which finds the plugins compiled in the user's cache. It reports
// cold-ms, warm-ms, newhome-ms and rss-MiB, the daemon's resident memory
// once ready and idle (warm), and anon-MiB, the part of it that is not the
// binary's own mapped pages (RssAnon: heaps, stacks, SQLite's caches).
//
// Ready is the first `run true` answered, so every figure holds a whole
// run loop: the rules policy's tick, a sandboxed spawn and its exit. The
// binary is linked as `make build` links it (testkit.BuildKairo). Most of
// rss-MiB is the binary's own text and read-only data, pages of the file
// shared with the page cache: how much of it a process maps depends on
// how the kernel faults the file in (a freshly copied binary, as here, was
// mapped almost whole, 38 of 45 MiB; bin/kairo from make build 29 of 36).
// anon-MiB, 7 MiB on both, is what the daemon itself holds.
func BenchmarkUpReady(b *testing.B) {
	bin := binCopy(b)

	var cold, warm, newHome time.Duration
	var rssMiB, anonMiB float64
	b.ResetTimer()
	for range b.N {
		home, xdg := b.TempDir(), b.TempDir()
		if err := os.Chmod(home, 0o700); err != nil {
			b.Fatal(err)
		}
		took, _ := upReady(b, bin, home, xdg, false)
		cold += took
		took, mib := upReady(b, bin, home, xdg, true)
		warm += took
		rssMiB += mib.rss
		anonMiB += mib.anon
		other := b.TempDir()
		if err := os.Chmod(other, 0o700); err != nil {
			b.Fatal(err)
		}
		took, _ = upReady(b, bin, other, xdg, false)
		newHome += took
	}
	b.ReportMetric(float64(cold.Milliseconds())/float64(b.N), "cold-ms")
	b.ReportMetric(float64(warm.Milliseconds())/float64(b.N), "warm-ms")
	b.ReportMetric(float64(newHome.Milliseconds())/float64(b.N), "newhome-ms")
	b.ReportMetric(rssMiB/float64(b.N), "rss-MiB")
	b.ReportMetric(anonMiB/float64(b.N), "anon-MiB")
}

// residentMiB is a process's resident memory in MiB: all of it, and its
// anonymous part.
type residentMiB struct{ rss, anon float64 }

// upReady starts `kairo up` on home with XDG_CACHE_HOME xdg, and returns
// how long it took to answer `kairo send "run true"` and, when idle is set,
// its resident memory a second after, idle. It stops the daemon.
func upReady(b *testing.B, bin, home, xdg string, idle bool) (time.Duration, residentMiB) {
	b.Helper()
	env := append(childEnv(home), "XDG_CACHE_HOME="+xdg)
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "up", "--home", home)
	cmd.Env, cmd.Stderr = env, &stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	sock := filepath.Join(home, "kernel.sock")
	// Generous: a cold start on a busy machine of two cores has taken
	// minutes.
	deadline := t0.Add(10 * time.Minute)
	for {
		if time.Now().After(deadline) {
			b.Fatalf("kairo up did not answer within 10 minutes:\n%s", stderr.String())
		}
		c, err := net.Dial("unix", sock)
		if err != nil {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		send := exec.CommandContext(ctx, bin, "send", "run true")
		send.Env = env
		out, err := send.CombinedOutput()
		cancel()
		if err == nil && strings.Contains(string(out), "`true` finished") {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(t0)
	if !idle {
		return took, residentMiB{}
	}
	time.Sleep(time.Second)
	status, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	var m residentMiB
	found := 0
	for _, line := range strings.Split(string(status), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "RssAnon") {
			continue
		}
		kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
		if err != nil {
			b.Fatalf("/proc/PID/status: %q: %v", line, err)
		}
		found++
		if name == "VmRSS" {
			m.rss = float64(kb) / 1024
		} else {
			m.anon = float64(kb) / 1024
		}
	}
	if found != 2 {
		b.Fatalf("no VmRSS or RssAnon in /proc/PID/status:\n%s", status)
	}
	return took, m
}
