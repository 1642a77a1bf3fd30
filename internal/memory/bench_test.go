package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// benchSegments is the size of the benchmark corpus: 100,000 segments, or
// n with KAIRO_BENCH_MEMORY_SEGMENTS=n (make benchcheck gives 20,000, so
// that the benchmarks run their code in CI without most of the corpus's
// indexing; their figures then are not the ones their doc comments give).
var benchSegments = 100_000

var (
	benchOnce sync.Once
	benchDir  string // removed by TestMain
	benchPath string
	benchErr  error
)

// benchStore builds the benchmark corpus once per test binary: run loops
// of every scenario family with random slots, cut by Segments and indexed
// in one transaction with their vectors (computed in process by the test
// endpoint's function, not sent through HTTP 100,000 times), into a SQLite
// file that each benchmark then opens.
func benchStore(b *testing.B) string {
	benchOnce.Do(func() {
		start := time.Now()
		if v := os.Getenv("KAIRO_BENCH_MEMORY_SEGMENTS"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1000 {
				benchErr = fmt.Errorf("KAIRO_BENCH_MEMORY_SEGMENTS=%q: give a number of segments, 1000 or more", v)
				return
			}
			benchSegments = n
		}
		if benchDir, benchErr = os.MkdirTemp("", "kairo-memory-bench-"); benchErr != nil {
			return
		}
		benchPath = filepath.Join(benchDir, "memory.db")
		var s *Store
		if s, benchErr = Open(benchPath, Config{Embedder: localEmbedder{}, Synchronous: "normal"}); benchErr != nil {
			return
		}
		defer s.Close()
		r := rand.New(rand.NewPCG(1, 100_000))
		base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		var loops []loopSegments
		n := 0
		for i := 0; n < benchSegments; i++ {
			f := &families[r.IntN(len(families))]
			keys := f.slots[f.key]
			started := base.Add(time.Duration(i) * 17 * time.Minute)
			in := newInstance(f, keys[r.IntN(len(keys))], r, started)
			l := in.spec(fmt.Sprintf("rl-bench-%06d", i), started)
			segs := Segments(l.events(), SegmentConfig{})
			if n+len(segs) > benchSegments {
				segs = segs[:benchSegments-n]
			}
			n += len(segs)
			loops = append(loops, loopSegments{id: l.ID, segs: segs})
		}
		benchErr = s.index(context.Background(), loops)
		b.Logf("built a corpus of %d segments in %d run loops in %v", n, len(loops), time.Since(start).Round(time.Millisecond))
	})
	if benchErr != nil {
		b.Fatalf("build the benchmark corpus: %v", benchErr)
	}
	return benchPath
}

// BenchmarkRetrieve measures Retrieve over 100,000 segments: by full text
// alone, and fused with vector similarity, the query embedded by a real
// HTTP endpoint on loopback (so the figure holds the store's own work and
// one local round trip, not a model's). An iteration asks every question
// of the labelled set once, in a shuffled order, after one pass to warm
// the caches; each sub-benchmark reports the median latency of a Retrieve
// (and the 99th percentile).
func BenchmarkRetrieve(b *testing.B) {
	path := benchStore(b)
	var questions []string
	for _, q := range loadRecallSet(b).Questions {
		questions = append(questions, q.Q)
	}
	rand.New(rand.NewPCG(5, 5)).Shuffle(len(questions), func(i, j int) { questions[i], questions[j] = questions[j], questions[i] })
	run := func(b *testing.B, opts Config) {
		start := time.Now()
		s, err := Open(path, opts)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		b.Logf("opened the store of %d segments in %v", benchSegments, time.Since(start).Round(time.Millisecond))
		// The store lives as long as the daemon: measure it settled, not
		// the collection of what building the corpus and opening left.
		runtime.GC()
		ctx := context.Background()
		pass := func(took []time.Duration) []time.Duration {
			for _, q := range questions {
				t := time.Now()
				chunks, err := s.Retrieve(ctx, q, 5)
				took = append(took, time.Since(t))
				if err != nil || len(chunks) == 0 {
					b.Fatalf("retrieve %q: %d chunks, %v", q, len(chunks), err)
				}
			}
			return took
		}
		pass(nil)
		var took []time.Duration
		for b.Loop() {
			took = pass(took)
		}
		slices.Sort(took)
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
		b.ReportMetric(ms(took[len(took)*99/100]), "p99-ms")
	}
	b.Run("fulltext", func(b *testing.B) { run(b, Config{}) })
	b.Run("fused", func(b *testing.B) {
		srv := newFakeEmbedServer(b)
		run(b, Config{Embedder: srv.embedder(b, 0), OnEmbedError: func(err error) { b.Error(err) }})
	})
}

// BenchmarkSearch measures a page of Search over 100,000 segments by full
// text: the first page of a common word, and a page deep in its ranking
// (the cursor of rank 4,000, or as deep in a smaller corpus), which costs
// the same ranking and reads only its own segments.
func BenchmarkSearch(b *testing.B) {
	s, err := Open(benchStore(b), Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, c := range []struct{ name, cursor string }{{"first", ""}, {"deep", makeCursor(benchSegments/25, "backup disk")}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if p, err := s.Search(ctx, "backup disk", c.cursor, 20); err != nil || len(p.Chunks) == 0 {
					b.Fatalf("search: %d chunks, %v", len(p.Chunks), err)
				}
			}
		})
	}
}
