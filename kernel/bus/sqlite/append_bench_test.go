package sqlite

import (
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
)

// threadCPU is the CPU time, user and system, of the calling goroutine's
// thread; the caller locks it to its thread.
func threadCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1, &ru); err != nil { // RUSAGE_THREAD
		tb.Skipf("getrusage(RUSAGE_THREAD): %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchEvents makes n events of data, with their envelopes encoded by s,
// as publishers hand them to the committer.
func benchEvents(s *Store, n int, data []byte) ([]*abi.Event, [][]byte) {
	evs, envs := make([]*abi.Event, n), make([][]byte, n)
	now := time.Now()
	for i := range evs {
		evs[i] = &abi.Event{ID: abi.NewIDAt(now), Type: "kairo.bench.event", Source: "kairo", Time: now, Data: data}
		envs[i], _ = s.EncodeEnv(evs[i])
	}
	return evs, envs
}

// BenchmarkAppend appends batches of 1024 encoded events, as the bus's
// committer does under BenchmarkPublishDurable's load (kernel/bench), and
// reports cpu-ns/event: the committer's CPU time per event, measured on its
// own thread, which on a shared machine stays where events/s does not. The
// events are made and encoded outside that time, as publishers do.
func BenchmarkAppend(b *testing.B) {
	s := openSQLite(b, filepath.Join(b.TempDir(), "events.db"))
	defer s.Close()
	data := make([]byte, 3+256) // a MsgPack bin of 256 bytes, as the bench's
	data[0], data[1] = 0xc5, 0x01
	const batch = 1024
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu time.Duration
	b.ResetTimer()
	for n := 0; n < b.N; n += batch {
		k := min(batch, b.N-n)
		b.StopTimer()
		evs, envs := benchEvents(s, k, data)
		dup := make([]bool, k)
		b.StartTimer()
		t0 := threadCPU(b)
		if err := s.Append(evs, envs, dup); err != nil {
			b.Fatal(err)
		}
		cpu += threadCPU(b) - t0
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/event")
}

// BenchmarkAppendSmall appends one commit of 1 or 5 events at a time, as
// a user message and the agent's tick are on BenchmarkMessageToAction's
// path (internal/agent), and reports cpu-us/commit, the committer's CPU
// time per commit on its own thread. The events are made before the
// timer starts.
func BenchmarkAppendSmall(b *testing.B) {
	for _, rows := range []int{1, 5} {
		b.Run(strconv.Itoa(rows), func(b *testing.B) {
			s := openSQLite(b, filepath.Join(b.TempDir(), "events.db"))
			defer s.Close()
			data := make([]byte, 2+100) // a MsgPack bin of 100 bytes
			data[0], data[1] = 0xc4, 100
			evs, envs := benchEvents(s, rows*b.N, data)
			dup := make([]bool, rows)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ResetTimer()
			t0 := threadCPU(b)
			for i := 0; i < len(evs); i += rows {
				if err := s.Append(evs[i:i+rows], envs[i:i+rows], dup); err != nil {
					b.Fatal(err)
				}
			}
			cpu := threadCPU(b) - t0
			b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-us/commit")
		})
	}
}
