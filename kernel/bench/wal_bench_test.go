package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
)

// BenchmarkWALBound: publishers each publishing one event at a time (Publish,
// then the next), as fast as the store acknowledges, into SQLite on a real
// disk; and BenchmarkPublishDurable's load (8 publishers, 512 in flight
// each). It prints the peak size of the WAL file (sampled every 10 ms), the
// throughput, the bytes written per acknowledged event: write_bytes of
// /proc/self/io (what the process sent to the block layer) and wchar (what
// it passed to write calls), the CPU time per event (user and system: on a
// shared machine events/s depends on the share of the CPU the benchmark
// gets, this does not), and the share of the time checkpoints held the
// writer. publishers=4 is the figure; run it for as long as the
// issue did:
//
//	go test -run '^$' -bench 'PublishDurable|WALBound' -benchtime 30s ./kernel/bench/
//
// The store lives under $KAIRO_BENCH_DIR, else /var/tmp: on a tmpfs
// write_bytes stays 0, and the benchmark says so.
func BenchmarkWALBound(b *testing.B) {
	for _, publishers := range []int{1, 4, 64} {
		b.Run("publishers="+strconv.Itoa(publishers), func(b *testing.B) {
			walBound(b, publishers, 1)
		})
	}
	// BenchmarkPublishDurable's load, with these figures.
	b.Run("publishers=8,window=512", func(b *testing.B) { walBound(b, 8, 512) })
}

// walBound publishes b.N events from publishers goroutines, each with up to
// window acknowledgements outstanding (1: Publish, then the next).
func walBound(b *testing.B, publishers, window int) {
	dir := benchDiskDir(b)
	path := filepath.Join(dir, "events.db")
	store := openSQLite(b, path)
	bs := bus.New(store, bus.Config{})
	defer bs.Close()
	data := benchPayload(b)

	var peak atomic.Int64
	sample := func() {
		if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > peak.Load() {
			peak.Store(fi.Size())
		}
	}
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				sample()
			}
		}
	}()

	io0, cpu0 := readProcIO(b), cpuTime()
	b.ResetTimer()
	start := time.Now()
	var err error
	if window > 1 {
		_, err = publishWindowed(bs, b.N, publishers, window, data)
	} else {
		err = publishEach(bs, b.N, publishers, data)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	io1, cpu1 := readProcIO(b), cpuTime()
	close(stop)
	sampler.Wait()
	sample()
	if err != nil {
		b.Fatal(err)
	}
	if bs.LastSeq() != uint64(b.N) {
		b.Fatalf("stored up to seq %d, want %d", bs.LastSeq(), b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(peak.Load())/(1<<20), "wal-peak-MiB")
	b.ReportMetric(float64(io1["write_bytes"]-io0["write_bytes"])/float64(b.N), "bytes-per-event")
	b.ReportMetric(float64(io1["wchar"]-io0["wchar"])/float64(b.N), "wchar-per-event")
	b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "cpu-us-per-event")
	b.ReportMetric(100*store.WALStats().Held.Seconds()/elapsed.Seconds(), "writer-held-%")
}

// publishEach publishes n events from publishers goroutines, each waiting
// for its acknowledgement before the next.
func publishEach(bs *bus.Bus, n, publishers int, data []byte) error {
	var next atomic.Int64
	errs := make(chan error, publishers)
	var wg sync.WaitGroup
	for range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for next.Add(1) <= int64(n) {
				res, err := bs.Publish(ctx, &abi.Event{Type: "kairo.bench.event", Data: data})
				if err == nil && (res.Seq == 0 || res.Duplicate) {
					err = fmt.Errorf("publish: %+v, want a new seq", res)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchDiskDir is a fresh folder on a real disk for the store: the figures
// from /proc/self/io mean nothing on a tmpfs, which never writes a block.
func benchDiskDir(b *testing.B) string {
	root := os.Getenv("KAIRO_BENCH_DIR")
	if root == "" {
		root = "/var/tmp"
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(root, &fs); err != nil {
		b.Fatalf("KAIRO_BENCH_DIR %s: %v", root, err)
	}
	const tmpfsMagic = 0x01021994
	if fs.Type == tmpfsMagic {
		b.Logf("%s is a tmpfs: bytes-per-event (write_bytes) will read 0; set KAIRO_BENCH_DIR to a folder on a disk", root)
	}
	dir, err := os.MkdirTemp(root, "kairo-bench-wal-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// readProcIO reads the process's I/O counters. Without write_bytes (a
// kernel without task I/O accounting) the benchmark says so and reports
// wchar alone.
func readProcIO(b *testing.B) map[string]int64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		b.Logf("no /proc/self/io (%v): the bytes figures read 0", err)
		return map[string]int64{}
	}
	defer f.Close()
	m := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			m[k] = n
		}
	}
	if _, ok := m["write_bytes"]; !ok {
		b.Logf("/proc/self/io has no write_bytes: bytes-per-event reads 0, use wchar-per-event")
	}
	return m
}
