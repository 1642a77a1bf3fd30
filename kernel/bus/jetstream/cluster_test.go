package jetstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
	"github.com/kairo-os/kairo/kernel/bus/internal/hook"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/kairo-os/kairo/abi"
)

// testCluster is three nats-servers with JetStream, in this process, routed
// to each other on loopback: what a replicated store runs on. Each node
// keeps its ports and its directory, so a stopped node comes back as the
// same peer.
type testCluster struct {
	t     testing.TB
	mu    sync.Mutex
	nodes [3]*server.Server
	opts  [3]*server.Options

	streams map[string]string // a conformance dir → its stream
}

// freePorts returns n loopback ports nothing listens on, held together so
// that no two are the same.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ls := make([]net.Listener, n)
	ports := make([]int, n)
	for i := range ls {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls[i], ports[i] = l, l.Addr().(*net.TCPAddr).Port
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// startCluster starts three nodes and waits until they have elected a
// JetStream meta leader that knows all three; every node is shut down at
// the end of the test.
func startCluster(t testing.TB) *testCluster {
	t.Helper()
	ports := freePorts(t, 6)
	routes := make([]*url.URL, 3)
	for i := range routes {
		routes[i] = &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", ports[3+i])}
	}
	c := &testCluster{t: t, streams: map[string]string{}}
	for i := range c.opts {
		c.opts[i] = &server.Options{
			ServerName: fmt.Sprintf("n%d", i),
			Host:       "127.0.0.1",
			Port:       ports[i],
			JetStream:  true,
			StoreDir:   filepath.Join(t.TempDir(), fmt.Sprintf("n%d", i)),
			NoSigs:     true,
			NoLog:      true,
			MaxPayload: bus.MaxEventData + 64<<10,
			Cluster: server.ClusterOpts{
				Name: "kairo-test",
				Host: "127.0.0.1",
				Port: ports[3+i],
			},
			Routes: routes,
		}
	}
	t.Cleanup(c.shutdown)
	for i := range c.nodes {
		c.start(i)
	}
	c.waitLeader(3)
	return c
}

// start starts node i (again) on its ports and directory.
func (c *testCluster) start(i int) {
	c.t.Helper()
	o := *c.opts[i] // the server keeps and changes what it is given
	srv, err := server.NewServer(&o)
	if err != nil {
		c.t.Fatalf("node %d: %v", i, err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		c.t.Fatalf("node %d was not ready for connections within 10 s", i)
	}
	c.mu.Lock()
	c.nodes[i] = srv
	c.mu.Unlock()
}

// stop shuts node i down and waits until it is gone.
func (c *testCluster) stop(i int) {
	c.mu.Lock()
	srv := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

func (c *testCluster) shutdown() {
	for i := range c.nodes {
		c.stop(i)
	}
}

// url is the client URLs of the three nodes, as a store is given them.
func (c *testCluster) url() string {
	urls := make([]string, len(c.opts))
	for i, o := range c.opts {
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", o.Port)
	}
	return strings.Join(urls, ",")
}

// waitLeader waits until a node is the JetStream meta leader and knows
// peers nodes that are up.
func (c *testCluster) waitLeader(peers int) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c.mu.Lock()
		nodes := c.nodes
		c.mu.Unlock()
		for _, srv := range nodes {
			if srv != nil && srv.JetStreamIsLeader() && len(srv.JetStreamClusterPeers()) >= peers {
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the cluster elected no JetStream meta leader with %d peers within 20 s", peers)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// streamName is the stream of a conformance test's dir: the suite opens
// a store by dir, and opens it again by the same dir to test a reopen.
func (c *testCluster) streamName(dir string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	name, ok := c.streams[dir]
	if !ok {
		name = fmt.Sprintf("CONFORM%d", len(c.streams))
		c.streams[dir] = name
	}
	return name
}

// open opens a store on a stream of the cluster, with three replicas.
func (c *testCluster) open(t testing.TB, opts Config) *Store {
	t.Helper()
	opts.URL, opts.Replicas = c.url(), 3
	return openJetStream(t, opts)
}

// clusterStore is the conformance suite's store on a three-node cluster,
// each stream replicated three times: what holds for one server holds
// for a cluster (TestConformance/jetstream-cluster).
func clusterStore(c *testCluster) bustest.ConformanceStore {
	return bustest.ConformanceStore{
		Name:    "jetstream-cluster",
		Durable: true,
		Open: func(t testing.TB, dir string) bus.Store {
			return c.open(t, Config{Stream: c.streamName(dir), DuplicateWindow: 100 * time.Millisecond})
		},
		Full: func(t *testing.T) (bus.Store, func()) {
			opts := Config{Stream: c.streamName(t.TempDir()), MaxBytes: 64 << 10}
			s := c.open(t, opts)
			return s, func() {
				s.Close()
				opts.MaxBytes = 1 << 20
				opts.URL = c.url()
				applyJetStream(t, opts)
				*s = *c.open(t, opts)
			}
		},
		FullSays:       "max_bytes",
		AfterDupWindow: func() { time.Sleep(300 * time.Millisecond) },
	}
}

// burstID is the ID of the i-th event of a publish burst: the same in the
// first run and in the retry.
func burstID(i int) string { return fmt.Sprintf("burst-%05d", i) }

// burster publishes a burst of events with deterministic IDs from
// several goroutines, each retrying an event with the same ID until the
// store acknowledges it, as a publisher that must not lose an event does.
type burster struct {
	b          *bus.Bus
	publishers int
	stop       <-chan struct{} // closed: each publisher ends after its current event; nil: never
	acked      func(id string, res bus.Result)
	failed     func(err error) // each refusal that is retried; nil: ignored
}

// run publishes the events from..to-1 and returns once each publisher has
// had its events acknowledged, was stopped, or ctx ended (an error).
func (p burster) run(ctx context.Context, from, to int) error {
	var wg sync.WaitGroup
	errs := make(chan error, p.publishers)
	for g := range p.publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := from + g; i < to; i += p.publishers {
				select {
				case <-p.stop:
					return
				default:
				}
				for {
					ev := &abi.Event{ID: burstID(i), Type: "kairo.test.burst", Data: []byte(strconv.Itoa(i))}
					res, err := p.b.Publish(ctx, ev)
					if err == nil {
						p.acked(ev.ID, res)
						break
					}
					if ctx.Err() != nil || errors.Is(err, bus.ErrClosed) {
						errs <- fmt.Errorf("event %s: %w", ev.ID, err)
						return
					}
					if p.failed != nil {
						p.failed(err)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// The publisher TestClusterKill runs in a process of its own and kills:
// it publishes the burst on the stream KAIRO_TEST_STREAM of the cluster at
// KAIRO_TEST_CLUSTER and prints each acknowledged ID with its seq.
func TestClusterKillChild(t *testing.T) {
	url := os.Getenv("KAIRO_TEST_CLUSTER")
	if url == "" {
		t.Skip("run by TestClusterKill")
	}
	n, _ := strconv.Atoi(os.Getenv("KAIRO_TEST_EVENTS"))
	s, err := Open(Config{URL: url, Replicas: 3, Stream: os.Getenv("KAIRO_TEST_STREAM")})
	if err != nil {
		fmt.Println("error", err)
		return
	}
	b := bus.New(s, bus.Config{})
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	err = burster{b: b, publishers: 8, acked: func(id string, res bus.Result) {
		mu.Lock()
		fmt.Fprintln(out, "acked", id, res.Seq)
		out.Flush() // acknowledged is printed before the next publish
		mu.Unlock()
	}}.run(context.Background(), 0, n)
	if err != nil {
		fmt.Println("error", err)
	}
	fmt.Println("done")
	time.Sleep(time.Minute) // the test kills it before it closes anything
}

// A publisher killed with SIGKILL in the middle of a burst on a three-node
// cluster, then a second one that publishes the whole burst again from the
// start, as a publisher that retries does: every event the first had
// acknowledged is stored once, at the seq it was acknowledged with, and
// every event of the burst is stored exactly once. The control: the second
// publisher's acknowledgements of those events are duplicates.
func TestClusterKill(t *testing.T) {
	c := startCluster(t)
	const n, killAfter = 3000, 500
	const stream = "KILL"
	c.open(t, Config{Stream: stream}).Close()

	cmd := osexec.Command(os.Args[0], "-test.run=^TestClusterKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "KAIRO_TEST_CLUSTER="+c.url(), "KAIRO_TEST_STREAM="+stream, "KAIRO_TEST_EVENTS="+strconv.Itoa(n))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	acked := map[string]uint64{}
	killed := false
	r := bufio.NewScanner(out)
	for r.Scan() {
		f := strings.Fields(r.Text())
		switch {
		case len(f) == 3 && f[0] == "acked":
			acked[f[1]], _ = strconv.ParseUint(f[2], 10, 64)
			if len(acked) == killAfter && !killed {
				cmd.Process.Signal(syscall.SIGKILL)
				killed = true
			}
		case len(f) > 0 && (f[0] == "error" || f[0] == "done"):
			t.Fatalf("the publisher said %q before it was killed", r.Text())
		}
	}
	if !killed {
		t.Fatalf("the publisher ended after %d acknowledgements, before it was killed", len(acked))
	}
	if len(acked) >= n {
		t.Fatalf("the publisher acknowledged all %d events before the kill took", n)
	}
	t.Logf("the publisher was killed after %d acknowledgements", len(acked))

	b := bus.New(c.open(t, Config{Stream: stream}), bus.Config{})
	defer b.Close()
	var mu sync.Mutex
	again := map[string]bus.Result{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := (burster{b: b, publishers: 8, acked: func(id string, res bus.Result) {
		mu.Lock()
		again[id] = res
		mu.Unlock()
	}}).run(ctx, 0, n); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	for id, seq := range acked {
		if res := again[id]; !res.Duplicate || res.Seq != seq {
			t.Errorf("event %s, acknowledged at seq %d before the kill, was published again as %+v; want a duplicate of it", id, seq, res)
		}
	}
	count, stored := map[string]int{}, map[string]uint64{}
	for _, ev := range readStream(t, c, stream) {
		count[ev.ID]++
		stored[ev.ID] = ev.Seq
	}
	for i := range n {
		id := burstID(i)
		if count[id] != 1 {
			t.Errorf("event %s is stored %d times", id, count[id])
		}
		if seq, ok := acked[id]; ok && stored[id] != seq {
			t.Errorf("event %s acknowledged at seq %d is stored at %d", id, seq, stored[id])
		}
	}
	if len(count) != n {
		t.Errorf("the stream holds %d distinct events, want %d", len(count), n)
	}
}

// streamState is node i's own copy of stream, or false if the node has
// none (yet).
func (c *testCluster) streamState(i int, stream string) (server.StreamState, bool) {
	c.mu.Lock()
	srv := c.nodes[i]
	c.mu.Unlock()
	if srv == nil {
		return server.StreamState{}, false
	}
	info, err := srv.Jsz(&server.JSzOptions{Accounts: true, Streams: true})
	if err != nil {
		return server.StreamState{}, false
	}
	for _, a := range info.AccountDetails {
		for _, sd := range a.Streams {
			if sd.Name == stream {
				return sd.State, true
			}
		}
	}
	return server.StreamState{}, false
}

// streamLeader is the index of the node that leads stream, or -1.
func (c *testCluster) streamLeader(stream string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, srv := range c.nodes {
		if srv != nil && srv.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// One node of three, the stream's leader, stopped in the middle of a
// publish burst and started again while it goes on: publishing goes on
// (after a stall while the other two elect a leader; publishers retry with
// the same IDs), no acknowledged event is lost or stored twice, and once
// the node is back its copy of the stream is the others'. The control is
// the burst before the stop.
func TestClusterNodeRestart(t *testing.T) {
	c := startCluster(t)
	const stream = "RESTART"
	b := bus.New(c.open(t, Config{Stream: stream, Timeout: 2 * time.Second}), bus.Config{})
	defer b.Close()
	var mu sync.Mutex
	acked := map[string]uint64{}
	var refusals []error
	ackedN := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	stop := make(chan struct{})
	p := burster{b: b, publishers: 4, stop: stop,
		acked: func(id string, res bus.Result) {
			mu.Lock()
			acked[id] = res.Seq
			mu.Unlock()
		},
		failed: func(err error) {
			mu.Lock()
			refusals = append(refusals, err)
			mu.Unlock()
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	if err := p.run(ctx, 0, 400); err != nil || len(refusals) > 0 { // the control
		t.Fatalf("publishing on a whole cluster: %v %v", err, refusals)
	}

	const n = 1_000_000 // more than the test publishes: stop ends it
	done := make(chan error, 1)
	go func() { done <- p.run(ctx, 400, n) }()
	bustest.Eventually(t, "100 more events acknowledged", func() bool { return ackedN() >= 500 })
	leader := c.streamLeader(stream)
	if leader < 0 {
		t.Fatal("the stream has no leader")
	}
	stopped := time.Now()
	c.stop(leader)
	atStop := ackedN()
	bustest.Eventually(t, "100 events acknowledged with a node down", func() bool { return ackedN() >= atStop+100 })
	t.Logf("100 events were acknowledged %v after the stream's leader, node %d, stopped", time.Since(stopped).Round(time.Millisecond), leader)
	c.start(leader)
	atStart := ackedN()
	bustest.Eventually(t, "100 events acknowledged after the node's restart", func() bool { return ackedN() >= atStart+100 })
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("publishing across the node's stop and restart: %v", err)
	}
	t.Logf("%d events acknowledged, %d publishes refused and retried on the way", len(acked), len(refusals))
	if len(refusals) > 0 {
		t.Logf("the first refusal: %v", refusals[0])
	}

	// Read right away, through the bus and afresh, and again once every
	// replica is current: a read served by the restarted node's copy
	// before it caught up shows as missing events the first time only.
	checkBurst(t, "the bus's replay right after the burst", bustest.ReplayAll(t, b, bus.Query{}), acked, refusals != nil)
	checkBurst(t, "a fresh store's read right after the burst", readStream(t, c, stream), acked, refusals != nil)
	c.waitReplicas(t, stream, leader)
	checkBurst(t, "a fresh store's read once every replica is current", readStream(t, c, stream), acked, refusals != nil)
}

// readStream reads the whole stream through a store opened afresh.
func readStream(t *testing.T, c *testCluster, stream string) []abi.Event {
	t.Helper()
	s := c.open(t, Config{Stream: stream})
	defer s.Close()
	return bustest.ScanAll(t, s, bus.Query{})
}

// checkBurst fails unless evs hold every acknowledged burst event once, at
// its acknowledged seq, and no other burst event; and, if the store was
// unreachable on the way, the record of the outage.
func checkBurst(t *testing.T, what string, evs []abi.Event, acked map[string]uint64, outage bool) {
	t.Helper()
	count, stored := map[string]int{}, map[string]uint64{}
	system := 0
	for _, ev := range evs {
		if strings.HasPrefix(ev.Type, "kairo.system.store.") {
			system++
			continue
		}
		count[ev.ID]++
		stored[ev.ID] = ev.Seq
	}
	var missing, twice, moved, extra []string
	for id, seq := range acked {
		switch {
		case count[id] == 0:
			missing = append(missing, fmt.Sprintf("%s (seq %d)", id, seq))
		case count[id] > 1:
			twice = append(twice, id)
		case stored[id] != seq:
			moved = append(moved, fmt.Sprintf("%s (acknowledged at %d, stored at %d)", id, seq, stored[id]))
		}
	}
	for id := range count {
		if _, ok := acked[id]; !ok {
			extra = append(extra, id)
		}
	}
	first := func(l []string) []string { slices.Sort(l); return l[:min(len(l), 5)] }
	if len(missing)+len(twice)+len(moved)+len(extra) > 0 {
		t.Errorf("%s: of %d acknowledged events, %d are missing %v, %d stored twice %v, %d at another seq %v; %d stored were never acknowledged %v",
			what, len(acked), len(missing), first(missing), len(twice), first(twice), len(moved), first(moved), len(extra), first(extra))
	}
	if outage && system < 2 {
		t.Errorf("%s: the store was unreachable on the way, and the log holds %d kairo.system.store events, want 2", what, system)
	}
}

// waitReplicas waits until every node's copy of stream is the same: the
// restarted node caught up with the others.
func (c *testCluster) waitReplicas(t *testing.T, stream string, restarted int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var states [3]server.StreamState
		var ok [3]bool
		for i := range states {
			states[i], ok[i] = c.streamState(i, stream)
		}
		same := func(a, b server.StreamState) bool {
			return a.Msgs == b.Msgs && a.Bytes == b.Bytes && a.FirstSeq == b.FirstSeq && a.LastSeq == b.LastSeq
		}
		if ok[0] && ok[1] && ok[2] && same(states[0], states[1]) && same(states[1], states[2]) && states[0].Msgs > 0 {
			return
		}
		if time.Now().After(deadline) {
			for i := range states {
				t.Logf("node %d (%v): %d messages, %d bytes, seq %d..%d", i, ok[i], states[i].Msgs, states[i].Bytes, states[i].FirstSeq, states[i].LastSeq)
			}
			t.Fatalf("node %d, restarted, does not hold the stream the others hold within 20 s", restarted)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A stream at its max_bytes on the cluster refuses events with an error
// the bus takes for a full disk, which says the stream is full and what to
// do; raising the limit (a store opened with a larger max_bytes updates
// the stream) makes the bus take events again by itself, after it records
// kairo.system.store.writable. The control is the publishing before the
// stream filled.
func TestClusterStreamFull(t *testing.T) {
	defer func(d time.Duration) { hook.ProbeInterval = d }(hook.ProbeInterval)
	hook.ProbeInterval = 50 * time.Millisecond
	c := startCluster(t)
	opts := Config{Stream: "FULL", MaxBytes: 64 << 10}
	b := bus.New(c.open(t, opts), bus.Config{})
	defer b.Close()
	writable := bustest.NewCollector()
	bustest.Subscribe(t, b, bus.SubjectStoreWritable, bus.SubscribeConfig{}, writable.Handle)
	data := bustest.Payload(t, strings.Repeat("x", 1000))
	stored := 0
	var err error
	for ; stored < 1000; stored++ {
		if _, err = b.Publish(bustest.Ctx(t), &abi.Event{Type: "kairo.test.full", Data: data}); err != nil {
			break
		}
	}
	if stored == 0 {
		t.Fatalf("the first publish on an empty stream: %v", err)
	}
	var full *bus.DiskFullError
	if !errors.As(err, &full) || !bus.IsDiskFull(err) {
		t.Fatalf("after %d events a full stream refused with %v; want a DiskFullError", stored, err)
	}
	for _, want := range []string{"FULL is full", "max_bytes", "raise"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	t.Logf("%d events filled the stream; then: %v", stored, err)
	opts.MaxBytes = 1 << 20
	opts.URL = c.url()
	applyJetStream(t, opts)
	writable.Wait(t, 1)
	if _, err := b.Publish(bustest.Ctx(t), &abi.Event{Type: "kairo.test.full", Data: data}); err != nil {
		t.Fatalf("publish once the limit is raised: %v", err)
	}
	if got := len(bustest.ReplayAll(t, b, bus.Query{Pattern: abi.MustCompilePattern("kairo.test.full")})); got != stored+1 {
		t.Fatalf("the stream holds %d events once the limit is raised, want the %d stored before and the one after", got, stored)
	}
}
