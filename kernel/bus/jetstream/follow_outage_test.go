package jetstream

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
	"github.com/kairo-os/kairo/kernel/bus/internal/hook"

	"github.com/kairo-os/kairo/abi"
)

// Two hosts on one stream, and the server restarts between them: host b's
// subscriber gets host a's events from before and after the outage, each
// once and in seq order, as b's follower finds the stream again; what b
// publishes itself after comes after them. The control: a's events before
// the outage reach b live.
func TestFollowAcrossOutage(t *testing.T) {
	defer func(d time.Duration) { hook.ProbeInterval = d }(hook.ProbeInterval)
	hook.ProbeInterval = 50 * time.Millisecond
	port := freePorts(t, 1)[0]
	dir := filepath.Join(t.TempDir(), "nats")
	srv := startNATS(t, port, dir)
	opts := Config{URL: fmt.Sprintf("nats://127.0.0.1:%d", port), Stream: "OUTAGE", Timeout: time.Second}
	a := bus.New(openJetStream(t, withHost(opts, "a")), bus.Config{Host: "a"})
	defer a.Close()
	b := bus.New(openJetStream(t, withHost(opts, "b")), bus.Config{Host: "b"})
	defer b.Close()
	got := bustest.NewCollector()
	bustest.Subscribe(t, b, "test.>", bus.SubscribeConfig{}, got.Handle)
	outage := bustest.NewCollector()
	bustest.Subscribe(t, b, "kairo.system.store.>", bus.SubscribeConfig{}, outage.Handle)

	publishIDs(t, a, "test.a", idRange("before", 10)...)
	got.Wait(t, 10) // the control

	srv.Shutdown()
	srv.WaitForShutdown()
	if _, err := a.Publish(bustest.Ctx(t), &abi.Event{Type: "kairo.test.away"}); !bus.IsUnreachable(err) {
		t.Fatalf("a publish with the server down: %v; want it refused as unreachable", err)
	}
	startNATS(t, port, dir)
	// a publishes as soon as the store takes it again: the same IDs on
	// every try, so a try that landed unacknowledged is not stored twice.
	for _, id := range idRange("after", 10) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := a.Publish(bustest.Ctx(t), &abi.Event{ID: id, Type: "test.a", Data: bustest.Payload(t, id)})
			if err == nil {
				break
			}
			var gone *bus.StoreUnreachableError
			if !errors.As(err, &gone) && !bus.IsUnreachable(err) || time.Now().After(deadline) {
				t.Fatalf("publish %s after the restart: %v", id, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	got.Wait(t, 20)
	bustest.MustPublish(t, b, &abi.Event{ID: "b-after", Type: "test.b"})
	evs := got.Wait(t, 21)
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
	for _, ev := range outage.Wait(t, 2) {
		if ev.Host != "a" {
			t.Fatalf("%s of a's outage names host %q", ev.Type, ev.Host)
		}
	}
}
