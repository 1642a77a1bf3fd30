package jetstream

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kairo-os/kairo/abi"
)

// checkWriters fails unless what the writers ws published on the stream
// of opts, as l records it, is stored as several honest writers must
// store it: every acknowledged event once, at the seq it was acknowledged
// with, and marked as its host's; the stored seqs 1..N without a hole or a
// repeat, as a fresh store's Scan reads them and as the stream's messages'
// headers say; every host's live subscriber received every host's events
// once, in seq order; and every acknowledged ID published again on any
// host is a duplicate with its seq, which stores nothing.
func checkWriters(t *testing.T, c *testCluster, opts Config, ws []*hostWriter, l *ackLedger) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	start := time.Now()
	defer func() { t.Logf("the checks took %v", time.Since(start).Round(time.Millisecond)) }()
	hosts := map[string]bool{}
	for _, w := range ws {
		hosts[w.host] = true
	}
	stored := scanAfresh(t, c, opts)
	checkUniqueSeqs(t, "a fresh store's scan", stored)
	checkAcked(t, stored, l, hosts)
	checkLogHeaders(t, c, opts.Stream, hosts, stored)
	n := uint64(len(stored))

	// Every host has read the whole stream, and its subscriber received it.
	awaitSettled(func() (bool, string) {
		done, at := true, ""
		for _, w := range ws {
			got := w.bus.LastSeq()
			done = done && got == n
			at += fmt.Sprintf(" %d", got)
		}
		return done, at
	})
	awaitSettled(func() (bool, string) {
		done, at := true, ""
		for _, w := range ws {
			got := len(w.live.Events())
			done = done && got >= len(stored)
			at += fmt.Sprintf(" %d", got)
		}
		return done, at
	})
	for _, w := range ws {
		if got := w.bus.LastSeq(); got != n {
			if js, ok := w.bus.Store().(*Store); ok {
				js.mu.Lock()
				read := js.lastStream
				js.mu.Unlock()
				info, err := js.stream.Info(bustest.Ctx(t))
				t.Logf("host %s's store has read the stream up to message %d; the stream's last is %+v (%v)", w.host, read, info.State, err)
			}
			t.Errorf("host %s: LastSeq is %d, the stream holds %d events", w.host, got, n)
		}
		checkSameEvents(t, "host "+w.host+"'s replay", bustest.ReplayAll(t, w.bus, bus.Query{}), stored)
		checkSameEvents(t, "host "+w.host+"'s live subscriber", w.live.Events(), stored)
	}

	// Every acknowledged ID again, on every host: all duplicates.
	seqOf := map[string]uint64{}
	for _, ev := range stored {
		seqOf[hostKey(ev.Host, ev.ID)] = ev.Seq
	}
	ctx := bustest.Ctx(t)
	for _, w := range ws {
		// Each host's own acknowledged IDs: an ID is a duplicate on the
		// host that stored it.
		var ids []string
		for k := range l.acks {
			if id, ok := strings.CutPrefix(k, w.host+"/"); ok {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		var wrong []string
		for chunk := range slices.Chunk(ids, 64) {
			evs := make([]*abi.Event, len(chunk))
			for i, id := range chunk {
				evs[i] = &abi.Event{ID: id, Type: "kairo.test.again", Data: bustest.Payload(t, "again")}
			}
			res, err := w.bus.PublishBatch(ctx, evs)
			if err != nil {
				t.Errorf("host %s: publish the acknowledged IDs again, from %s: %v", w.host, chunk[0], err)
				break
			}
			for i, r := range res {
				if k := hostKey(w.host, chunk[i]); !r.Duplicate || r.Seq != seqOf[k] {
					wrong = append(wrong, fmt.Sprintf("%s (stored at %d) as %+v", chunk[i], seqOf[k], r))
				}
			}
		}
		if len(wrong) > 0 {
			t.Errorf("host %s: of %d acknowledged IDs published again, %d were not a duplicate at their seq: %v", w.host, len(ids), len(wrong), wrong[:min(len(wrong), 5)])
		}
	}
	again := scanAfresh(t, c, opts)
	if len(again) != len(stored) {
		var extra []string
		for _, ev := range again[min(len(stored), len(again)):] {
			extra = append(extra, fmt.Sprintf("%s at %d from %q", ev.ID, ev.Seq, ev.Host))
		}
		t.Errorf("publishing the acknowledged IDs again changed the stream from %d events to %d: %v", len(stored), len(again), extra[:min(len(extra), 5)])
	}
	for _, w := range ws {
		if got := len(w.live.Events()); got != len(stored) || w.bus.LastSeq() != n {
			t.Errorf("host %s: after the duplicates its subscriber has %d events and its LastSeq is %d; want %d and %d", w.host, got, w.bus.LastSeq(), len(stored), n)
		}
	}
}

// scanAfresh reads the whole stream through a store opened afresh with opts
// (so that it leaves the stream's limits as they are).
func scanAfresh(t *testing.T, c *testCluster, opts Config) []abi.Event {
	t.Helper()
	opts.Host = ""
	s := c.open(t, opts)
	defer s.Close()
	evs := bustest.ScanAll(t, s, bus.Query{})
	if r, _ := s.TakeSkipped(); len(r) > 0 {
		t.Errorf("a fresh store skipped what honest writers wrote: %+v", r)
	}
	return evs
}

// awaitQuiet waits until every host's LastSeq is the same and has not
// changed for 300 ms: a bus records some things by itself, a while after
// the publish that caused them (the stream is writable again).
func awaitQuiet(t *testing.T, ws []*hostWriter) {
	t.Helper()
	deadline := time.Now().Add(bustest.WaitLimit)
	last, since := uint64(0), time.Now()
	for time.Now().Before(deadline) {
		seq, same := ws[0].bus.LastSeq(), true
		for _, w := range ws[1:] {
			same = same && w.bus.LastSeq() == seq
		}
		if !same || seq != last {
			last, since = seq, time.Now()
		} else if time.Since(since) >= 300*time.Millisecond {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the hosts' last seqs did not settle within %v", bustest.WaitLimit)
}

// awaitSettled polls done until it holds, or until what it reports of its
// progress stopped changing for 10 s (a node that came back may keep a
// follower waiting a few seconds), or waitLimit passed: what did not
// arrive is reported by the checks after it, not by a timeout.
func awaitSettled(done func() (bool, string)) {
	deadline := time.Now().Add(bustest.WaitLimit)
	last, since := "", time.Now()
	for {
		ok, at := done()
		if ok || time.Now().After(deadline) || time.Since(since) > 10*time.Second {
			return
		}
		if at != last {
			last, since = at, time.Now()
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkUniqueSeqs fails unless evs have the seqs 1..len(evs), in order: no hole,
// no repeat. A repeat is reported with every event that has the seq.
func checkUniqueSeqs(t *testing.T, what string, evs []abi.Event) {
	t.Helper()
	bySeq := map[uint64][]string{}
	var order []string
	for i, ev := range evs {
		bySeq[ev.Seq] = append(bySeq[ev.Seq], fmt.Sprintf("%s from %q", ev.ID, ev.Host))
		if ev.Seq != uint64(i+1) && len(order) < 5 {
			order = append(order, fmt.Sprintf("event %d (%s) has seq %d", i+1, ev.ID, ev.Seq))
		}
	}
	var twice, holes []string
	for seq := uint64(1); seq <= uint64(len(evs)); seq++ {
		switch ids := bySeq[seq]; {
		case len(ids) == 0:
			holes = append(holes, strconv.FormatUint(seq, 10))
		case len(ids) > 1:
			twice = append(twice, fmt.Sprintf("%d: %s", seq, strings.Join(ids, ", ")))
		}
	}
	if len(order)+len(twice)+len(holes) > 0 {
		t.Errorf("%s: %d events; %d seqs given to more than one event %v; %d seqs of 1..%d given to none %v; out of place: %v",
			what, len(evs), len(twice), twice[:min(len(twice), 5)], len(holes), len(evs), holes[:min(len(holes), 5)], order)
	}
}

// checkAcked fails unless every acknowledged ID is stored once, at the
// seq of each of its acknowledgements, as the event of the host whose
// publish stored it; at most one acknowledgement of an ID stored it (none
// only when a publish of it failed: its message stayed); and nothing else
// is stored but the hosts' records of the store's outages.
func checkAcked(t *testing.T, stored []abi.Event, l *ackLedger, hosts map[string]bool) {
	t.Helper()
	count := map[string]int{}
	byID := map[string]abi.Event{}
	var extra, wrongHost []string
	for _, ev := range stored {
		k := hostKey(ev.Host, ev.ID)
		count[k]++
		byID[k] = ev
		if _, ok := l.acks[k]; !ok && !(strings.HasPrefix(ev.Type, "kairo.system.store.") && hosts[ev.Host]) {
			extra = append(extra, fmt.Sprintf("%s (%s) at %d from %q", ev.ID, ev.Type, ev.Seq, ev.Host))
		}
	}
	var missing, twice, moved, stores []string
	for id, acks := range l.acks {
		ev := byID[id]
		switch {
		case count[id] == 0:
			missing = append(missing, fmt.Sprintf("%s %+v", id, acks))
			continue
		case count[id] > 1:
			twice = append(twice, fmt.Sprintf("%s (%d times)", id, count[id]))
		}
		var fresh []hostAck
		for _, a := range acks {
			if a.Seq != ev.Seq {
				moved = append(moved, fmt.Sprintf("%s acknowledged to %s at %d, stored at %d", id, a.host, a.Seq, ev.Seq))
			}
			if !a.Duplicate {
				fresh = append(fresh, a)
			}
		}
		switch {
		case len(fresh) > 1 || len(fresh) == 0 && !l.failed[id]:
			stores = append(stores, fmt.Sprintf("%s %+v", id, acks))
		case len(fresh) == 1 && ev.Host != fresh[0].host:
			wrongHost = append(wrongHost, fmt.Sprintf("%s stored by %s is marked %q", id, fresh[0].host, ev.Host))
		}
		if _, bare, _ := strings.Cut(id, "/"); writerIDHost(bare) != "" && ev.Host != writerIDHost(bare) {
			wrongHost = append(wrongHost, fmt.Sprintf("%s is marked %q", id, ev.Host))
		}
	}
	first := func(l []string) []string { slices.Sort(l); return l[:min(len(l), 5)] }
	if len(missing)+len(twice)+len(moved)+len(stores)+len(extra)+len(wrongHost) > 0 {
		t.Errorf("of %d acknowledged IDs, %d are not stored %v, %d stored more than once %v, %d acknowledged at another seq than stored %v, %d acknowledged as stored by no publish or by several %v, %d marked with another host %v; %d stored events were never acknowledged %v",
			len(l.acks), len(missing), first(missing), len(twice), first(twice), len(moved), first(moved), len(stores), first(stores), len(wrongHost), first(wrongHost), len(extra), first(extra))
	}
}

// checkSameEvents fails unless got is the stored events want: the same IDs, seqs
// and hosts, in the same order, each once.
func checkSameEvents(t *testing.T, what string, got, want []abi.Event) {
	t.Helper()
	if len(got) == len(want) && slices.EqualFunc(got, want, func(x, y abi.Event) bool {
		return x.ID == y.ID && x.Seq == y.Seq && x.Host == y.Host
	}) {
		return
	}
	times := map[string]int{}
	for _, ev := range got {
		times[hostKey(ev.Host, ev.ID)]++
	}
	var missing, twice []string
	for _, ev := range want {
		switch times[hostKey(ev.Host, ev.ID)] {
		case 0:
			missing = append(missing, fmt.Sprintf("%s at %d from %q", ev.ID, ev.Seq, ev.Host))
		case 1:
		default:
			twice = append(twice, ev.ID)
		}
	}
	var order []string
	for i := range min(len(got), len(want)) {
		if g, w := got[i], want[i]; g.ID != w.ID || g.Seq != w.Seq || g.Host != w.Host {
			order = append(order, fmt.Sprintf("#%d is %s at %d from %q, stored is %s at %d from %q", i+1, g.ID, g.Seq, g.Host, w.ID, w.Seq, w.Host))
			if len(order) == 3 {
				break
			}
		}
	}
	t.Errorf("%s: %d events, the stream holds %d; %d of those missing %v, %d received more than once %v; first differences: %v",
		what, len(got), len(want), len(missing), missing[:min(len(missing), 5)], len(twice), twice[:min(len(twice), 5)], order)
}

// rawLogMessage is a message of the stream as the server holds it.
type rawLogMessage struct {
	stream  uint64
	subject string
	first   uint64 // Kairo-Seq
	count   uint64 // Kairo-Count
}

// readLogMessages reads every message of stream with nats.go, not through a store.
func readLogMessages(t *testing.T, c *testCluster, stream string) []rawLogMessage {
	t.Helper()
	ctx := bustest.Ctx(t)
	nc, err := nats.Connect(c.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	total := st.CachedInfo().State.Msgs
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("stream %s: an ordered consumer: %v", stream, err)
	}
	var out []rawLogMessage
	retries := 0
	for uint64(len(out)) < total {
		batch, err := cons.Fetch(min(int(total)-len(out), 500), jetstream.FetchMaxWait(5*time.Second))
		if err != nil && retries < 10 && (IsUnreachable(err) || errors.Is(err, nats.ErrNoResponders)) {
			// A node that came back moments ago may not answer yet.
			retries++
			time.Sleep(500 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("stream %s: fetch after %d of %d messages: %v", stream, len(out), total, err)
		}
		n := len(out)
		for m := range batch.Messages() {
			meta, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			first, err1 := strconv.ParseUint(m.Headers().Get("Kairo-Seq"), 10, 64)
			count, err2 := strconv.ParseUint(m.Headers().Get("Kairo-Count"), 10, 64)
			if err1 != nil || err2 != nil || first == 0 || count == 0 {
				t.Errorf("stream %s: message %d on %s has headers %v, not a first seq and a count", stream, meta.Sequence.Stream, m.Subject(), m.Headers())
			}
			out = append(out, rawLogMessage{stream: meta.Sequence.Stream, subject: m.Subject(), first: first, count: count})
		}
		if batch.Error() != nil || len(out) == n {
			t.Fatalf("stream %s: fetch after %d of %d messages: %v", stream, len(out), total, batch.Error())
		}
	}
	return out
}

// checkLogHeaders fails unless the stream's messages, by their headers, hold the
// seqs of the stored events once each, each message on the subject of one
// of hosts, which its events are marked with.
func checkLogHeaders(t *testing.T, c *testCluster, stream string, hosts map[string]bool, stored []abi.Event) {
	t.Helper()
	msgs := readLogMessages(t, c, stream)
	slices.SortStableFunc(msgs, func(x, y rawLogMessage) int { return cmp.Compare(x.first, y.first) })
	bySeq := map[uint64]abi.Event{}
	for _, ev := range stored {
		bySeq[ev.Seq] = ev
	}
	var overlaps, gaps, subjects, marks []string
	next := uint64(1)
	for i, m := range msgs {
		switch {
		case m.first < next && i > 0:
			p := msgs[i-1]
			overlaps = append(overlaps, fmt.Sprintf("message %d (seq %d..%d on %s) and message %d (seq %d..%d on %s)",
				p.stream, p.first, p.first+p.count-1, p.subject, m.stream, m.first, m.first+m.count-1, m.subject))
		case m.first > next:
			gaps = append(gaps, fmt.Sprintf("%d..%d", next, m.first-1))
		}
		next = max(next, m.first+m.count)
		host, ok := strings.CutPrefix(m.subject, stream+".log.")
		if !ok || !hosts[host] {
			subjects = append(subjects, fmt.Sprintf("message %d on %s", m.stream, m.subject))
			continue
		}
		if len(overlaps) > 0 {
			continue // which message a read takes a seq from is moot
		}
		for seq := m.first; seq < m.first+m.count; seq++ {
			if ev, ok := bySeq[seq]; ok && ev.Host != host && len(marks) < 5 {
				marks = append(marks, fmt.Sprintf("%s at %d, in message %d on %s, is marked %q", ev.ID, seq, m.stream, m.subject, ev.Host))
			}
		}
	}
	if len(overlaps)+len(gaps)+len(subjects)+len(marks) > 0 || next-1 != uint64(len(stored)) {
		t.Errorf("stream %s: %d messages hold seqs 1..%d, a fresh store reads %d events; %d messages share seqs with the one before %v; %d runs of seqs in no message %v; %d on no host's subject %v; events marked with another host than their message's subject: %v",
			stream, len(msgs), next-1, len(stored), len(overlaps), overlaps[:min(len(overlaps), 5)], len(gaps), gaps[:min(len(gaps), 5)], len(subjects), subjects[:min(len(subjects), 5)], marks)
	}
}
