package ipc_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/ipc"
	"github.com/kairo-os/kairo/sdk/client"
	"github.com/vmihailenco/msgpack/v5"
)

// output gathers the STREAM_CHUNKs a client receives.
type output struct {
	mu     sync.Mutex
	chunks []abi.StreamChunk
}

func listen(c *client.Client) *output {
	o := &output{}
	c.OnChunk(func(ch *abi.StreamChunk) {
		cp := *ch
		cp.Chunk = bytes.Clone(ch.Chunk) // lent for the call only
		o.mu.Lock()
		o.chunks = append(o.chunks, cp)
		o.mu.Unlock()
	})
	return o
}

func (o *output) text(id, stream string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var b bytes.Buffer
	for _, ch := range o.chunks {
		if ch.ProcessID == id && ch.Stream == stream {
			b.Write(ch.Chunk)
		}
	}
	return b.String()
}

func (o *output) waitFor(t *testing.T, id, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for o.text(id, "stdout") != want {
		if time.Now().After(deadline) {
			t.Fatalf("stdout of %s is %q, want %q", id, o.text(id, "stdout"), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func spawn(t *testing.T, c *client.Client, p abi.SpawnParams) abi.ProcessInfo {
	t.Helper()
	var info abi.ProcessInfo
	if err := c.Call(ctx(t), abi.MethodProcessSpawn, p, &info); err != nil {
		t.Fatal(err)
	}
	return info
}

func waitExit(t *testing.T, c *client.Client, id string) abi.ProcessInfo {
	t.Helper()
	var res abi.WaitResult
	if err := c.Call(ctx(t), abi.MethodProcessWait, abi.WaitParams{ProcessID: id}, &res); err != nil || res.TimedOut {
		t.Fatalf("wait %s: %+v, %v", id, res, err)
	}
	return res.Process
}

func TestProcessOverIPC(t *testing.T) {
	e := start(t, ipc.Config{})
	c := e.dial(t)
	out := listen(c)
	events, err := c.Subscribe(ctx(t), "kairo.process.>", 0)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("echo: spawned, output, exited with the wait's exit code", func(t *testing.T) {
		info := spawn(t, c, abi.SpawnParams{Argv: []string{"sh", "-c", "echo hi; exit 4"}, CorrelationID: "run-echo"})
		done := waitExit(t, c, info.ID)
		out.waitFor(t, info.ID, "hi\n")
		var got []string
		for len(got) < 2 {
			ev, err := events.Next(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			var data map[string]any
			msgpack.Unmarshal(ev.Data, &data)
			if data["processId"] != info.ID {
				continue
			}
			if ev.CorrelationID != "run-echo" {
				t.Fatalf("%s lost the correlation: %+v", ev.Type, ev)
			}
			got = append(got, ev.Type)
			if ev.Type == "kairo.process.exited" && (fmt.Sprint(data["exitCode"]) != "4" || done.ExitCode == nil || *done.ExitCode != 4) {
				t.Fatalf("exited event %v, wait %+v: want exit code 4 in both", data, done)
			}
		}
		if got[0] != "kairo.process.spawned" || got[1] != "kairo.process.exited" {
			t.Fatalf("events %v", got)
		}
	})

	t.Run("yes | head -n 1000 arrives whole and in order", func(t *testing.T) {
		info := spawn(t, c, abi.SpawnParams{Argv: []string{"sh", "-c", "yes | head -n 1000"}, Mode: "line"})
		waitExit(t, c, info.ID)
		out.waitFor(t, info.ID, strings.Repeat("y\n", 1000))
		var last uint64
		out.mu.Lock()
		for _, ch := range out.chunks {
			if ch.ProcessID == info.ID {
				if ch.Seq != last+1 {
					t.Errorf("chunk seq %d after %d", ch.Seq, last)
				}
				last = ch.Seq
			}
		}
		out.mu.Unlock()
	})

	t.Run("cat echoes stdin", func(t *testing.T) {
		info := spawn(t, c, abi.SpawnParams{Argv: []string{"cat"}})
		if err := c.Call(ctx(t), abi.MethodProcessStdinWrite, abi.StdinParams{ProcessID: info.ID, Data: []byte("ping\n")}, nil); err != nil {
			t.Fatal(err)
		}
		out.waitFor(t, info.ID, "ping\n")
		if err := c.Call(ctx(t), abi.MethodProcessStdinWrite, abi.StdinParams{ProcessID: info.ID, Data: []byte("cG9uZwo="), Encoding: "base64", Close: true}, nil); err != nil {
			t.Fatal(err)
		}
		if done := waitExit(t, c, info.ID); done.ExitCode == nil || *done.ExitCode != 0 {
			t.Fatalf("cat after close: %+v", done)
		}
		out.waitFor(t, info.ID, "ping\npong\n")
	})

	t.Run("intent.cancel ends the run loop's tree", func(t *testing.T) {
		info := spawn(t, c, abi.SpawnParams{Argv: []string{"sh", "-c", "sleep 300 & sleep 300"}, CorrelationID: "run-cancel"})
		var res abi.CancelResult
		if err := c.Call(ctx(t), abi.MethodIntentCancel, abi.CancelParams{CorrelationID: "run-cancel"}, &res); err != nil {
			t.Fatal(err)
		}
		if len(res.ProcessIDs) != 1 || res.ProcessIDs[0] != info.ID {
			t.Fatalf("canceled %v", res.ProcessIDs)
		}
		var st abi.ProcessInfo
		if err := c.Call(ctx(t), abi.MethodProcessStatus, abi.ProcessRef{ProcessID: info.ID}, &st); err != nil || st.Status != abi.ProcessKilled {
			t.Fatalf("status after cancel: %+v, %v", st, err)
		}
	})

	t.Run("bad spawns name the problem", func(t *testing.T) {
		for _, tc := range []struct {
			p    abi.SpawnParams
			want string
		}{
			{abi.SpawnParams{}, "argv is empty"},
			{abi.SpawnParams{Argv: []string{"/no/such/bin"}}, "/no/such/bin"},
			{abi.SpawnParams{Argv: []string{"true"}, Cwd: "/no/such/dir"}, "/no/such/dir"},
		} {
			err := c.Call(ctx(t), abi.MethodProcessSpawn, tc.p, nil)
			if ae, ok := err.(*abi.Error); !ok || ae.Code != abi.CodeInvalidParams || !strings.Contains(ae.Message, tc.want) {
				t.Errorf("spawn %+v: %v, want invalid_params naming %q", tc.p, err, tc.want)
			}
		}
	})
}

func TestProcessOwnerOnly(t *testing.T) {
	e := start(t, ipc.Config{})
	owner, other := e.dial(t), e.dial(t)
	info := spawn(t, owner, abi.SpawnParams{Argv: []string{"sh", "-c", "read x; echo got $x; sleep 300"}})
	for _, m := range []string{abi.MethodProcessKill, abi.MethodProcessPause, abi.MethodProcessResume} {
		err := other.Call(ctx(t), m, abi.ProcessRef{ProcessID: info.ID}, nil)
		if ae, ok := err.(*abi.Error); !ok || ae.Code != abi.CodePermissionDenied || !strings.Contains(ae.Message, "permission denied") {
			t.Fatalf("%s by a non-owner: %v, want permission denied", m, err)
		}
	}
	// The same user may see it (listed, or by ID); steering is denied above.
	var list []abi.ProcessInfo
	if err := other.Call(ctx(t), abi.MethodProcessStatus, nil, &list); err != nil || len(list) != 1 || list[0].ID != info.ID {
		t.Fatalf("the same user lists %v (%v), want [%s]", list, err, info.ID)
	}
	var one abi.ProcessInfo
	if err := other.Call(ctx(t), abi.MethodProcessStatus, abi.ProcessRef{ProcessID: info.ID}, &one); err != nil || one.Status != abi.ProcessRunning {
		t.Fatalf("status by ID for the same user: %+v, %v", one, err)
	}
	// Attached, the other client sees the output and may steer.
	out := listen(other)
	if err := other.Call(ctx(t), abi.MethodProcessAttach, abi.ProcessRef{ProcessID: info.ID}, nil); err != nil {
		t.Fatal(err)
	}
	if err := other.Call(ctx(t), abi.MethodProcessStdinWrite, abi.StdinParams{ProcessID: info.ID, Data: []byte("it\n")}, nil); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, info.ID, "got it\n")
	if err := other.Call(ctx(t), abi.MethodProcessSignal, abi.SignalParams{ProcessID: info.ID, Signal: "KILL"}, nil); err != nil {
		t.Fatal(err)
	}
	if done := waitExit(t, owner, info.ID); done.Status != abi.ProcessKilled || done.Signal != "SIGKILL" {
		t.Fatalf("after the attached client's SIGKILL: %+v", done)
	}
	var bad abi.ProcessInfo
	err := owner.Call(ctx(t), abi.MethodProcessSignal, abi.SignalParams{ProcessID: info.ID, Signal: "NOPE"}, &bad)
	if ae, ok := err.(*abi.Error); !ok || !strings.Contains(ae.Message, `signal "NOPE"`) {
		t.Fatalf("bad signal name: %v", err)
	}
}

// Two hundred short processes, spawned at once over one connection, all
// report their exit.
func TestManyProcessesOverIPC(t *testing.T) {
	e := start(t, ipc.Config{})
	c := e.dial(t)
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var info abi.ProcessInfo
			if err := c.Call(ctx(t), abi.MethodProcessSpawn, abi.SpawnParams{Argv: []string{"sh", "-c", "exit " + strconv.Itoa(i%5)}}, &info); err != nil {
				errs <- err
				return
			}
			var res abi.WaitResult
			if err := c.Call(ctx(t), abi.MethodProcessWait, abi.WaitParams{ProcessID: info.ID}, &res); err != nil {
				errs <- err
				return
			}
			if res.Process.ExitCode == nil || *res.Process.ExitCode != i%5 {
				errs <- fmt.Errorf("process %d: %+v", i, res.Process)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// binaryStream checks the chunks of one stream as they arrive: seq up by
// one, labelled binary, bytes equal to want from where the stream started.
type binaryStream struct {
	mu      sync.Mutex
	want    []byte
	off     int // where the next chunk's bytes belong in want
	lastSeq uint64
	chunks  int
	err     error
}

func (s *binaryStream) take(ch *abi.StreamChunk) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.err != nil:
	case ch.Encoding != "binary":
		s.err = fmt.Errorf("chunk %d is labelled %q", ch.Seq, ch.Encoding)
	case s.lastSeq != 0 && ch.Seq != s.lastSeq+1:
		s.err = fmt.Errorf("chunk seq %d after %d", ch.Seq, s.lastSeq)
	case s.off+len(ch.Chunk) > len(s.want):
		s.err = fmt.Errorf("chunk %d runs %d bytes past the end", ch.Seq, s.off+len(ch.Chunk)-len(s.want))
	case !bytes.Equal(ch.Chunk, s.want[s.off:s.off+len(ch.Chunk)]):
		s.err = fmt.Errorf("chunk %d differs from the data at offset %d", ch.Seq, s.off)
	default:
		s.off += len(ch.Chunk)
		s.lastSeq = ch.Seq
		s.chunks++
	}
}

func (s *binaryStream) received() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.off, s.err
}

// waitFor waits until n bytes arrived in good order.
func (s *binaryStream) waitFor(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		got, err := s.received()
		if err != nil {
			t.Fatal(err)
		}
		if got == n {
			return
		}
		if got > n || time.Now().After(deadline) {
			t.Fatalf("received %d bytes, want %d", got, n)
		}
	}
}

// onStdout routes a client's stdout chunks of process *id to s. The tests'
// children wait for stdin before they write, so the ID is known before the
// first chunk.
func onStdout(c *client.Client, id *atomic.Pointer[string], s *binaryStream) {
	c.OnChunk(func(ch *abi.StreamChunk) {
		if ch.Stream != "stdout" {
			return
		}
		if p := id.Load(); p != nil && ch.ProcessID == *p {
			s.take(ch)
			return
		}
		s.mu.Lock()
		s.err = fmt.Errorf("chunk %d of %s came before its spawn returned", ch.Seq, ch.ProcessID)
		s.mu.Unlock()
	})
}

// randomFile writes size pseudo-random bytes to a file and returns its path
// and the bytes.
func randomFile(t *testing.T, size int, seed byte) (string, []byte) {
	t.Helper()
	data := make([]byte, size)
	rand.NewChaCha8([32]byte{seed}).Read(data)
	path := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// 64 MiB of binary output goes to the client by the splice path, every
// byte in order, in chunks labelled binary with seq going up by one.
func TestBinaryOutputOverIPC(t *testing.T) {
	e := start(t, ipc.Config{})
	c := e.dial(t)
	path, data := randomFile(t, 64<<20, 1)
	out := &binaryStream{want: data}
	var id atomic.Pointer[string]
	onStdout(c, &id, out)
	info := spawn(t, c, abi.SpawnParams{Argv: []string{"sh", "-c", "read go && exec cat " + path}, Encoding: "binary", MaxChunkBytes: 256 << 10})
	id.Store(&info.ID)
	if err := c.Call(ctx(t), abi.MethodProcessStdinWrite, abi.StdinParams{ProcessID: info.ID, Data: []byte("go\n")}, nil); err != nil {
		t.Fatal(err)
	}
	if done := waitExit(t, c, info.ID); done.ExitCode == nil || *done.ExitCode != 0 {
		t.Fatalf("cat: %+v", done)
	}
	out.waitFor(t, len(data))
}

// A second client that attaches midway, and leaves, sees a consistent
// stream of its own while the owner's stays whole: splicing stops while
// two clients watch and resumes after.
func TestBinaryOutputSecondClient(t *testing.T) {
	e := start(t, ipc.Config{})
	owner, other := e.dial(t), e.dial(t)
	const phase = 4 << 20
	_, data := randomFile(t, 3*phase, 2)
	mine, theirs := &binaryStream{want: data}, &binaryStream{want: data[phase : 2*phase]}
	var id atomic.Pointer[string]
	onStdout(owner, &id, mine)
	onStdout(other, &id, theirs)
	info := spawn(t, owner, abi.SpawnParams{Argv: []string{"cat"}, Encoding: "binary", MaxChunkBytes: 256 << 10})
	id.Store(&info.ID)
	write := func(b []byte) {
		t.Helper()
		if err := owner.Call(ctx(t), abi.MethodProcessStdinWrite, abi.StdinParams{ProcessID: info.ID, Data: b}, nil); err != nil {
			t.Fatal(err)
		}
	}
	write(data[:phase])
	mine.waitFor(t, phase)
	if err := other.Call(ctx(t), abi.MethodProcessAttach, abi.ProcessRef{ProcessID: info.ID}, nil); err != nil {
		t.Fatal(err)
	}
	write(data[phase : 2*phase])
	mine.waitFor(t, 2*phase)
	theirs.waitFor(t, phase)
	other.Close()
	write(data[2*phase:])
	if err := owner.Call(ctx(t), abi.MethodProcessStdinWrite, abi.StdinParams{ProcessID: info.ID, Close: true}, nil); err != nil {
		t.Fatal(err)
	}
	waitExit(t, owner, info.ID)
	mine.waitFor(t, len(data))
	if got, err := theirs.received(); got != phase || err != nil {
		t.Fatalf("the attached client received %d bytes (%v), want %d", got, err, phase)
	}
}

// A client that reads binary output slowly holds the process back, and
// still gets all of it.
func TestBinaryOutputSlowClient(t *testing.T) {
	e := start(t, ipc.Config{})
	c := e.dial(t)
	const size = 16 << 20
	out := &binaryStream{want: make([]byte, size)}
	var id atomic.Pointer[string]
	c.OnChunk(func(ch *abi.StreamChunk) {
		if p := id.Load(); p != nil && ch.ProcessID == *p && ch.Stream == "stdout" {
			time.Sleep(5 * time.Millisecond)
			out.take(ch)
		}
	})
	info := spawn(t, c, abi.SpawnParams{Argv: []string{"sh", "-c", "read go && exec head -c " + strconv.Itoa(size) + " /dev/zero"}, Encoding: "binary", MaxChunkBytes: 64 << 10})
	id.Store(&info.ID)
	if err := c.Call(ctx(t), abi.MethodProcessStdinWrite, abi.StdinParams{ProcessID: info.ID, Data: []byte("go\n")}, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	var st abi.ProcessInfo
	if err := c.Call(ctx(t), abi.MethodProcessStatus, abi.ProcessRef{ProcessID: info.ID}, &st); err != nil || st.Status != abi.ProcessRunning {
		t.Fatalf("status while the client reads slowly: %+v, %v: the output did not hold the process back", st, err)
	}
	waitExit(t, c, info.ID)
	out.waitFor(t, size)
}

// A client that hangs up in the middle of binary output costs the kernel
// nothing: the splice fails, the connection is dropped, the output is
// drained and the process finishes.
func TestBinaryOutputClientLeaves(t *testing.T) {
	e := start(t, ipc.Config{})
	c, watcher := e.dial(t), e.dial(t)
	first := make(chan struct{})
	var once sync.Once
	c.OnChunk(func(*abi.StreamChunk) { once.Do(func() { close(first) }) })
	const size = 256 << 20
	info := spawn(t, c, abi.SpawnParams{Argv: []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}, Encoding: "binary", MaxChunkBytes: 256 << 10})
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("no output in 10 s")
	}
	c.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var list []abi.ProcessInfo
		if err := watcher.Call(ctx(t), abi.MethodProcessStatus, nil, &list); err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 && list[0].ID == info.ID && list[0].Status == abi.ProcessExited {
			if list[0].ExitCode == nil || *list[0].ExitCode != 0 {
				t.Fatalf("head after its client left: %+v", list[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes 20 s after the client left: %+v", list)
		}
	}
	if _, err := watcher.Ping(ctx(t)); err != nil {
		t.Fatal(err)
	}
}
