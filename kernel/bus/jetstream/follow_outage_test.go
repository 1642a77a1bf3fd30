package bus

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
)

// Two hosts on one stream, and the server restarts between them: host b's
// subscriber gets host a's events from before and after the outage, each
// once and in seq order, as b's follower finds the stream again; what b
// publishes itself after comes after them. The control: a's events before
// the outage reach b live.
func TestFollowAcrossOutage(t *testing.T) {
	defer func(d time.Duration) { probeInterval = d }(probeInterval)
	probeInterval = 50 * time.Millisecond
	port := freePorts(t, 1)[0]
	dir := filepath.Join(t.TempDir(), "nats")
	srv := startNATS(t, port, dir)
	opts := JetStreamOptions{URL: fmt.Sprintf("nats://127.0.0.1:%d", port), Stream: "OUTAGE", Timeout: time.Second}
	a := New(openJetStream(t, withHost(opts, "a")), Options{Host: "a"})
	defer a.Close()
	b := New(openJetStream(t, withHost(opts, "b")), Options{Host: "b"})
	defer b.Close()
	got := newCollector()
	subscribe(t, b, "test.>", SubscribeOptions{}, got.handle)
	outage := newCollector()
	subscribe(t, b, "kairo.system.store.>", SubscribeOptions{}, outage.handle)

	publishIDs(t, a, "test.a", idRange("before", 10)...)
	got.wait(t, 10) // the control

	srv.Shutdown()
	srv.WaitForShutdown()
	if _, err := a.Publish(testCtx(t), &abi.Event{Type: "kairo.test.away"}); !IsUnreachable(err) {
		t.Fatalf("a publish with the server down: %v; want it refused as unreachable", err)
	}
	startNATS(t, port, dir)
	// a publishes as soon as the store takes it again: the same IDs on
	// every try, so a try that landed unacknowledged is not stored twice.
	for _, id := range idRange("after", 10) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := a.Publish(testCtx(t), &abi.Event{ID: id, Type: "test.a", Data: payload(t, id)})
			if err == nil {
				break
			}
			var gone *StoreUnreachableError
			if !errors.As(err, &gone) && !IsUnreachable(err) || time.Now().After(deadline) {
				t.Fatalf("publish %s after the restart: %v", id, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	got.wait(t, 20)
	mustPublish(t, b, &abi.Event{ID: "b-after", Type: "test.b"})
	evs := got.wait(t, 21)
	want := append(idRange("before", 10), idRange("after", 10)...)
	checkEvents(t, "b's subscriber, a's events", evs[:20], "a", want)
	if evs[20].ID != "b-after" || evs[20].Host != "b" {
		t.Fatalf("b's own event after them is %s of %q", evs[20].ID, evs[20].Host)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq <= evs[i-1].Seq {
			t.Fatalf("b's subscriber got seq %d after %d", evs[i].Seq, evs[i-1].Seq)
		}
	}
	settle(t, "b's subscriber", got, 21)
	// a's record of its outage is a's, as every event it publishes.
	for _, ev := range outage.wait(t, 2) {
		if ev.Host != "a" {
			t.Fatalf("%s of a's outage names host %q", ev.Type, ev.Host)
		}
	}
}
