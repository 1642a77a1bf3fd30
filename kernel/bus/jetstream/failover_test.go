package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// failoverKills is how many times BenchmarkFailover kills the stream's
// leader: enough for a median, few enough for one run to stay under 40 s.
const failoverKills = 3

// BenchmarkFailover kills the leader of a replicated stream while a bus
// publishes on it, failoverKills times, and reports the medians of:
// failover-ms, from the kill to the first acknowledgement of a publish
// that began after it; election-ms, from the kill until another node says
// it leads the stream (JetStream's own failover, measured in the same
// run); and over-election-ms, their difference, what the bus adds. Run it
// alone, once:
//
//	go test ./kernel/bus -run '^$' -bench Failover -benchtime 1x
//
// The store has its default timeout (DefaultTimeout).
func BenchmarkFailover(b *testing.B) {
	c := startProcessCluster(b)
	const stream = "FAILOVER"
	store := openJetStream(b, Config{URL: c.url(), Replicas: 3, Stream: stream})
	bs := bus.New(store, bus.Config{})
	defer bs.Close()

	// One publisher at a time, as the kernel's facts come: each event is
	// retried with its ID until it is acknowledged.
	var mu sync.Mutex
	var acks []failoverAck
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			ev := &abi.Event{ID: fmt.Sprintf("failover-%06d", i), Type: "kairo.test.failover"}
			for {
				select {
				case <-stop:
					return
				default:
				}
				began := time.Now()
				_, err := bs.Publish(context.Background(), ev)
				if err == nil {
					mu.Lock()
					acks = append(acks, failoverAck{began: began, acked: time.Now()})
					mu.Unlock()
					break
				}
				if errors.Is(err, bus.ErrClosed) {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}
	}()
	defer func() { close(stop); <-done }()
	firstAfter := func(t time.Time) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range acks {
			if !a.began.Before(t) {
				return a.acked, true
			}
		}
		return time.Time{}, false
	}
	ackedAfter := func(t time.Time) bool { _, ok := firstAfter(t); return ok }

	var failover, election []time.Duration
	b.ResetTimer()
	for range b.N {
		for range failoverKills {
			waitFor(b, "a publish acknowledged", 20*time.Second, func() bool { return ackedAfter(time.Now().Add(-50 * time.Millisecond)) })
			leader := c.streamLeader(stream, -1)
			if leader < 0 {
				b.Fatal("the stream has no leader")
			}
			killed := time.Now()
			c.kill(leader)
			var elected time.Time
			waitFor(b, "a new leader of the stream", 30*time.Second, func() bool {
				if l := c.streamLeader(stream, leader); l >= 0 {
					elected = time.Now()
					return true
				}
				return false
			})
			var acked time.Time
			waitFor(b, "a publish acknowledged after the kill", 60*time.Second, func() bool {
				var ok bool
				acked, ok = firstAfter(killed)
				return ok
			})
			failover = append(failover, acked.Sub(killed))
			election = append(election, elected.Sub(killed))
			b.Logf("node %d, the leader, killed: a new leader after %v, the first publish acknowledged after %v",
				leader, elected.Sub(killed).Round(time.Millisecond), acked.Sub(killed).Round(time.Millisecond))
			c.start(leader)
			waitFor(b, "every replica current", 30*time.Second, func() bool { return c.replicasCurrent(stream) })
		}
	}
	b.StopTimer()
	f, e := median(failover), median(election)
	b.ReportMetric(float64(f.Milliseconds()), "failover-ms")
	b.ReportMetric(float64(e.Milliseconds()), "election-ms")
	b.ReportMetric(float64((f - e).Milliseconds()), "over-election-ms")
	b.ReportMetric(0, "ns/op")
}

type failoverAck struct{ began, acked time.Time }

func waitFor(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// The stream's leader killed with SIGKILL while a bus publishes: the
// record of the outage begins when the first append that failed began —
// not when it failed, a timeout later — so its Down covers the time
// publishing stalled; and a fact of the kernel published right after the
// kill is stored once, after the record if the bus had to keep it. The
// control is the publishing before the kill.
func TestFailoverOutageRecord(t *testing.T) {
	c := startProcessCluster(t)
	const stream = "RECORD"
	opts := Config{URL: c.url(), Replicas: 3, Stream: stream}
	b := bus.New(openJetStream(t, opts), bus.Config{})
	defer b.Close()
	records := bustest.NewCollector()
	bustest.Subscribe(t, b, bus.SubjectStoreReachable, bus.SubscribeConfig{}, records.Handle)
	var mu sync.Mutex
	var acked []time.Time
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := b.Publish(context.Background(), &abi.Event{Type: "kairo.test.record"}); err == nil {
				mu.Lock()
				acked = append(acked, time.Now())
				mu.Unlock()
			} else if errors.Is(err, bus.ErrClosed) {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var once sync.Once
	halt := func() { once.Do(func() { close(stop); <-done }) }
	defer halt()
	ackedSince := func(at time.Time) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		if n := len(acked); n > 0 && acked[n-1].After(at) {
			i, _ := slices.BinarySearchFunc(acked, at, func(a, t time.Time) int { return a.Compare(t) })
			return acked[i], true
		}
		return time.Time{}, false
	}
	start := time.Now()
	waitFor(t, "publishing on the whole cluster", 20*time.Second, func() bool { _, ok := ackedSince(start); return ok })

	leader := c.streamLeader(stream, -1)
	if leader < 0 {
		t.Fatal("the stream has no leader")
	}
	killed := time.Now()
	c.kill(leader)
	fact := &abi.Event{ID: "fact-after-kill", Type: abi.SubjectProcessExited}
	_, factErr := b.PublishKept(bustest.Ctx(t), fact)
	if factErr != nil && !errors.Is(factErr, bus.ErrKept) {
		t.Fatalf("a fact published after the kill: %v; want it stored or kept", factErr)
	}
	var resumed time.Time
	waitFor(t, "a publish acknowledged after the kill", 30*time.Second, func() bool {
		var ok bool
		resumed, ok = ackedSince(killed.Add(time.Millisecond))
		return ok
	})
	evs := records.Wait(t, 1)
	var r bus.StoreReachable
	if err := msgpack.Unmarshal(evs[0].Data, &r); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed at %v; the record says since %v for %v; publishing resumed %v after the kill (fact: %v)",
		killed.Format("15:04:05.000"), r.Since.Format("15:04:05.000"), r.Down.Round(time.Millisecond), resumed.Sub(killed).Round(time.Millisecond), factErr)
	// Before the fix it began a timeout (2 s) after the kill, and said 1 s
	// where publishing had stalled 11.
	if r.Since.After(killed.Add(500*time.Millisecond)) || r.Since.Add(r.Down).Before(resumed.Add(-time.Second)) {
		t.Errorf("the record says the outage began %v after the kill and lasted %v; publishing stalled from the kill for %v",
			r.Since.Sub(killed).Round(time.Millisecond), r.Down.Round(time.Millisecond), resumed.Sub(killed).Round(time.Millisecond))
	}
	halt()

	reader := openJetStream(t, opts)
	defer reader.Close()
	n, factAt, recordAt := 0, uint64(0), uint64(0)
	for _, ev := range bustest.ScanAll(t, reader, bus.Query{}) {
		switch {
		case ev.ID == fact.ID:
			n++
			factAt = ev.Seq
		case ev.Type == bus.SubjectStoreReachable && recordAt == 0:
			recordAt = ev.Seq
		}
	}
	if n != 1 {
		t.Fatalf("the fact published after the kill is stored %d times; want once", n)
	}
	if errors.Is(factErr, bus.ErrKept) && factAt <= recordAt {
		t.Errorf("the kept fact is at seq %d, the outage's record at %d; want the fact after it", factAt, recordAt)
	}
}
