package ipc_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/ipc"
	"github.com/kairo-os/kairo/sdk/client"
	"github.com/vmihailenco/msgpack/v5"
)

type env struct {
	k    *kernel.Kernel
	srv  *ipc.Server
	path string
}

// start runs a kernel with an in-memory store and its socket server.
func start(t testing.TB, opts ipc.Config) *env {
	t.Helper()
	dir, err := os.MkdirTemp("", "kairo-ipc-") // short: socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b := bus.New(bus.NewMemoryStore(0), bus.Config{})
	k := kernel.New(b, kernel.Config{Version: "test"})
	k.Register(kernel.Method{Name: "test.whoami", Handler: func(_ context.Context, c *kernel.Call) (any, error) {
		return c.Session.Caller(), nil
	}})
	opts.Path = filepath.Join(dir, "kernel.sock")
	srv, err := ipc.Listen(k, opts)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		k.Close()
		b.Close()
	})
	return &env{k: k, srv: srv, path: opts.Path}
}

func (e *env) dial(t testing.TB) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), e.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestSocketModeAndPeerCred(t *testing.T) {
	e := start(t, ipc.Config{})
	fi, err := os.Stat(e.path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode = %v, want a socket with 0600", fi.Mode())
	}
	c := e.dial(t)
	var who kernel.Caller
	if err := c.Call(ctx(t), "test.whoami", nil, &who); err != nil {
		t.Fatal(err)
	}
	if int(who.PID) != os.Getpid() || int(who.UID) != os.Getuid() {
		t.Fatalf("peer = pid %d uid %d, want pid %d uid %d", who.PID, who.UID, os.Getpid(), os.Getuid())
	}
}

func TestPingIntrospectMetrics(t *testing.T) {
	e := start(t, ipc.Config{})
	c := e.dial(t)
	var pr abi.PingResult
	if err := c.Call(ctx(t), abi.MethodKernelPing, nil, &pr); err != nil {
		t.Fatal(err)
	}
	if time.Since(pr.Time) > time.Minute || pr.Time.IsZero() {
		t.Fatalf("ping time %v is not now", pr.Time)
	}
	var in abi.IntrospectResult
	if err := c.Call(ctx(t), abi.MethodKernelIntrospect, nil, &in); err != nil {
		t.Fatal(err)
	}
	if in.ABIVersion != abi.Version {
		t.Fatalf("abi version %d, want %d", in.ABIVersion, abi.Version)
	}
	for _, m := range []string{abi.MethodKernelPing, abi.MethodKernelIntrospect, abi.MethodSystemMetrics, abi.MethodEventsPublish, abi.MethodEventsSubscribe, abi.MethodEventsReplay} {
		if !contains(in.Methods, m) {
			t.Errorf("introspect lacks %s: %v", m, in.Methods)
		}
	}
	if _, err := c.Publish(ctx(t), abi.Event{Type: "test.one"}); err != nil {
		t.Fatal(err)
	}
	var m abi.Metrics
	if err := c.Call(ctx(t), abi.MethodSystemMetrics, nil, &m); err != nil {
		t.Fatal(err)
	}
	if m.Connections != 1 || m.LastSeq != 1 || m.Published != 1 || m.Store != "memory" || m.Requests < 3 {
		t.Fatalf("metrics = %+v", m)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func TestPublishSubscribeReplay(t *testing.T) {
	e := start(t, ipc.Config{})
	pub, sub := e.dial(t), e.dial(t)
	data, _ := msgpack.Marshal(map[string]any{"n": 1})
	first, err := pub.Publish(ctx(t), abi.Event{ID: "first", Type: "app.first", Data: data, CorrelationID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if first.Seq != 1 || first.ID != fmt.Sprintf("operator/%d:first", os.Getuid()) || first.Duplicate {
		t.Fatalf("publish = %+v", first)
	}
	// Again with the id it chose, or the one it was answered: a duplicate.
	for _, id := range []string{"first", first.ID} {
		again, err := pub.Publish(ctx(t), abi.Event{ID: id, Type: "app.first"})
		if err != nil || !again.Duplicate || again.Seq != 1 || again.ID != first.ID {
			t.Fatalf("republish %s = %+v, %v; want duplicate of seq 1", id, again, err)
		}
	}

	live, err := sub.Subscribe(ctx(t), "app.>", 0)
	if err != nil {
		t.Fatal(err)
	}
	fromStart, err := sub.Subscribe(ctx(t), "app.*", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"other.skip", "app.second", "app.third.deep"} {
		if _, err := pub.Publish(ctx(t), abi.Event{Type: typ}); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(s *client.Subscription, want ...string) {
		t.Helper()
		for _, w := range want {
			ev, err := s.Next(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != w {
				t.Fatalf("got %s (seq %d), want %s", ev.Type, ev.Seq, w)
			}
		}
	}
	expect(live, "app.second", "app.third.deep")
	expect(fromStart, "app.first", "app.second")
	if err := live.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}

	var got []string
	res, err := pub.Replay(ctx(t), abi.ReplayParams{Pattern: "app.>", FromSeq: 1}, func(ev *abi.Event) error {
		got = append(got, ev.Type)
		if ev.Type == "app.first" && (ev.CorrelationID != "c1" || string(ev.Data) != string(data)) {
			t.Errorf("replayed first event = %+v", ev)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "app.first,app.second,app.third.deep" || res.Count != 3 || res.LastSeq != 4 {
		t.Fatalf("replay = %v, %+v", got, res)
	}
}

// rawConn speaks frames by hand, to send what a well-behaved client never would.
type rawConn struct {
	t *testing.T
	c net.Conn
}

func (e *env) raw(t *testing.T) *rawConn {
	c, err := net.Dial("unix", e.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t, c}
}

func (r *rawConn) frame(typ abi.PacketType, payload []byte) {
	hdr := make([]byte, abi.HeaderSize)
	abi.PutHeader(hdr, abi.Header{Type: typ, Length: uint32(len(payload))})
	if _, err := r.c.Write(append(hdr, payload...)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawConn) request(id uint64, method string, params any) {
	var raw msgpack.RawMessage
	if params != nil {
		raw, _ = msgpack.Marshal(params)
	}
	p, _ := msgpack.Marshal(&abi.Request{ID: id, Method: method, Params: raw})
	r.frame(abi.PacketRequest, p)
}

// response reads frames until a RESPONSE. A minute: decoding a large
// frame under the race detector on a loaded machine takes seconds.
func (r *rawConn) response() *abi.Response {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(time.Minute))
	for {
		hdr := make([]byte, abi.HeaderSize)
		if _, err := io.ReadFull(r.c, hdr); err != nil {
			r.t.Fatalf("read response header: %v", err)
		}
		n := binary.BigEndian.Uint32(hdr[4:])
		p := make([]byte, n)
		if _, err := io.ReadFull(r.c, p); err != nil {
			r.t.Fatal(err)
		}
		if abi.PacketType(hdr[3]) != abi.PacketResponse {
			continue
		}
		var resp abi.Response
		if err := msgpack.Unmarshal(p, &resp); err != nil {
			r.t.Fatal(err)
		}
		return &resp
	}
}

func (r *rawConn) expectClosed() {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := r.c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		r.t.Fatalf("connection still open (read: %v), want it closed", err)
	}
}

func TestBadInput(t *testing.T) {
	e := start(t, ipc.Config{MaxFrame: 1 << 10})
	bystander := e.dial(t)

	wantErr := func(resp *abi.Response, id uint64, code, fragment string) {
		t.Helper()
		if resp.ID != id || resp.Error == nil || resp.Error.Code != code || !strings.Contains(resp.Error.Message, fragment) {
			t.Fatalf("response = %+v (error %+v), want id %d code %s mentioning %q", resp, resp.Error, id, code, fragment)
		}
	}
	t.Run("wrong magic closes", func(t *testing.T) {
		r := e.raw(t)
		r.c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
		wantErr(r.response(), 0, abi.CodeBadFrame, "wrong magic")
		r.expectClosed()
	})
	t.Run("oversized frame closes", func(t *testing.T) {
		r := e.raw(t)
		r.frame(abi.PacketRequest, make([]byte, 2<<10))
		wantErr(r.response(), 0, abi.CodeBadFrame, "over the 1024-byte limit")
		r.expectClosed()
	})
	t.Run("unknown packet type closes", func(t *testing.T) {
		r := e.raw(t)
		r.c.Write([]byte{'K', 'R', 1, 9, 0, 0, 0, 0})
		wantErr(r.response(), 0, abi.CodeBadFrame, "unknown packet type 9")
		r.expectClosed()
	})
	t.Run("truncated frame closes", func(t *testing.T) {
		r := e.raw(t)
		r.c.Write([]byte{'K', 'R', 1, 1, 0, 0, 0, 50, 0x80})
		r.c.(*net.UnixConn).CloseWrite()
		wantErr(r.response(), 0, abi.CodeBadFrame, "inside a 50-byte payload")
	})
	t.Run("recoverable errors keep the connection", func(t *testing.T) {
		r := e.raw(t)
		r.frame(abi.PacketRequest, []byte{0xc1}) // never-used MsgPack code
		wantErr(r.response(), 0, abi.CodeBadRequest, "not valid MsgPack: invalid MsgPack code 0xc1")
		// A string claiming 800 MB in a 5-byte payload: refused before any
		// decoder allocates what it claims.
		for i := 0; i < 50; i++ {
			r.frame(abi.PacketRequest, []byte{0xdb, 0x30, 0x30, 0x30, 0x30})
			wantErr(r.response(), 0, abi.CodeBadRequest, "unexpected end of data")
		}
		r.frame(abi.PacketRequest, []byte{0x82, 0xa2, 'i', 'd', 7, 0xa6, 'm', 'e', 't', 'h', 'o', 'd', 0xc3}) // method: true
		wantErr(r.response(), 7, abi.CodeBadRequest, "not a valid MsgPack Request")
		r.request(8, "no.such.method", nil)
		wantErr(r.response(), 8, abi.CodeUnknownMethod, `"no.such.method"`)
		r.request(9, abi.MethodEventsPublish, map[string]any{"event": "not a map"})
		wantErr(r.response(), 9, abi.CodeInvalidParams, `param "event": event: want a map`)
		r.request(10, abi.MethodEventsPublish, map[string]any{"event": map[string]any{"type": "bad..subject"}})
		wantErr(r.response(), 10, abi.CodeInvalidParams, "empty token")
		r.request(11, abi.MethodEventsReplay, map[string]any{"fromSeq": "one"})
		wantErr(r.response(), 11, abi.CodeInvalidParams, `param "fromSeq"`)
		r.frame(abi.PacketEvent, []byte{0x80})
		wantErr(r.response(), 0, abi.CodeBadRequest, "REQUEST packets only")
		r.request(12, abi.MethodKernelPing, nil)
		if resp := r.response(); resp.ID != 12 || resp.Error != nil {
			t.Fatalf("ping after errors = %+v", resp)
		}
	})
	if _, err := bystander.Ping(ctx(t)); err != nil {
		t.Fatalf("another client was affected: %v", err)
	}
	var m abi.Metrics
	if err := bystander.Call(ctx(t), abi.MethodSystemMetrics, nil, &m); err != nil || m.BadFrames != 4 {
		t.Fatalf("badFrames = %d (%v), want 4", m.BadFrames, err)
	}
}

// A subscriber that never reads costs the kernel a bounded amount: its
// subscriptions drop their buffers and fall back to the store, publishers
// are not held up, other clients are served, and all it held is freed when
// it hangs up. It opens at most 64 subscriptions.
func TestStuckSubscriber(t *testing.T) {
	e := start(t, ipc.Config{})
	base := heapInuse()
	r := e.raw(t)
	const subs = 64
	for i := uint64(1); i <= subs; i++ {
		r.request(i, abi.MethodEventsSubscribe, abi.SubscribeParams{Pattern: "load.>"})
		if resp := r.response(); resp.Error != nil {
			t.Fatal(resp.Error)
		}
	}
	// One more is refused: a connection holds at most 64.
	r.request(subs+1, abi.MethodEventsSubscribe, abi.SubscribeParams{Pattern: "load.>"})
	if resp := r.response(); resp.Error == nil || resp.Error.Code != abi.CodeUnavailable || !strings.Contains(resp.Error.Message, "64 are open") {
		t.Fatalf("subscription %d: %+v, want it refused", subs+1, resp.Error)
	}
	// r never reads again. The control reads everything.
	pub := e.dial(t)
	reader, err := e.dial(t).Subscribe(ctx(t), "load.>", 0)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := msgpack.Marshal(make([]byte, 1024))
	// 10 MiB of events: each stuck subscription alone is offered more
	// than the connection's 8 MiB, so the bound is reached, 64 times over
	// together, as with the 20,000 of before (half the CPU under -race).
	const n = 10000
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n/4; i++ {
				if _, err := pub.Publish(ctx(t), abi.Event{Type: "load.data", Data: payload}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, err := e.dial(t).Ping(ctx(t)); err != nil {
		t.Fatal(err)
	}
	// Each stuck subscription lags (it holds nothing and will catch up
	// from the store) or, when not even a page could be held for it, was
	// ended with an error; only the reader may be neither.
	if st := e.k.Bus.Stats(); st.Published != n || st.ClientBytes > 8<<20 || st.Lagging < st.Subscriptions-1 {
		t.Fatalf("stats %+v: want every event published, the stuck subscriptions lagging or ended and at most the connection's 8 MiB held", st)
	}
	for i := 1; i <= n; i++ {
		if ev, err := reader.Next(ctx(t)); err != nil || ev.Seq != uint64(i) {
			t.Fatalf("the reading client's event %d: %+v, %v", i, ev, err)
		}
	}
	stuck := heapInuse()
	t.Logf("heap: %d MiB at start, %d MiB with the stuck client", base>>20, stuck>>20)
	// Hanging up frees all it held.
	r.c.Close()
	eventually(t, "the closed connection's subscriptions end", func() bool {
		st := e.k.Bus.Stats()
		return st.Subscriptions == 1 && st.ClientBytes == 0
	})
	eventually(t, "the closed connection leaves the metrics", func() bool { return metrics(t, pub).Connections == 3 })
	// What the store keeps stays; what the client held goes.
	after := heapInuse()
	t.Logf("heap: %d MiB after it left", after>>20)
	if held := int64(stuck) - int64(after); held > 16<<20 {
		t.Fatalf("the stuck client held %d MiB of heap; want its bounded share only", held>>20)
	}
}

// heapInuse is the live heap after a collection.
func heapInuse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

func metrics(t *testing.T, c *client.Client) abi.Metrics {
	t.Helper()
	var m abi.Metrics
	if err := c.Call(ctx(t), abi.MethodSystemMetrics, nil, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// eventually polls cond until it holds, failing the test after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestSocketTakeover(t *testing.T) {
	e := start(t, ipc.Config{})
	if _, err := ipc.Listen(e.k, ipc.Config{Path: e.path}); err == nil || !strings.Contains(err.Error(), "already listening") {
		t.Fatalf("second Listen on a live socket: %v", err)
	}
	// A stale socket file (no listener) is replaced.
	stale := filepath.Join(filepath.Dir(e.path), "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	srv, err := ipc.Listen(e.k, ipc.Config{Path: stale})
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	srv.Close()
}

// Only a socket is removed at the socket path: a regular file or a folder
// named there by mistake is refused and left as it was (the control, a
// stale socket replaced, is TestSocketTakeover).
func TestSocketPathNotASocket(t *testing.T) {
	e := start(t, ipc.Config{})
	dir := filepath.Dir(e.path)
	file := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(file, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	folder := filepath.Join(dir, "empty")
	if err := os.Mkdir(folder, 0o700); err != nil {
		t.Fatal(err)
	}
	for path, kind := range map[string]string{file: "a regular file", folder: "a folder"} {
		_, err := ipc.Listen(e.k, ipc.Config{Path: path})
		if err == nil || !strings.Contains(err.Error(), "is not a socket (it is "+kind+")") || !strings.Contains(err.Error(), "KAIRO_SOCKET") {
			t.Fatalf("Listen on %s: %v", kind, err)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "mine" {
		t.Fatalf("the file was touched: %q %v", b, err)
	}
	if fi, err := os.Stat(folder); err != nil || !fi.IsDir() {
		t.Fatalf("the folder was touched: %v", err)
	}
}

func TestClientClosedErrors(t *testing.T) {
	e := start(t, ipc.Config{})
	c := e.dial(t)
	sub, err := c.Subscribe(ctx(t), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	e.srv.Close()
	if _, err := sub.Next(ctx(t)); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Next after server close: %v", err)
	}
	if _, err := c.Ping(ctx(t)); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Ping after server close: %v", err)
	}
}

// A subscription the bus ends (here: its start was evicted from a small
// ring) reaches the client as an error, not as silence.
func TestSubscriptionEndedByKernel(t *testing.T) {
	dir, err := os.MkdirTemp("", "kairo-ipc-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	b := bus.New(bus.NewMemoryStore(8), bus.Config{})
	defer b.Close()
	srv, err := ipc.Listen(kernel.New(b, kernel.Config{}), ipc.Config{Path: filepath.Join(dir, "k.sock")})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	defer srv.Close()
	c, err := client.Dial(ctx(t), srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 20; i++ {
		if _, err := c.Publish(ctx(t), abi.Event{Type: "ring.fill"}); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := c.Subscribe(ctx(t), "ring.>", 1)
	if err == nil {
		_, err = sub.Next(ctx(t))
	}
	if err == nil || !strings.Contains(err.Error(), "evicted") {
		t.Fatalf("subscribing from an evicted seq: %v, want an error naming the eviction", err)
	}
	// The control: from a seq still in the ring, the events come.
	live, err := c.Subscribe(ctx(t), "ring.>", 15)
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := live.Next(ctx(t)); err != nil || ev.Seq != 15 {
		t.Fatalf("from seq 15: %+v, %v", ev, err)
	}
}
