package jetstream

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
	"github.com/kairo-os/kairo/kernel/bus/internal/hook"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// Facts published with PublishKept while the NATS server is down are kept
// by the bus and stored once it is back: right after the record of the
// outage, in the order they happened, each once, with the IDs they were
// given, and delivered live. An ordinary publish meanwhile is refused and
// never stored (the denial beside the kept). The control: a fact published
// while the store answers is stored at once, as Publish stores it.
func TestKeptThroughOutage(t *testing.T) {
	port := freePorts(t, 1)[0]
	dir := filepath.Join(t.TempDir(), "nats")
	srv := startNATS(t, port, dir)
	opts := Config{URL: fmt.Sprintf("nats://127.0.0.1:%d", port), Stream: "KEPT", Timeout: time.Second}
	b := bus.New(openJetStream(t, opts), bus.Config{})
	defer b.Close()
	facts := bustest.NewCollector()
	bustest.Subscribe(t, b, "kairo.process.>", bus.SubscribeConfig{}, facts.Handle)

	// The control: stored at once.
	res, err := b.PublishKept(bustest.Ctx(t), &abi.Event{ID: "fact-before", Type: abi.SubjectProcessExited})
	if err != nil || res.Seq == 0 {
		t.Fatalf("a fact while the store answers: %+v, %v; want it stored", res, err)
	}
	facts.Wait(t, 1)

	srv.Shutdown()
	srv.WaitForShutdown()
	down := time.Now()
	var ids []string
	for i := range 10 {
		ev := &abi.Event{ID: fmt.Sprintf("fact-%02d", i), Type: abi.SubjectProcessExited, Data: bustest.Payload(t, i)}
		_, err := b.PublishKept(bustest.Ctx(t), ev)
		if !errors.Is(err, bus.ErrKept) || !bus.IsUnreachable(err) {
			t.Fatalf("fact %d while the server is down: %v; want it kept (ErrKept)", i, err)
		}
		ids = append(ids, ev.ID)
		if i == 4 { // an ordinary event among them is refused, not kept
			_, err := b.Publish(bustest.Ctx(t), &abi.Event{ID: "plain", Type: "test.plain"})
			if err == nil || errors.Is(err, bus.ErrKept) || !bus.IsUnreachable(err) {
				t.Fatalf("an ordinary publish while the server is down: %v; want it refused", err)
			}
		}
	}
	if kept, dropped := b.Kept(); kept != 10 || dropped != 0 {
		t.Fatalf("Kept() = %d, %d; want 10 kept, none dropped", kept, dropped)
	}
	if n := len(facts.Events()); n != 1 {
		t.Fatalf("%d facts delivered while the store was away; want only the control", n)
	}
	time.Sleep(300 * time.Millisecond) // an outage the record must cover
	restarted := time.Now()
	startNATS(t, port, dir)
	bustest.Eventually(t, "the bus reaches the store again", func() bool { s, _ := b.Unreachable(); return s.IsZero() })
	delivered := facts.Wait(t, 11)

	reader := openJetStream(t, opts)
	defer reader.Close()
	all := bustest.ScanAll(t, reader, bus.Query{})
	var types []string
	for _, ev := range all {
		types = append(types, ev.Type+" "+ev.ID)
	}
	at := slices.IndexFunc(all, func(ev abi.Event) bool { return ev.Type == bus.SubjectStoreReachable })
	if at < 1 || all[at-1].Type != bus.SubjectStoreUnreachable || len(all) != at+1+len(ids) {
		t.Fatalf("the stream holds %v; want the control, the outage's record, then the 10 kept facts", types)
	}
	for i, id := range ids {
		ev := all[at+1+i]
		if ev.ID != id || ev.Seq != all[at].Seq+1+uint64(i) {
			t.Fatalf("after the outage's record, event %d is %s at seq %d; want %s at %d (in order, dense)", i, ev.ID, ev.Seq, id, all[at].Seq+1+uint64(i))
		}
		if d := delivered[1+i]; d.ID != id || d.Seq != ev.Seq {
			t.Errorf("delivered fact %d is %s at %d; want %s at %d", i, d.ID, d.Seq, id, ev.Seq)
		}
	}
	var r bus.StoreReachable
	if err := msgpack.Unmarshal(all[at].Data, &r); err != nil {
		t.Fatal(err)
	}
	if r.Kept != 10 || r.Refused != 1 {
		t.Errorf("the outage's record says %d kept and %d refused; want 10 and 1", r.Kept, r.Refused)
	}
	// It began with the first append that failed, right after the stop,
	// and lasted at least until the server started again.
	if r.Since.Before(down) || r.Since.Sub(down) > 200*time.Millisecond || r.Since.Add(r.Down).Before(restarted) {
		t.Errorf("the outage's record says it began %v and lasted %v; the server was down from %v until after %v", r.Since, r.Down, down, restarted)
	}
	// Kept with its ID: published again, a duplicate.
	if res, err := b.PublishKept(bustest.Ctx(t), &abi.Event{ID: ids[3], Type: abi.SubjectProcessExited}); err != nil || !res.Duplicate || res.Seq != all[at+4].Seq {
		t.Errorf("a kept fact published again: %+v, %v; want a duplicate at %d", res, err, all[at+4].Seq)
	}
	if kept, _ := b.Kept(); kept != 0 {
		t.Errorf("the bus still keeps %d facts", kept)
	}
}

// Past MaxKept a fact is refused as any event is, and counted; once the
// store is back the kept ones are stored and then SubjectStoreDropped
// says how many were not. The control is the facts within the bound.
func TestKeptBound(t *testing.T) {
	defer func(n int) { hook.MaxKept = n }(hook.MaxKept)
	hook.MaxKept = 3
	port := freePorts(t, 1)[0]
	dir := filepath.Join(t.TempDir(), "nats")
	srv := startNATS(t, port, dir)
	opts := Config{URL: fmt.Sprintf("nats://127.0.0.1:%d", port), Stream: "BOUND", Timeout: time.Second}
	b := bus.New(openJetStream(t, opts), bus.Config{})
	defer b.Close()
	srv.Shutdown()
	srv.WaitForShutdown()
	for i := range 5 {
		_, err := b.PublishKept(bustest.Ctx(t), &abi.Event{ID: fmt.Sprintf("fact-%d", i), Type: abi.SubjectProcessExited})
		if kept := errors.Is(err, bus.ErrKept); kept != (i < 3) || !bus.IsUnreachable(err) {
			t.Fatalf("fact %d of a bound of 3: %v; want kept %v", i, err, i < 3)
		}
	}
	if kept, dropped := b.Kept(); kept != 3 || dropped != 2 {
		t.Fatalf("Kept() = %d, %d; want 3 kept, 2 dropped", kept, dropped)
	}
	startNATS(t, port, dir)
	bustest.Eventually(t, "the bus reaches the store again", func() bool { s, _ := b.Unreachable(); return s.IsZero() })
	var got []string
	var d bus.StoreDropped
	for _, ev := range bustest.ReplayAll(t, b, bus.Query{}) {
		got = append(got, ev.ID)
		if ev.Type == bus.SubjectStoreDropped {
			if err := msgpack.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			got[len(got)-1] = "dropped"
		}
	}
	if len(got) != 6 || !slices.Equal(got[2:], []string{"fact-0", "fact-1", "fact-2", "dropped"}) {
		t.Fatalf("the log holds %v; want the outage's record, the 3 kept facts, then the report of those dropped", got)
	}
	if d.Dropped != 2 || d.Kept != 3 || d.Since.IsZero() {
		t.Errorf("the report says %+v; want 2 dropped, 3 kept", d)
	}
	if kept, dropped := b.Kept(); kept != 0 || dropped != 0 {
		t.Errorf("Kept() = %d, %d after the report", kept, dropped)
	}
}
