package jetstream

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kairo-os/kairo/abi"
)

// BenchmarkClusterTwoWriters: the buses of two hosts publishing durably
// on one stream with three replicas, on the in-process three-node cluster,
// beside bare JetStream in the same run: two nats.go connections
// publishing asynchronously on a stream of the same cluster, a message
// per event of the same bytes as the bus stores, no deduplication. Each
// writer, bus or connection, has 8 publishers with up to 512 publishes in
// flight, as kernel/bench's BenchmarkPublishDurable; each runs b.N events
// in all, half per writer, and an event counts once it is acknowledged.
// It reports both rates and kairo's as a multiple of bare's (x-bare;
// issue 29 wants at least 3). The buses' seqs must come out 1..b.N, each
// acknowledged once.
func BenchmarkClusterTwoWriters(b *testing.B) {
	c := startCluster(b)
	const publishers, window = 8, 512
	data := bustest.Payload(b, make([]byte, 256))
	var buses []*bus.Bus
	for _, host := range []string{"a", "b"} {
		bus := bus.New(c.open(b, Config{Stream: "BENCH", Host: host}), bus.Config{Host: host})
		defer bus.Close()
		buses = append(buses, bus)
	}
	bare := newBareWriters(b, c, len(buses), publishers*window, data)
	defer bare.close()

	b.ResetTimer()
	start := time.Now()
	seqs := make([]atomic.Uint32, b.N+1) // how many acks named each seq
	var wg sync.WaitGroup
	errs := make(chan error, len(buses))
	for i, bus := range buses {
		n := b.N / len(buses)
		if i < b.N%len(buses) {
			n++
		}
		wg.Go(func() {
			if err := publishWindow(n, publishers, window, func() (func(context.Context) (uint64, error), error) {
				a, err := bus.PublishAsync(&abi.Event{Type: "kairo.bench.event", Data: data})
				if err != nil {
					return nil, err
				}
				return func(ctx context.Context) (uint64, error) {
					res, err := a.Wait(ctx)
					if err == nil && (res.Duplicate || res.Seq == 0 || res.Seq > uint64(b.N)) {
						err = fmt.Errorf("ack %+v: want a new seq of 1..%d", res, b.N)
					}
					return res.Seq, err
				}, nil
			}, func(seq uint64) { seqs[seq].Add(1) }); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	kairo := time.Since(start)
	start = time.Now()
	bareErr := bare.run(b.N, publishers, window)
	bareTook := time.Since(start)
	b.StopTimer()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("kairo: %v", err)
	}
	if bareErr != nil {
		b.Fatalf("bare: %v", bareErr)
	}
	var wrong []string
	for seq := 1; seq <= b.N; seq++ {
		if n := seqs[seq].Load(); n != 1 && len(wrong) < 5 {
			wrong = append(wrong, fmt.Sprintf("seq %d acknowledged %d times", seq, n))
		}
	}
	if len(wrong) > 0 {
		b.Fatalf("two writers' %d events were not acknowledged at 1..%d each once: %v", b.N, b.N, wrong)
	}
	kairoRate, bareRate := float64(b.N)/kairo.Seconds(), float64(b.N)/bareTook.Seconds()
	b.ReportMetric(kairoRate, "kairo-events/s")
	b.ReportMetric(bareRate, "bare-events/s")
	b.ReportMetric(kairoRate/bareRate, "x-bare")
}

// publishWindow publishes n events from publishers goroutines, each with
// up to window acknowledgements outstanding (it waits for the oldest when
// the window is full). publish starts one publish and returns its wait;
// acked is called with the seq of each acknowledgement.
func publishWindow(n, publishers, window int, publish func() (func(context.Context) (uint64, error), error), acked func(uint64)) error {
	errs := make(chan error, publishers)
	var wg sync.WaitGroup
	for p := range publishers {
		count := n / publishers
		if p < n%publishers {
			count++
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ring := make([]func(context.Context) (uint64, error), window)
			wait := func(w func(context.Context) (uint64, error)) bool {
				seq, err := w(ctx)
				if err != nil {
					errs <- err
					return false
				}
				acked(seq)
				return true
			}
			for i := range count {
				slot := i % window
				if i >= window && !wait(ring[slot]) {
					return
				}
				w, err := publish()
				if err != nil {
					errs <- err
					return
				}
				ring[slot] = w
			}
			for i := max(0, count-window); i < count; i++ {
				if !wait(ring[i%window]) {
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// bareWriters are nats.go connections publishing on a stream of the
// cluster with three replicas, a message per event.
type bareWriters struct {
	conns []*nats.Conn
	js    []jetstream.JetStream
	env   []byte
}

func newBareWriters(b *testing.B, c *testCluster, n, pending int, data []byte) *bareWriters {
	b.Helper()
	w := &bareWriters{
		// The same bytes a bus event is stored as.
		env: abi.AppendEvent(nil, &abi.Event{ID: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", Type: "kairo.bench.event", Source: "kairo", Time: time.Now(), Data: data}),
	}
	for range n {
		nc, err := nats.Connect(c.url())
		if err != nil {
			b.Fatal(err)
		}
		w.conns = append(w.conns, nc)
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(pending))
		if err != nil {
			b.Fatal(err)
		}
		w.js = append(w.js, js)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := w.js[0].CreateStream(ctx, jetstream.StreamConfig{Name: "BARE", Subjects: []string{"bare.>"}, Storage: jetstream.FileStorage, Replicas: 3}); err != nil {
		b.Fatal(err)
	}
	return w
}

// run publishes n events, split over the connections, as publishWindow
// does with each.
func (w *bareWriters) run(n, publishers, window int) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(w.js))
	for i, js := range w.js {
		count := n / len(w.js)
		if i < n%len(w.js) {
			count++
		}
		subject := fmt.Sprintf("bare.%d", i)
		wg.Go(func() {
			if err := publishWindow(count, publishers, window, func() (func(context.Context) (uint64, error), error) {
				f, err := js.PublishAsync(subject, w.env)
				if err != nil {
					return nil, err
				}
				return func(ctx context.Context) (uint64, error) {
					select {
					case ack := <-f.Ok():
						return ack.Sequence, nil
					case err := <-f.Err():
						return 0, err
					case <-ctx.Done():
						return 0, ctx.Err()
					}
				}, nil
			}, func(uint64) {}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func (w *bareWriters) close() {
	for _, nc := range w.conns {
		nc.Close()
	}
}
