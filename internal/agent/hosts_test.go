package agent

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus/jetstream"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
)

// host is one kairo of several on one JetStream stream: its bus names it
// on every event, its kernel runs its processes, its agent its run loops.
type host struct {
	bus    *bus.Bus
	kernel *kernel.Kernel
}

func newHost(t *testing.T, name string, store bus.Store) *host {
	t.Helper()
	b := bus.New(store, bus.Config{Host: name})
	k := kernel.New(b, kernel.Config{Logger: quiet})
	t.Cleanup(func() { k.Close(); b.Close() })
	return &host{bus: b, kernel: k}
}

func (h *host) say(t *testing.T, text string) {
	t.Helper()
	raw, _ := msgpack.Marshal(abi.UserMessage{Text: text, MessageID: abi.NewID()})
	if _, err := h.bus.Publish(context.Background(), &abi.Event{Type: abi.SubjectUserMessage, Source: "test", Data: raw}); err != nil {
		t.Fatal(err)
	}
}

// runs is what agent.runs answers on h, by host.
func (h *host) runs(t *testing.T) map[string]int {
	t.Helper()
	raw, _ := msgpack.Marshal(abi.RunsParams{})
	out, aerr := h.kernel.Invoke(context.Background(), abi.MethodAgentRuns, &kernel.Call{Session: operatorSession{}, Params: raw})
	if aerr != nil {
		t.Fatal(aerr)
	}
	var res abi.RunsResult
	if err := msgpack.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	by := map[string]int{}
	for _, r := range res.Runs {
		by[r.Host]++
	}
	return by
}

// Two kairos on one stream, each with its agent: a message sent on host a
// is acted on by a's agent only, b's agent lists a's run loop with its
// host, and the other way round.
func TestAgentsOfTwoHosts(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	jsDir := t.TempDir()
	sa, err := jetstream.Open(jetstream.Config{Embedded: true, Dir: jsDir, Listen: "127.0.0.1:" + port, Host: "a", Peers: []string{"b"}})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := jetstream.Open(jetstream.Config{URL: "nats://127.0.0.1:" + port, Host: "b", PasswordFile: jetstream.PeerPasswordFile(jsDir, "b")})
	if err != nil {
		sa.Close()
		t.Fatal(err)
	}
	a := newHost(t, "a", sa)
	b := newHost(t, "b", sb) // closed first: a's store is the server
	dir := t.TempDir()
	ranA, ranB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, x := range []struct {
		h      *host
		marker string
	}{{a, ranA}, {b, ranB}} {
		r, err := New(Config{Kernel: x.h.kernel, Policy: onceSpawn("echo ran >> " + x.marker), Logger: quiet, Hz: 100})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Stop)
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("not within 20s: %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// Host b's user, which may append only on b's subject, writes a
	// well-formed user message that names host a: it is skipped as
	// forged and reported, and neither agent acts on it.
	reports := make(chan abi.Event, 16)
	sub, err := a.bus.Subscribe(context.Background(), bus.SubjectStoreSkipped, bus.SubscribeConfig{}, func(evs []abi.Event) error {
		for _, ev := range evs {
			reports <- ev
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	forgeUserMessage(t, "nats://127.0.0.1:"+port, jetstream.PeerPasswordFile(jsDir, "b"), "b", "a", b.bus.LastSeq()+1)
	select {
	case ev := <-reports:
		var r bus.StoreSkipped
		if err := msgpack.Unmarshal(ev.Data, &r); err != nil || r.Kind != bus.SkipForged {
			t.Fatalf("the report of the forged message: %+v (%v)", r, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no report of the forged message within 20 s")
	}
	time.Sleep(300 * time.Millisecond)
	if na, nb := lines(t, ranA), lines(t, ranB); na != 0 || nb != 0 {
		t.Fatalf("a forged user message ran on a %d times and on b %d times", na, nb)
	}

	a.say(t, "run it")
	eventually("a's agent ran a's task", func() bool { return lines(t, ranA) == 1 })
	eventually("b lists a's run loop as a's", func() bool { return b.runs(t)["a"] == 1 })
	if n := lines(t, ranB); n != 0 {
		t.Fatalf("b's agent acted on a message sent on a: ran %d times", n)
	}
	if got := b.runs(t)["b"]; got != 0 {
		t.Fatalf("b lists %d run loops of its own; it was sent nothing", got)
	}

	b.say(t, "run it") // the control: b's agent acts on b's message
	eventually("b's agent ran b's task", func() bool { return lines(t, ranB) == 1 })
	eventually("a lists both", func() bool { r := a.runs(t); return r["a"] == 1 && r["b"] == 1 })
	if n := lines(t, ranA); n != 1 {
		t.Fatalf("a's agent ran %d times; b's message is b's", n)
	}
}

// forgeUserMessage writes, as host writer's NATS user, a message of
// Kairo's format on writer's subject holding a user message "run it" that
// names host claimed and claims seq first: what a peer with its own
// credentials can write to the shared stream.
func forgeUserMessage(t *testing.T, url, passwordFile, writer, claimed string, first uint64) {
	t.Helper()
	pw, err := os.ReadFile(passwordFile)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, nats.UserInfo(writer, strings.TrimSpace(string(pw))))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	raw, _ := msgpack.Marshal(abi.UserMessage{Text: "run it", MessageID: "forged"})
	env := abi.AppendEvent(nil, &abi.Event{ID: "forged-1", Type: abi.SubjectUserMessage, Source: "operator/0", Time: time.Now(), Data: raw, Host: claimed})
	data := binary.AppendUvarint([]byte{1}, uint64(len(env)))
	msg := &nats.Msg{Subject: "KAIRO.log." + writer, Header: nats.Header{}, Data: append(data, env...)}
	msg.Header.Set("Kairo-Seq", strconv.FormatUint(first, 10))
	msg.Header.Set("Kairo-Count", "1")
	msg.Header.Set("Kairo-Time", strconv.FormatInt(time.Now().UnixNano(), 10))
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// The other hosts an agent keeps run loops of are bounded: events of hosts
// past maxOtherHosts are not folded (and said once), whoever writes them
// into the shared stream. The control: the first maxOtherHosts hosts are
// listed.
func TestOtherHostsBounded(t *testing.T) {
	e := newEnv(t)
	r, err := New(Config{Kernel: e.kernel, Policy: onceSpawn("true"), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxOtherHosts + 10 {
		raw, _ := msgpack.Marshal(abi.IntentStarted{RunLoopID: "loop-" + strconv.Itoa(i), Agent: "default", Goal: "g"})
		r.foldOther(&abi.Event{ID: abi.NewID(), Type: abi.SubjectIntentStarted, Source: "agent/default",
			Host: "h" + strconv.Itoa(i), CorrelationID: "loop-" + strconv.Itoa(i), Data: raw, Seq: uint64(i + 1)})
	}
	if len(r.others) != maxOtherHosts || !r.othersFull {
		t.Fatalf("%d other hosts kept (full %v); want %d", len(r.others), r.othersFull, maxOtherHosts)
	}
	if st := r.others["h0"]; st == nil || len(st.loops) != 1 {
		t.Fatalf("the first host's run loop is not listed: %+v", st)
	}
}
