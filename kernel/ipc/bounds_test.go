package ipc_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/ipc"
	"github.com/kairo-os/kairo/sdk/client"
	"github.com/vmihailenco/msgpack/v5"
	"golang.org/x/sys/unix"
)

// envChild makes the test binary a kernel serving the socket it names, with
// a table of 48 descriptors: lowering the limit of the test process itself
// would starve the test runner.
const envChild = "KAIRO_IPC_TEST_EMFILE_SOCKET"

func TestMain(m *testing.M) {
	if path := os.Getenv(envChild); path != "" {
		os.Exit(emfileChild(path))
	}
	os.Exit(m.Run())
}

// countWarns counts the log records at warning level.
type countWarns struct {
	slog.Handler
	n *atomic.Int64
}

func (h countWarns) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.n.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func emfileChild(path string) int {
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 48, Max: 48}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b := bus.New(bus.NewMemoryStore(1024), bus.Config{})
	k := kernel.New(b, kernel.Config{})
	var warns atomic.Int64
	log := slog.New(countWarns{slog.NewTextHandler(os.Stderr, nil), &warns})
	srv, err := ipc.Listen(k, ipc.Config{Path: path, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	k.Register(kernel.Method{Name: "test.stalls", Handler: func(context.Context, *kernel.Call) (any, error) {
		return [2]int64{srv.AcceptStalls(), warns.Load()}, nil
	}})
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin) // until the parent closes it
	srv.Close()
	if err := <-served; err != nil {
		fmt.Fprintln(os.Stderr, "Serve:", err)
		return 1
	}
	return 0
}

// Row 3: a kernel whose descriptor table is full keeps serving the
// connections it has, logs the episode once, and accepts again once
// descriptors free up.
func TestAcceptSurvivesDescriptorExhaustion(t *testing.T) {
	dir, err := os.MkdirTemp("", "kairo-ipc-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "k.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+path)
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	ctl, err := client.Dial(ctx(t), path)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	stalls := func() [2]int64 {
		var s [2]int64
		if err := ctl.Call(ctx(t), "test.stalls", nil, &s); err != nil {
			t.Fatalf("the kernel stopped serving: %v", err)
		}
		return s
	}
	// The attack: more connections than the kernel has descriptors.
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for i := 0; i < 64; i++ {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		flood = append(flood, c)
	}
	eventually(t, "accept starved", func() bool { return stalls()[0] >= 1 })
	if _, err := ctl.Ping(ctx(t)); err != nil {
		t.Fatalf("a connection accepted before the flood: %v", err)
	}
	// The flood goes; a new client is served.
	for _, c := range flood {
		c.Close()
	}
	flood = nil
	late, err := client.Dial(ctx(t), path)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	if _, err := late.Ping(ctx(t)); err != nil {
		t.Fatalf("a client after the flood: %v", err)
	}
	// Each flood connection that closes frees a descriptor, so accept may
	// starve more than once; what matters is one warning an episode.
	if s := stalls(); s[0] < 1 || s[1] != s[0] {
		t.Fatalf("%d starved episodes, %d warnings; want one warning an episode (not once an accept)", s[0], s[1])
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
}

// Row 9: headers claiming 16 MiB each make the kernel hold what arrived,
// not what they claim; a real large request beside them is served.
func TestFrameHeadersCostWhatArrives(t *testing.T) {
	e := start(t, ipc.Config{})
	c := e.dial(t)
	base := heapInuse()
	const conns = 200
	for i := 0; i < conns; i++ {
		r := e.raw(t)
		hdr := make([]byte, abi.HeaderSize)
		abi.PutHeader(hdr, abi.Header{Type: abi.PacketRequest, Length: abi.DefaultMaxFrame})
		if _, err := r.c.Write(hdr); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "every header read", func() bool { return e.srv.RequestBytes() == conns*4<<10 })
	grew := int64(heapInuse()) - int64(base)
	t.Logf("%d connections claiming %d MiB each: heap +%d KiB", conns, abi.DefaultMaxFrame>>20, grew>>10)
	if grew > 50<<20 {
		t.Fatalf("heap grew by %d MiB", grew>>20)
	}
	// The control: a large request (3 MiB, under the bus's largest event)
	// is read and served.
	data, _ := msgpack.Marshal(make([]byte, 3<<20))
	if _, err := c.Publish(ctx(t), abi.Event{Type: "big.one", Data: data}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the large request's bytes given back", func() bool { return e.srv.RequestBytes() == conns*4<<10 })
}

// Past MaxBufferedBytes a large request is refused by its id, and the
// connection goes on.
func TestLargeRequestsPastTheBound(t *testing.T) {
	e := start(t, ipc.Config{MaxFrame: 1 << 20, MaxBufferedBytes: 1 << 20})
	hog := e.raw(t)
	// Half a large frame: its bytes are held while the rest is awaited.
	hdr := make([]byte, abi.HeaderSize)
	abi.PutHeader(hdr, abi.Header{Type: abi.PacketRequest, Length: 1 << 20})
	hog.c.Write(append(hdr, make([]byte, 600<<10)...))
	eventually(t, "the half frame held", func() bool { return e.srv.RequestBytes() >= 512<<10 })
	r := e.raw(t)
	r.request(5, abi.MethodEventsPublish, abi.PublishParams{Event: abi.Event{Type: "big.two", Data: msgpack.RawMessage(append([]byte{0xc6, 0, 8, 0, 0}, make([]byte, 512<<10)...))}})
	resp := r.response()
	if resp.ID != 5 || resp.Error == nil || resp.Error.Code != abi.CodeUnavailable || !strings.Contains(resp.Error.Message, "MaxBufferedBytes") {
		t.Fatalf("a request past the bound: %+v (%+v)", resp, resp.Error)
	}
	r.request(6, abi.MethodKernelPing, nil)
	if resp := r.response(); resp.ID != 6 || resp.Error != nil {
		t.Fatalf("ping after a refusal: %+v", resp)
	}
	hog.c.Close()
	eventually(t, "the hog's bytes given back", func() bool { return e.srv.RequestBytes() == 0 })
	r.request(7, abi.MethodEventsPublish, abi.PublishParams{Event: abi.Event{Type: "big.two", Data: msgpack.RawMessage(append([]byte{0xc6, 0, 8, 0, 0}, make([]byte, 512<<10)...))}})
	if resp := r.response(); resp.ID != 7 || resp.Error != nil {
		t.Fatalf("the same request once there is room: %+v (%+v)", resp, resp.Error)
	}
}

// Row 13: a write to a process that never reads holds one write, refuses
// a second at once, and is abandoned with what it held when its client
// hangs up; the dead connection leaves the metrics, and Close does not wait.
func TestStdinToAProcessThatDoesNotRead(t *testing.T) {
	e := start(t, ipc.Config{CloseTimeout: time.Minute})
	watcher := e.dial(t)
	c, err := client.Dial(ctx(t), e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sleeper := spawn(t, c, abi.SpawnParams{Argv: []string{"sleep", "60"}})
	big := make([]byte, 4<<20)
	blocked := make(chan error, 1)
	go func() {
		blocked <- c.Call(context.Background(), abi.MethodProcessStdinWrite, abi.StdinParams{ProcessID: sleeper.ID, Data: big}, nil)
	}()
	// Small writes go through until the large one is in flight; then
	// they are refused without waiting.
	eventually(t, "a second write refused", func() bool {
		err := c.Call(ctx(t), abi.MethodProcessStdinWrite, abi.StdinParams{ProcessID: sleeper.ID, Data: []byte("x")}, nil)
		var ae *abi.Error
		return errors.As(err, &ae) && ae.Code == abi.CodeUnavailable && strings.Contains(ae.Message, "stdin of "+sleeper.ID+" is full: the process is not reading")
	})
	// The control: a process that reads takes its input.
	cat := spawn(t, c, abi.SpawnParams{Argv: []string{"sh", "-c", "wc -c"}})
	out := listen(c)
	if err := c.Call(ctx(t), abi.MethodProcessStdinWrite, abi.StdinParams{ProcessID: cat.ID, Data: big, Close: true}, nil); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, cat.ID, fmt.Sprintln(len(big)))

	if n := metrics(t, watcher).Connections; n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
	c.Close()
	if err := <-blocked; err == nil {
		t.Fatal("the blocked write succeeded")
	}
	eventually(t, "the closed connection leaves the metrics", func() bool { return metrics(t, watcher).Connections == 1 })
	eventually(t, "the abandoned write's bytes given back", func() bool { return e.srv.RequestBytes() == 0 })

	// Another write blocks; Close ends it rather than wait for the child.
	c2 := e.dial(t)
	sleeper2 := spawn(t, c2, abi.SpawnParams{Argv: []string{"sleep", "60"}})
	go c2.Call(context.Background(), abi.MethodProcessStdinWrite, abi.StdinParams{ProcessID: sleeper2.ID, Data: big}, nil)
	eventually(t, "the write in flight", func() bool { return e.srv.RequestBytes() >= 4<<20 })
	closed := make(chan struct{})
	go func() { e.srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(15 * time.Second):
		t.Fatal("Close waited on a client's stdin write")
	}
}

// Close waits for a handler that ignores its context at most CloseTimeout,
// and lets go of the socket's lock so a new kernel can start.
func TestCloseDoesNotWaitOnHandlers(t *testing.T) {
	e := start(t, ipc.Config{CloseTimeout: 100 * time.Millisecond})
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	e.k.Register(kernel.Method{Name: "test.stuck", Handler: func(context.Context, *kernel.Call) (any, error) {
		close(entered)
		<-release // as a handler parked in a call that takes no context
		return nil, nil
	}})
	c := e.dial(t)
	go c.Call(context.Background(), "test.stuck", nil, nil)
	<-entered
	closed := make(chan struct{})
	go func() { e.srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited on a stuck handler")
	}
	srv, err := ipc.Listen(e.k, ipc.Config{Path: e.path})
	if err != nil {
		t.Fatalf("a new server on the same socket after Close: %v", err)
	}
	srv.Close()
}

// String bounds, over the socket: refused with the field and the bound;
// the neighbours at the bounds pass.
func TestStringBoundsOverIPC(t *testing.T) {
	e := start(t, ipc.Config{})
	r := e.raw(t)
	// Four million nils as argv: 4 MiB on the wire, refused before the
	// kernel allocates sixteen bytes for each.
	n := 4 << 20
	nils := append([]byte{0xdd, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, make([]byte, n)...)
	for i := 5; i < len(nils); i++ {
		nils[i] = 0xc0
	}
	params := append([]byte{0x81, 0xa4, 'a', 'r', 'g', 'v'}, nils...)
	p := abi.AppendRequest(nil, &abi.Request{ID: 1, Method: abi.MethodProcessSpawn, Params: params})
	before := heapInuse()
	r.frame(abi.PacketRequest, p)
	resp := r.response()
	if resp.ID != 1 || resp.Error == nil || resp.Error.Code != abi.CodeInvalidParams || !strings.Contains(resp.Error.Message, "(abi.MaxListLen)") {
		t.Fatalf("argv of 16M nils: %+v (%+v)", resp, resp.Error)
	}
	t.Logf("refusing it: heap %+d MiB", (int64(heapInuse())-int64(before))>>20)

	c := e.dial(t)
	long := strings.Repeat("i", 1<<20)
	_, err := c.Publish(ctx(t), abi.Event{Type: "app.x", ID: long})
	var ae *abi.Error
	if !errors.As(err, &ae) || ae.Code != abi.CodeInvalidParams || !strings.Contains(ae.Message, "event.id has 1048576 bytes, over its bound of 256 (abi.MaxIDLen)") {
		t.Fatalf("1 MiB event id: %v", err)
	}
	_, err = c.Publish(ctx(t), abi.Event{Type: "app.x", CorrelationID: long})
	if !errors.As(err, &ae) || !strings.Contains(ae.Message, "event.correlationId has 1048576 bytes") {
		t.Fatalf("1 MiB correlation id: %v", err)
	}
	err = c.Call(ctx(t), abi.MethodProcessStatus, abi.ProcessRef{ProcessID: long}, nil)
	if !errors.As(err, &ae) || ae.Code != abi.CodeInvalidParams || !strings.Contains(ae.Message, "processId has 1048576 bytes") {
		t.Fatalf("1 MiB process id: %v", err)
	}
	// A chosen id is stored in its publisher's scope, which the bound
	// holds too: one byte more than fits is refused, saying how long an
	// id may be.
	fits := abi.MaxIDLen - len(fmt.Sprintf("operator/%d:", os.Getuid()))
	_, err = c.Publish(ctx(t), abi.Event{Type: "app.x", ID: long[:fits+1]})
	if !errors.As(err, &ae) || ae.Code != abi.CodeInvalidParams || !strings.Contains(ae.Message, fmt.Sprintf("choose an id of at most %d bytes", fits)) {
		t.Fatalf("an id one byte over its scope's room: %v", err)
	}
	// The controls.
	if _, err := c.Publish(ctx(t), abi.Event{Type: "app.x", ID: long[:fits], CorrelationID: long[:abi.MaxIDLen]}); err != nil {
		t.Fatal(err)
	}
	info := spawn(t, c, abi.SpawnParams{Argv: []string{"true"}, CorrelationID: long[:abi.MaxIDLen]})
	waitExit(t, c, info.ID)
}
