package jetstream

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
	"github.com/kairo-os/kairo/kernel/bus/internal/hook"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// The errors of a store that cannot be reached are told apart from the
// ones of a store that answered with a refusal.
func TestIsUnreachable(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("jetstream nats://x stream K: publish event e (t): %w", err) }
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nats.ErrConnectionClosed, true},
		{wrap(nats.ErrNoServers), true},
		{wrap(nats.ErrTimeout), true},
		{wrap(nats.ErrNoResponders), true},
		{wrap(nats.ErrReconnectBufExceeded), true},
		{wrap(jetstream.ErrNoStreamResponse), true},
		{wrap(jetstream.ErrAsyncPublishTimeout), true},
		{wrap(context.DeadlineExceeded), true},
		{wrap(&jetstream.APIError{Code: 503, ErrorCode: jsClusterNotAvailable, Description: "JetStream system temporarily unavailable"}), true},
		{&bus.StoreUnreachableError{Store: "s", Err: nats.ErrConnectionClosed}, true},
		// The store answered: not an outage.
		{nil, false},
		{errors.New("boom"), false},
		{wrap(syscall.ENOSPC), false},
		{&StreamFullError{Stream: "K", MaxBytes: 1, Err: errors.New("maximum bytes exceeded")}, false},
		{wrap(&jetstream.APIError{Code: 400, ErrorCode: jsWrongLastSeq, Description: "wrong last sequence: 3"}), false},
		{bus.ErrClosed, false},
	} {
		if got := IsUnreachable(tc.err); got != tc.want {
			t.Errorf("IsUnreachable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// startNATS starts a nats-server with JetStream on 127.0.0.1:port keeping
// its streams in dir, shut down at the end of the test unless it was
// already.
func startNATS(t testing.TB, port int, dir string) *server.Server {
	t.Helper()
	srv, err := server.NewServer(&server.Options{
		ServerName: "kairo-test",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		NoSigs:     true,
		NoLog:      true,
		MaxPayload: bus.MaxEventData + 64<<10,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("the nats-server was not ready within 10 s")
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv
}

// The NATS server goes away under a running bus and comes back: publishes
// are refused at once with an error that says the store cannot be reached
// and that publishing resumes by itself; subscriptions stay open; once the
// server is back the log records both when it went away and when it came
// back, with the count refused, before anything else, and publishing works
// again. Nothing refused is stored, nothing acknowledged is lost. The
// control is the publishing before the cut.
func TestStoreUnreachable(t *testing.T) {
	defer func(d time.Duration) { hook.ProbeInterval = d }(hook.ProbeInterval)
	hook.ProbeInterval = 50 * time.Millisecond
	port := freePorts(t, 1)[0]
	dir := filepath.Join(t.TempDir(), "nats")
	srv := startNATS(t, port, dir)
	const timeout = time.Second
	opts := Config{URL: fmt.Sprintf("nats://127.0.0.1:%d", port), Stream: "CUT", Timeout: timeout}
	b := bus.New(openJetStream(t, opts), bus.Config{})
	closed := false
	defer func() {
		if !closed {
			b.Close()
		}
	}()
	system := bustest.NewCollector()
	bustest.Subscribe(t, b, "kairo.system.store.>", bus.SubscribeConfig{}, system.Handle)
	work := bustest.NewCollector()
	workSub := bustest.Subscribe(t, b, "test.>", bus.SubscribeConfig{}, work.Handle)

	acked := map[string]uint64{}
	for i := range 20 { // the control
		ev := &abi.Event{ID: fmt.Sprintf("before-%d", i), Type: "test.cut", Data: bustest.Payload(t, i)}
		acked[ev.ID] = bustest.MustPublish(t, b, ev).Seq
	}
	work.Wait(t, 20)

	srv.Shutdown()
	srv.WaitForShutdown()
	var refusedIDs []string
	var gone *bus.StoreUnreachableError
	for i := range 5 {
		ev := &abi.Event{ID: fmt.Sprintf("refused-%d", i), Type: "test.cut", Data: bustest.Payload(t, i)}
		start := time.Now()
		_, err := b.Publish(bustest.Ctx(t), ev)
		if took := time.Since(start); took > timeout+time.Second {
			t.Errorf("a publish to a store that is away took %v; want at most its timeout %v", took, timeout)
		}
		if !errors.As(err, &gone) {
			t.Fatalf("publish %d while the server is down: %v; want a StoreUnreachableError", i, err)
		}
		refusedIDs = append(refusedIDs, ev.ID)
	}
	for _, want := range []string{"jetstream nats://127.0.0.1", "cannot be reached", "resumes by itself"} {
		if !strings.Contains(gone.Error(), want) {
			t.Errorf("the refusal %q does not say %q", gone, want)
		}
	}
	if !bus.IsUnreachable(gone) {
		t.Errorf("IsUnreachable(%v) = false", gone)
	}
	since, refused := b.Unreachable()
	if since.IsZero() || refused != uint64(len(refusedIDs)) || !gone.Since.Equal(since) {
		t.Fatalf("Unreachable() = %v, %d; want %v and %d refused", since, refused, gone.Since, len(refusedIDs))
	}
	if len(system.Events()) != 0 || len(work.Events()) != 20 {
		t.Fatalf("subscribers got %d system and %d work events while the store was away; want 0 and 20", len(system.Events()), len(work.Events()))
	}
	select {
	case <-workSub.Done():
		t.Fatalf("a subscription ended while the store was away: %v", workSub.Err())
	default:
	}

	srv = startNATS(t, port, dir)
	bustest.Eventually(t, "the bus reaches the store again", func() bool { s, _ := b.Unreachable(); return s.IsZero() })
	// What the stream holds, read afresh: the bus's store reads no further
	// than the last event it stored itself.
	reader := openJetStream(t, opts)
	defer func() { reader.Close() }()
	stored := map[string]int{}
	var logged []abi.Event
	for _, ev := range bustest.ScanAll(t, reader, bus.Query{}) {
		stored[ev.ID]++
		if strings.HasPrefix(ev.Type, "kairo.system.store.") {
			logged = append(logged, ev)
		}
	}
	for _, id := range refusedIDs {
		if stored[id] != 0 {
			t.Fatalf("event %s was refused while the server was down, yet it is stored once the server is back: the NATS client kept it to send on reconnect (the store should connect with nats.ReconnectBufSize(-1))", id)
		}
	}
	if len(logged) != 2 {
		t.Fatalf("the log holds %d kairo.system.store events after the outage, want 2: %+v", len(logged), logged)
	}
	if logged[0].Type != bus.SubjectStoreUnreachable || logged[1].Type != bus.SubjectStoreReachable || logged[1].Seq != logged[0].Seq+1 {
		t.Fatalf("after the outage the log holds %s (seq %d) and %s (seq %d); want unreachable then reachable", logged[0].Type, logged[0].Seq, logged[1].Type, logged[1].Seq)
	}
	if d := b.Stats().Duplicates; d > 0 {
		t.Fatalf("the store took %d events of the bus for duplicates after the outage: a try refused while the server was down was stored on reconnect, and the bus did not deliver what it took for a duplicate (the store should connect with nats.ReconnectBufSize(-1))", d)
	}
	evs := system.Wait(t, 2)
	for i := range evs {
		bustest.SameEvent(t, "delivered system event", evs[i], logged[i])
	}
	var u bus.StoreUnreachable
	var r bus.StoreReachable
	if err := msgpack.Unmarshal(evs[0].Data, &u); err != nil || !u.Since.Equal(since) || !evs[0].Time.Equal(since) || u.Cause == "" {
		t.Errorf("unreachable event %+v at %v (%v); want since %v and its cause", u, evs[0].Time, err, since)
	}
	if err := msgpack.Unmarshal(evs[1].Data, &r); err != nil || !r.Since.Equal(since) || r.Refused != refused ||
		r.Down <= 0 || (r.Back.Sub(since)-r.Down).Abs() > 100*time.Millisecond || !evs[1].Time.Equal(r.Back) {
		t.Errorf("reachable event %+v at %v (%v); want since %v, %d refused, and how long it was down", r, evs[1].Time, err, since, refused)
	}
	if s, _ := b.Unreachable(); !s.IsZero() {
		t.Error("the bus still says the store is unreachable")
	}
	ev := &abi.Event{ID: "after", Type: "test.cut"}
	res := bustest.MustPublish(t, b, ev)
	if res.Seq != evs[1].Seq+1 {
		t.Errorf("the first publish after the outage got seq %d; want %d, right after the reachable event", res.Seq, evs[1].Seq+1)
	}
	acked[ev.ID] = res.Seq
	work.Wait(t, 21)

	reader.Close()
	reader = openJetStream(t, opts)
	clear(stored)
	for _, ev := range bustest.ScanAll(t, reader, bus.Query{}) {
		stored[ev.ID]++
		if seq, ok := acked[ev.ID]; ok && seq != ev.Seq {
			t.Errorf("event %s acknowledged at seq %d is stored at %d", ev.ID, seq, ev.Seq)
		}
	}
	for id := range acked {
		if stored[id] != 1 {
			t.Errorf("acknowledged event %s is stored %d times", id, stored[id])
		}
	}
	reader.Close()

	// A stop while the store is away is clean and prompt, and ends the
	// probe.
	srv.Shutdown()
	srv.WaitForShutdown()
	if _, err := b.Publish(bustest.Ctx(t), &abi.Event{Type: "test.cut"}); !errors.As(err, &gone) {
		t.Fatalf("publish while the server is down again: %v; want a StoreUnreachableError", err)
	}
	start := time.Now()
	closed = true
	b.Close() // its error is the connection's: the server is away
	hook.StopProbe(b)
	if took := time.Since(start); took > 2*timeout {
		t.Errorf("a stop while the store is away took %v", took)
	}
	if hook.Probing(b) {
		t.Error("the probe still runs after the stop")
	}
}
