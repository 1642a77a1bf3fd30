package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/client"
)

// BenchmarkStdoutThroughput is process output to an IPC client in chunk
// mode: b.N MiB of `head -c` from /dev/zero, through a `kairo up` child
// whose peak resident memory (VmHWM) is peak-rss-MiB. -benchtime 4096x
// makes it 4 GiB. The spawn asks for encoding binary and chunks of up to
// 256 KiB (the output pipe's size), so the kernel may splice the output
// from pipe to socket without reading it. pipe-MB/s is the same bytes
// through a bare pipe (`head -c N /dev/zero | cat >/dev/null`) in the same
// run, the machine's limit, and pipe-ratio the first figure over it.
func BenchmarkStdoutThroughput(b *testing.B) {
	path, pid := startDaemon(b)
	c := dial(b, path)
	var got atomic.Int64
	c.OnChunk(func(ch *abi.StreamChunk) { got.Add(int64(len(ch.Chunk))) })
	size := int64(b.N) << 20
	b.SetBytes(1 << 20)
	b.ResetTimer()
	start := time.Now()
	runToEnd(b, c, abi.SpawnParams{
		Argv:     []string{"head", "-c", strconv.FormatInt(size, 10), "/dev/zero"},
		Encoding: "binary", MaxChunkBytes: 256 << 10,
	}, &got, size)
	elapsed := time.Since(start)
	b.StopTimer()
	if got.Load() != size {
		b.Fatalf("received %d of %d bytes", got.Load(), size)
	}
	mbs := float64(size) / 1e6 / elapsed.Seconds()
	b.ReportMetric(mbs, "MB/s")
	b.ReportMetric(float64(peakRSS(b, pid))/(1<<20), "peak-rss-MiB")
	start = time.Now()
	pipe := exec.Command("sh", "-c", "head -c "+strconv.FormatInt(size, 10)+" /dev/zero | cat >/dev/null")
	if out, err := pipe.CombinedOutput(); err != nil {
		b.Fatalf("bare pipe: %v %s", err, out)
	}
	pipeMBs := float64(size) / 1e6 / time.Since(start).Seconds()
	b.ReportMetric(pipeMBs, "pipe-MB/s")
	b.ReportMetric(mbs/pipeMBs, "pipe-ratio")
}

// runToEnd spawns p, waits for its exit, then for counter to reach want:
// the exit can be seen a moment before the last chunk is read.
func runToEnd(b *testing.B, c *client.Client, p abi.SpawnParams, counter *atomic.Int64, want int64) {
	ctx := context.Background()
	var info abi.ProcessInfo
	if err := c.Call(ctx, abi.MethodProcessSpawn, p, &info); err != nil {
		b.Fatal(err)
	}
	var res abi.WaitResult
	if err := c.Call(ctx, abi.MethodProcessWait, abi.WaitParams{ProcessID: info.ID}, &res); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); counter.Load() < want && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// peakRSS is process pid's VmHWM in bytes.
func peakRSS(b *testing.B, pid int) int64 {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range bytes.Split(status, []byte("\n")) {
		if f := bytes.Fields(line); len(f) >= 2 && string(f[0]) == "VmHWM:" {
			kb, _ := strconv.ParseInt(string(f[1]), 10, 64)
			return kb << 10
		}
	}
	b.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// BenchmarkSpawnExit is the time from process.spawn of /bin/true to its
// kairo.process.exited event at a subscribed client: the process session
// path alone, through a kernel whose sandbox is off. BenchmarkSandboxSpawn
// is the same path with the sandbox, as kairo up runs by default. In the
// same run, exec-p50-ms is a plain fork and exec of /bin/true from the
// benchmark, and exec-ratio the first figure over it: what the kernel adds.
func BenchmarkSpawnExit(b *testing.B) {
	bare := newSpawner(b, "[sandbox]\nmode = \"off\"\n")
	lat, execLat := make([]time.Duration, b.N), make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range lat {
		lat[i] = bare.spawnExit(b, "/bin/true")
		execLat[i] = timeRun(b, exec.Command("/bin/true"))
	}
	b.StopTimer()
	p50, execP50 := median(lat).Seconds()*1e3, median(execLat).Seconds()*1e3
	b.ReportMetric(p50, "p50-ms")
	b.ReportMetric(execP50, "exec-p50-ms")
	b.ReportMetric(p50/execP50, "exec-ratio")
}

// BenchmarkLineMode is b.N lines of `yes` in line mode, counted at an IPC
// client.
func BenchmarkLineMode(b *testing.B) {
	path, _ := startDaemon(b)
	c := dial(b, path)
	var lines atomic.Int64
	partial := false
	c.OnChunk(func(ch *abi.StreamChunk) {
		if !bytes.HasSuffix(ch.Chunk, []byte("\n")) {
			partial = true
		}
		lines.Add(int64(bytes.Count(ch.Chunk, []byte("\n"))))
	})
	b.ResetTimer()
	start := time.Now()
	runToEnd(b, c, abi.SpawnParams{Argv: []string{"sh", "-c", "yes | head -n " + strconv.Itoa(b.N)}, Mode: "line"}, &lines, int64(b.N))
	elapsed := time.Since(start)
	b.StopTimer()
	if lines.Load() != int64(b.N) || partial {
		b.Fatalf("received %d of %d lines (a chunk that did not end a line: %v)", lines.Load(), b.N, partial)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "lines/s")
}
