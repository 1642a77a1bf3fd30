package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
	"github.com/kairo-os/kairo/kernel/bus/internal/hook"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kairo-os/kairo/abi"
)

// Several hosts' buses appending to one stream with three replicas on the
// in-process cluster (jetstream_cluster_test.go), at once: two honest
// writers never collide (issue 29). Each test ends with checkWriters
// (jetstream_multiwriter_check_test.go).

// hostWriter is one host's bus on the shared stream, and what its live
// subscriber, subscribed before anything was published, received.
type hostWriter struct {
	host string
	bus  *bus.Bus
	live *bustest.Collector
}

// openWriters opens a bus per host, each over its own store on the stream
// of opts, with a live subscriber to everything; they are closed at the
// end of the test, before the cluster.
func openWriters(t *testing.T, c *testCluster, opts Config, hosts ...string) []*hostWriter {
	t.Helper()
	var ws []*hostWriter
	for _, host := range hosts {
		o := opts
		o.Host = host
		w := &hostWriter{host: host, bus: bus.New(c.open(t, o), bus.Config{Host: host}), live: bustest.NewCollector()}
		t.Cleanup(func() {
			if err := w.bus.Close(); err != nil {
				t.Errorf("Close of host %s's bus: %v", host, err)
			}
		})
		bustest.Subscribe(t, w.bus, ">", bus.SubscribeConfig{}, w.live.Handle)
		ws = append(ws, w)
	}
	return ws
}

// hostAck is one acknowledgement of an event, on host.
type hostAck struct {
	host string
	bus.Result
}

// hostKey is the key of an ID published on host: IDs are each host's own
// (an ID another host stored is no duplicate), so the ledger and the
// checks keep them by host.
func hostKey(host, id string) string { return host + "/" + id }

// ackLedger is what the publishers of a test were told: every
// acknowledgement, by ID, and the IDs of publishes that failed.
type ackLedger struct {
	mu      sync.Mutex
	acks    map[string][]hostAck
	stored  map[string]int  // new events acknowledged, by host
	failed  map[string]bool // IDs whose publish failed at least once
	refusal []error
}

func newAckLedger() *ackLedger {
	return &ackLedger{acks: map[string][]hostAck{}, stored: map[string]int{}, failed: map[string]bool{}}
}

func (l *ackLedger) ack(host string, evs []*abi.Event, res []bus.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, ev := range evs {
		k := hostKey(host, ev.ID)
		l.acks[k] = append(l.acks[k], hostAck{host, res[i]})
		if !res[i].Duplicate {
			l.stored[host]++
		}
	}
}

func (l *ackLedger) fail(host string, evs []*abi.Event, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range evs {
		l.failed[hostKey(host, ev.ID)] = true
	}
	l.refusal = append(l.refusal, err)
}

// storedBy is how many new events host had acknowledged.
func (l *ackLedger) storedBy(host string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stored[host]
}

// writerID is the ID of a writer's i-th event from its publisher g: every
// tenth is one that every host publishes, which each host stores once as
// its own, the others are the host's own.
func writerID(host string, g, i int) string {
	if i%10 == 0 {
		return fmt.Sprintf("all-%d-%05d", g, i)
	}
	return fmt.Sprintf("%s-%d-%05d", host, g, i)
}

// writerIDHost is the host whose own event id is, "" for one every host publishes.
func writerIDHost(id string) string {
	host, _, _ := strings.Cut(id, "-")
	if host == "all" {
		return ""
	}
	return host
}

// writerLoad is one host's publishing: publishers goroutines, each
// publishing its events one at a time with Publish and several at a time
// with PublishBatch, in turn (1 to 5 events). A refused publish is tried
// again with the same IDs when retry is set, else it ends the publishing
// with an error.
type writerLoad struct {
	publishers int
	from       int           // the index of each publisher's first event
	each       int           // events per publisher; 0: until stop is closed
	stop       chan struct{} // closed: each publisher ends after its current publish
	retry      bool
	pace       time.Duration // the least time between two publishes of a publisher
	data       []byte
}

// run publishes and returns once every publisher has ended: the first
// error of a publisher that could not go on, or nil.
func (p writerLoad) run(ctx context.Context, w *hostWriter, l *ackLedger) error {
	var wg sync.WaitGroup
	errs := make(chan error, p.publishers)
	for g := range p.publishers {
		wg.Go(func() {
			var tick <-chan time.Time
			if p.pace > 0 {
				tk := time.NewTicker(p.pace)
				defer tk.Stop()
				tick = tk.C
			}
			for i := 0; p.each == 0 || i < p.each; {
				select {
				case <-p.stop:
					return
				default:
				}
				if tick != nil {
					select {
					case <-p.stop:
						return
					case <-tick:
					}
				}
				k := 1 + (g+i)%5
				if p.each > 0 {
					k = min(k, p.each-i)
				}
				if err := p.publish(ctx, w, l, g, p.from+i, k); err != nil {
					errs <- fmt.Errorf("host %s publisher %d: %w", w.host, g, err)
					return
				}
				i += k
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// publish publishes the events i..i+k-1 of publisher g until they are
// acknowledged, or once unless retry is set.
func (p writerLoad) publish(ctx context.Context, w *hostWriter, l *ackLedger, g, i, k int) error {
	for {
		evs := make([]*abi.Event, k)
		for j := range evs {
			evs[j] = &abi.Event{ID: writerID(w.host, g, i+j), Type: "kairo.test.writers", Data: p.data}
		}
		var res []bus.Result
		var err error
		if k == 1 {
			var r bus.Result
			r, err = w.bus.Publish(ctx, evs[0])
			res = []bus.Result{r}
		} else {
			res, err = w.bus.PublishBatch(ctx, evs)
		}
		if err == nil {
			l.ack(w.host, evs, res)
			return nil
		}
		l.fail(w.host, evs, err)
		if !p.retry || ctx.Err() != nil || errors.Is(err, bus.ErrClosed) {
			return fmt.Errorf("events %s..%s: %w", evs[0].ID, evs[k-1].ID, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("events %s..%s: %w", evs[0].ID, evs[k-1].ID, ctx.Err())
		case <-time.After(10 * time.Millisecond): // pacing of a retry, as a publisher's
		}
	}
}

// Two and then three hosts publish many small appends at once, from
// several publishers each, with no fault: nothing collides.
func TestClusterWritersDense(t *testing.T) {
	c := startCluster(t)
	for _, hosts := range [][]string{{"a", "b"}, {"a", "b", "c"}} {
		t.Run(fmt.Sprintf("%d writers", len(hosts)), func(t *testing.T) {
			opts := Config{Stream: fmt.Sprintf("DENSE%d", len(hosts))}
			ws := openWriters(t, c, opts, hosts...)
			l := newAckLedger()
			load := writerLoad{publishers: 4, each: 1500 / len(hosts) / 4, data: bustest.Payload(t, "dense")}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			var wg sync.WaitGroup
			for _, w := range ws {
				wg.Go(func() {
					if err := load.run(ctx, w, l); err != nil {
						t.Errorf("with no fault: %v", err)
					}
				})
			}
			wg.Wait()
			t.Logf("%d hosts published %d IDs in %v", len(hosts), len(l.acks), time.Since(start).Round(time.Millisecond))
			checkWriters(t, c, opts, ws, l)
		})
	}
}

// Two hosts publish while the stream's leader is stopped (a shutdown: the
// in-process cluster has no kill -9) and started again: publishers retry refused publishes with the same IDs, as one
// that must not lose an event does, and once it is over nothing
// acknowledged is lost or stored twice and the seqs are dense. The
// control is the publishing before the stop.
func TestClusterWritersLeaderKill(t *testing.T) {
	c := startCluster(t)
	opts := Config{Stream: "KILLW", Timeout: 2 * time.Second}
	ws := openWriters(t, c, opts, "a", "b")
	l := newAckLedger()
	stop := make(chan struct{})
	load := writerLoad{publishers: 2, stop: stop, retry: true, pace: 50 * time.Millisecond, data: bustest.Payload(t, "kill")}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }) }
	defer halt()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			if err := load.run(ctx, w, l); err != nil {
				t.Errorf("publishing across the leader's stop: %v", err)
			}
		})
	}
	progress := func(what string, more int) {
		t.Helper()
		at := map[string]int{}
		for _, w := range ws {
			at[w.host] = l.storedBy(w.host)
		}
		bustest.Eventually(t, what, func() bool {
			for _, w := range ws {
				if l.storedBy(w.host) < at[w.host]+more {
					return false
				}
			}
			return true
		})
	}
	progress("each host stores 100 events on a whole cluster", 100)
	l.mu.Lock()
	control := len(l.refusal)
	l.mu.Unlock()
	if control > 0 {
		t.Fatalf("publishing on a whole cluster: %d refusals, the first %v", control, l.refusal[0])
	}
	leader := c.streamLeader(opts.Stream)
	if leader < 0 {
		t.Fatal("the stream has no leader")
	}
	stopped := time.Now()
	c.stop(leader)
	progress("each host stores 100 events with the leader stopped", 100)
	t.Logf("both hosts stored 100 events %v after the stream's leader, node %d, stopped", time.Since(stopped).Round(time.Millisecond), leader)
	c.start(leader)
	progress("each host stores 100 events after the node's restart", 100)
	halt()
	wg.Wait()
	c.waitReplicas(t, opts.Stream, leader)
	l.mu.Lock()
	t.Logf("%d IDs acknowledged; %d publishes refused and retried", len(l.acks), len(l.refusal))
	if len(l.refusal) > 0 {
		t.Logf("the first refusal: %v", l.refusal[0])
	}
	l.mu.Unlock()
	checkWriters(t, c, opts, ws, l)
}

// Two hosts publish on a stream with a small max_bytes until it is full:
// each gets a full stream's error, and goes on serving; the stored seqs
// are dense; once the operator raises max_bytes on the stream itself, each
// records that it is writable and both publish again.
func TestClusterWritersFull(t *testing.T) {
	defer func(d time.Duration) { hook.ProbeInterval = d }(hook.ProbeInterval)
	hook.ProbeInterval = 50 * time.Millisecond
	c := startCluster(t)
	opts := Config{Stream: "FULLW", MaxBytes: 64 << 10}
	ws := openWriters(t, c, opts, "a", "b")
	l := newAckLedger()
	big := bustest.Payload(t, strings.Repeat("x", 1000))
	ctx := bustest.Ctx(t)

	// Each host's publishers go on until the stream refuses them.
	var wg sync.WaitGroup
	refusals := make(chan error, 2*len(ws))
	for _, w := range ws {
		for g := range 2 {
			wg.Go(func() {
				load := writerLoad{data: big}
				for i := range 1000 {
					if err := load.publish(ctx, w, l, g, i, 1); err != nil {
						refusals <- fmt.Errorf("host %s: %w", w.host, err)
						return
					}
				}
				refusals <- fmt.Errorf("host %s publisher %d: 1000 events of 1 KB stored on a stream of 64 KiB", w.host, g)
			})
		}
	}
	wg.Wait()
	close(refusals)
	for err := range refusals {
		if !bus.IsDiskFull(err) {
			t.Errorf("a publisher ended with %v; want a full stream", err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	awaitQuiet(t, ws)
	for _, w := range ws {
		// Still full: refused again, and still serving reads.
		_, err := w.bus.Publish(ctx, &abi.Event{Type: "kairo.test.writers", Data: big})
		if !bus.IsDiskFull(err) {
			t.Errorf("host %s: a publish on the full stream: %v; want a full stream", w.host, err)
		}
		if since, refused := w.bus.Full(); since.IsZero() || refused == 0 {
			t.Errorf("host %s: the bus says it is not full (since %v, %d refused)", w.host, since, refused)
		}
	}
	awaitQuiet(t, ws)
	for _, w := range ws {
		if n := len(bustest.ReplayAll(t, w.bus, bus.Query{})); uint64(n) != w.bus.LastSeq() {
			t.Errorf("host %s replays %d events of the full stream, its LastSeq is %d", w.host, n, w.bus.LastSeq())
		}
	}
	t.Logf("the stream filled with %d events of a and %d of b", l.storedBy("a"), l.storedBy("b"))
	// The whole check, which publishes every ID again, runs once the
	// stream takes events again: a full bus refuses every publish at once.

	// The operator raises the limit on the stream, not through a host.
	nc, err := nats.Connect(c.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, opts.Stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxBytes = 1 << 20
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatalf("raise max_bytes: %v", err)
	}
	opts.MaxBytes = cfg.MaxBytes
	for _, w := range ws {
		bustest.Eventually(t, "host "+w.host+" records that the stream is writable", func() bool {
			return slices.ContainsFunc(w.live.Events(), func(ev abi.Event) bool {
				return ev.Type == bus.SubjectStoreWritable && ev.Host == w.host
			})
		})
	}
	before := map[string]int{}
	for _, w := range ws {
		before[w.host] = l.storedBy(w.host)
	}
	var again sync.WaitGroup
	for _, w := range ws {
		again.Go(func() {
			load := writerLoad{publishers: 2, from: 1000, each: 20, data: big}
			if err := load.run(ctx, w, l); err != nil {
				t.Errorf("once max_bytes is raised: %v", err)
			}
		})
	}
	again.Wait()
	for _, w := range ws {
		if l.storedBy(w.host) == before[w.host] {
			t.Errorf("host %s stored no new event once max_bytes was raised", w.host)
		}
	}
	checkWriters(t, c, opts, ws, l)
}
