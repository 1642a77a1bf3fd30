package jetstream

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// sharedLog is a nats-server with JetStream and the buses of hosts a and
// b on one stream through it, plus a raw client with the same credentials:
// the third party that can write anything to the stream.
type sharedLog struct {
	url    string
	a, b   *bus.Bus
	raw    *nats.Conn
	stream string
}

func newSharedLog(t *testing.T) *sharedLog {
	t.Helper()
	port := freePorts(t, 1)[0]
	startNATS(t, port, t.TempDir())
	l := &sharedLog{url: fmt.Sprintf("nats://127.0.0.1:%d", port), stream: "SHARED"}
	l.a, l.b = l.open(t, "a"), l.open(t, "b")
	nc, err := nats.Connect(l.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	l.raw = nc
	return l
}

func (l *sharedLog) open(t *testing.T, host string) *bus.Bus {
	t.Helper()
	b := bus.New(openJetStream(t, Config{URL: l.url, Stream: l.stream, Host: host}), bus.Config{Host: host})
	t.Cleanup(func() { b.Close() })
	return b
}

// write publishes a message on the stream as a third party would: on
// subject, with the headers hdr (nil: none) and data.
func (l *sharedLog) write(t *testing.T, subject string, hdr nats.Header, data []byte) uint64 {
	t.Helper()
	msg := &nats.Msg{Subject: subject, Header: hdr, Data: data}
	reply, err := l.raw.RequestMsg(msg, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ack struct {
		Seq   uint64 `json:"seq"`
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &ack); err != nil || ack.Error != nil {
		t.Fatalf("publish on %s: %s %v", subject, reply.Data, err)
	}
	return ack.Seq
}

// next is the seq a message written now should claim: after the last of
// both hosts, once their reports of what they skipped are stored.
func (l *sharedLog) next(t *testing.T) uint64 {
	t.Helper()
	last := uint64(0)
	for stable := 0; stable < 10; {
		time.Sleep(20 * time.Millisecond)
		a, b := l.a.LastSeq(), l.b.LastSeq()
		if a == b && a == last {
			stable++
			continue
		}
		last, stable = max(a, b), 0
	}
	return last + 1
}

// kairoMessage is a well-formed message of Kairo's store holding evs from
// seq first on.
func kairoMessage(first uint64, evs ...*abi.Event) (nats.Header, []byte) {
	data := []byte{jsFormat}
	for _, ev := range evs {
		e := *ev
		e.Seq = 0
		data = appendFrame(data, abi.AppendEvent(nil, &e))
	}
	hdr := nats.Header{}
	hdr.Set(hdrFirst, strconv.FormatUint(first, 10))
	hdr.Set(hdrCount, strconv.Itoa(len(evs)))
	hdr.Set(hdrTime, strconv.FormatInt(time.Now().UnixNano(), 10))
	return hdr, data
}

// skipped waits for the report of the message at stream sequence seq on
// c's subscription to bus.SubjectStoreSkipped.
func skipped(t *testing.T, c *bustest.Collector, seq uint64) bus.StoreSkipped {
	t.Helper()
	deadline := time.Now().Add(bustest.WaitLimit)
	for time.Now().Before(deadline) {
		for _, ev := range c.Events() {
			var r bus.StoreSkipped
			if err := msgpack.Unmarshal(ev.Data, &r); err == nil && r.Stream == seq {
				return r
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no report of stream message %d; got %d reports", seq, len(c.Events()))
	return bus.StoreSkipped{}
}

// idsOf is the IDs of evs whose type starts with prefix, in order.
func idsOf(evs []abi.Event, prefix string) []string {
	var out []string
	for _, ev := range evs {
		if strings.HasPrefix(ev.Type, prefix) {
			out = append(out, ev.ID)
		}
	}
	return out
}

// A message that is not Kairo's on the log's subject is skipped and
// reported with the command that removes it; both hosts keep publishing
// and delivering each other's events, and a host that opens the stream
// again reads every event stored before and after it.
func TestJetStreamStrayMessage(t *testing.T) {
	l := newSharedLog(t)
	reports := bustest.NewCollector()
	bustest.Subscribe(t, l.a, bus.SubjectStoreSkipped, bus.SubscribeConfig{}, reports.Handle)
	got := bustest.NewCollector()
	bustest.Subscribe(t, l.b, "test.>", bus.SubscribeConfig{}, got.Handle)

	before := publishIDs(t, l.a, "test.a", idRange("before", 5)...)
	stray := l.write(t, l.stream+".log.a", nil, []byte("not an event"))
	after := publishIDs(t, l.a, "test.a", idRange("after", 5)...)
	after = append(after, publishIDs(t, l.b, "test.b", idRange("b", 5)...)...)

	r := skipped(t, reports, stray)
	if r.Kind != bus.SkipStray || r.Remove != fmt.Sprintf("nats stream rmm %s %d -f", l.stream, stray) || r.Subject != l.stream+".log.a" {
		t.Fatalf("the report: %+v; want a stray at %d with the command that removes it", r, stray)
	}
	want := append(slices.Clone(before), after...)
	if evs := got.Wait(t, len(want)); !slices.Equal(idsOf(evs, "test."), want) {
		t.Fatalf("b's subscriber got %v, want %v", idsOf(evs, "test."), want)
	}
	// A restart: the store opens, reads past the stray, and keeps the
	// seqs dense for the events it reads.
	replayed := bustest.ReplayAll(t, l.open(t, "c"), bus.Query{})
	if !slices.Equal(idsOf(replayed, "test."), want) {
		t.Fatalf("a store opened after the stray replays %v, want %v", idsOf(replayed, "test."), want)
	}
	bustest.CheckDense(t, replayed, 1)
}

// A message with a stale Kairo-Seq — well-formed, and truthful about its
// host — is skipped: no seq is handed out twice, replay loses nothing, and
// the numbers after it continue where they were. Its control, a message
// that claims the next seq, is read.
func TestJetStreamStaleSeq(t *testing.T) {
	l := newSharedLog(t)
	reports := bustest.NewCollector()
	bustest.Subscribe(t, l.b, bus.SubjectStoreSkipped, bus.SubscribeConfig{}, reports.Handle)
	sent := publishIDs(t, l.a, "test.a", idRange("a", 10)...)

	forged := &abi.Event{ID: "stale-1", Type: "test.b", Source: "operator/0", Time: time.Now(), Host: "b"}
	hdr, data := kairoMessage(3, forged)
	stale := l.write(t, l.stream+".log.b", hdr, data)
	more := publishIDs(t, l.b, "test.b", idRange("b", 3)...)
	if r := skipped(t, reports, stale); r.Kind != bus.SkipStale {
		t.Fatalf("the report: %+v; want a stale message", r)
	}
	// The control: the next seq, on b's subject, naming b.
	next := &abi.Event{ID: "next-1", Type: "test.b", Source: "operator/0", Time: time.Now(), Host: "b"}
	hdr, data = kairoMessage(l.next(t), next)
	l.write(t, l.stream+".log.b", hdr, data)
	replayed := bustest.ReplayAll(t, l.open(t, "c"), bus.Query{})
	want := append(append(sent, more...), "next-1")
	if !slices.Equal(idsOf(replayed, "test."), want) {
		t.Fatalf("replay: %v, want %v", idsOf(replayed, "test."), want)
	}
	bustest.CheckDense(t, replayed, 1)
}

// A message on host c's subject whose event names host b is skipped as
// forged: a host's events come only from its own subject, which the
// cluster's permissions give it alone. Its control, the same event naming
// c, is read as c's. An ID c stored is no duplicate for b: IDs are each
// host's own.
func TestJetStreamForgedHost(t *testing.T) {
	l := newSharedLog(t)
	reports := bustest.NewCollector()
	bustest.Subscribe(t, l.b, bus.SubjectStoreSkipped, bus.SubscribeConfig{}, reports.Handle)
	got := bustest.NewCollector()
	bustest.Subscribe(t, l.b, "kairo.user.>", bus.SubscribeConfig{}, got.Handle)
	publishIDs(t, l.a, "test.a", idRange("a", 2)...)

	forged := &abi.Event{ID: "forged-1", Type: abi.SubjectUserMessage, Source: "operator/0", Time: time.Now(), Host: "b"}
	hdr, data := kairoMessage(3, forged)
	seq := l.write(t, l.stream+".log.c", hdr, data)
	if r := skipped(t, reports, seq); r.Kind != bus.SkipForged || !strings.Contains(r.Reason, `names host "b"`) {
		t.Fatalf("the report: %+v; want a forged message", r)
	}

	truthful := &abi.Event{ID: "squat", Type: abi.SubjectUserMessage, Source: "operator/0", Time: time.Now(), Host: "c"}
	at := l.next(t)
	hdr, data = kairoMessage(at, truthful)
	l.write(t, l.stream+".log.c", hdr, data)
	evs := got.Wait(t, 1)
	if len(evs) != 1 || evs[0].ID != "squat" || evs[0].Host != "c" || evs[0].Seq != at {
		t.Fatalf("b's subscriber got %+v; want only c's own message, at seq %d", evs, at)
	}
	// b publishes the ID c took: it is b's event, stored at a seq of its
	// own; published again, it is b's duplicate.
	for i, wantDup := range []bool{false, true} {
		res, err := l.b.Publish(bustest.Ctx(t), &abi.Event{ID: "squat", Type: "test.b"})
		if err != nil || res.Duplicate != wantDup || res.Seq <= at {
			t.Fatalf("b's publish %d of the ID c stored: %+v %v; want a seq after %d, duplicate %v", i, res, err, at, wantDup)
		}
	}
}
