package proc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/vmihailenco/msgpack/v5"
)

// collect is a Sink that keeps everything, per stream.
type collect struct {
	mu     sync.Mutex
	chunks []abi.StreamChunk
	slow   time.Duration
}

func (c *collect) Chunks(cs []abi.StreamChunk) error {
	if c.slow > 0 {
		time.Sleep(c.slow)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range cs {
		ch.Chunk = bytes.Clone(ch.Chunk)
		c.chunks = append(c.chunks, ch)
	}
	return nil
}

func (c *collect) text(stream string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, ch := range c.chunks {
		if ch.Stream == stream {
			b.Write(ch.Chunk)
		}
	}
	return b.String()
}

type env struct {
	t      *testing.T
	bus    *bus.Bus
	m      *Manager
	mu     sync.Mutex
	events []abi.Event
}

// testRing is the size of the memory store under a test's bus: ten times
// the 400 events the busiest test (TestManyConcurrent) publishes, so no
// subscriber can fall behind the ring. The default ring (1<<20 events,
// 160 MiB of abi.Event and seqs) cost every test its zeroing, page faults and
// the race detector's and the GC's passes over it: half of the test
// process's CPU.
const testRing = 1 << 12

func newEnv(t *testing.T, opts Config) *env {
	t.Helper()
	e := &env{t: t, bus: bus.New(bus.NewMemoryStore(testRing), bus.Config{})}
	e.m = NewManager(e.bus, opts)
	sub, err := e.bus.Subscribe(context.Background(), "kairo.process.>", bus.SubscribeConfig{}, func(evs []abi.Event) error {
		e.mu.Lock()
		e.events = append(e.events, evs...)
		e.mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.m.Close()
		if n := e.bus.LastSeq(); n > testRing/2 {
			t.Errorf("the test published %d events, near the ring of %d its subscriber reads from: raise testRing", n, testRing)
		}
		sub.Close()
		e.bus.Close()
	})
	return e
}

// event waits for an event of subject about process id.
func (e *env) event(subject, id string) (abi.Event, map[string]any) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		e.mu.Lock()
		for _, ev := range e.events {
			if ev.Type != subject {
				continue
			}
			var data map[string]any
			msgpack.Unmarshal(ev.Data, &data)
			if data["processId"] == id {
				e.mu.Unlock()
				return ev, data
			}
		}
		e.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	e.t.Fatalf("no %s event for %s", subject, id)
	return abi.Event{}, nil
}

func (e *env) spawn(spec Spec, sinks ...Sink) *Session {
	e.t.Helper()
	s, err := e.m.Spawn(spec, "owner", sinks...)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func wait(t *testing.T, s *Session) abi.ProcessInfo {
	t.Helper()
	// A minute: a busy loop's second of cpu_seconds takes many on a
	// loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := s.Wait(ctx)
	if err != nil {
		t.Fatalf("wait for %s: %v", s.ID(), err)
	}
	return info
}

func TestEchoSpawnedAndExited(t *testing.T) {
	e := newEnv(t, Config{})
	out := &collect{}
	s := e.spawn(Spec{Argv: []string{"sh", "-c", "echo hello; echo oops >&2; exit 3"}, CorrelationID: "c-1", CausationID: "e-1"}, out)
	info := wait(t, s)
	if info.Status != abi.ProcessExited || info.ExitCode == nil || *info.ExitCode != 3 {
		t.Fatalf("info = %+v, want exited with 3", info)
	}
	sp, spData := e.event("kairo.process.spawned", s.ID())
	ex, exData := e.event("kairo.process.exited", s.ID())
	if sp.CorrelationID != "c-1" || ex.CorrelationID != "c-1" || ex.CausationID != "e-1" {
		t.Fatalf("events lost the correlation: %+v / %+v", sp, ex)
	}
	if fmt.Sprint(exData["exitCode"]) != "3" || fmt.Sprint(spData["pid"]) != strconv.Itoa(info.PID) {
		t.Fatalf("spawned %v, exited %v", spData, exData)
	}
	if sp.Seq >= ex.Seq {
		t.Fatalf("spawned at seq %d, exited at %d", sp.Seq, ex.Seq)
	}
	if out.text("stdout") != "hello\n" || out.text("stderr") != "oops\n" {
		t.Fatalf("stdout %q stderr %q", out.text("stdout"), out.text("stderr"))
	}
}

func TestManyLinesInOrder(t *testing.T) {
	e := newEnv(t, Config{})
	for _, mode := range []string{ModeChunk, ModeLine} {
		out := &collect{slow: 0}
		s := e.spawn(Spec{Argv: []string{"sh", "-c", "seq 1 100000 | head -n 20000"}, Mode: mode, MaxChunkBytes: 1000}, out)
		wait(t, s)
		lines := strings.Split(strings.TrimSuffix(out.text("stdout"), "\n"), "\n")
		if len(lines) != 20000 {
			t.Fatalf("%s mode: %d lines, want 20000", mode, len(lines))
		}
		for i, l := range lines {
			if l != strconv.Itoa(i+1) {
				t.Fatalf("%s mode: line %d is %q", mode, i, l)
			}
		}
		var last uint64
		for _, ch := range out.chunks {
			if ch.Seq != last+1 || len(ch.Chunk) > 1000 {
				t.Fatalf("%s mode: chunk seq %d after %d, %d bytes", mode, ch.Seq, last, len(ch.Chunk))
			}
			last = ch.Seq
			if mode == ModeLine && !bytes.HasSuffix(ch.Chunk, []byte("\n")) {
				t.Fatalf("line mode chunk %d does not end a line: %q", ch.Seq, ch.Chunk)
			}
		}
	}
}

func TestStdinEcho(t *testing.T) {
	e := newEnv(t, Config{})
	out := &collect{}
	s := e.spawn(Spec{Argv: []string{"cat"}}, out)
	for _, w := range []string{"one\n", "two\n"} {
		if err := s.WriteStdin([]byte(w)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for out.text("stdout") != "one\ntwo\n" {
		if time.Now().After(deadline) {
			t.Fatalf("cat echoed %q", out.text("stdout"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	if info := wait(t, s); info.ExitCode == nil || *info.ExitCode != 0 {
		t.Fatalf("cat after EOF: %+v", info)
	}
	if err := s.WriteStdin([]byte("late")); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("write after exit: %v", err)
	}
}

// Cancel ends the whole tree, not just its leader.
func TestCancelKillsTree(t *testing.T) {
	e := newEnv(t, Config{KillGrace: 200 * time.Millisecond})
	out := &collect{}
	// The leader ignores SIGTERM, so the grace and SIGKILL are needed; its
	// child prints its pid so we can check it is gone too.
	s := e.spawn(Spec{Argv: []string{"sh", "-c", "trap '' TERM; sleep 300 & echo $!; wait"}, CorrelationID: "run-7"}, out)
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for child == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the child's pid never came")
		}
		child, _ = strconv.Atoi(strings.TrimSpace(out.text("stdout")))
		time.Sleep(5 * time.Millisecond)
	}
	other := e.spawn(Spec{Argv: []string{"sleep", "300"}, CorrelationID: "run-8"})
	ids := e.m.Cancel("run-7", "user asked")
	if len(ids) != 1 || ids[0] != s.ID() {
		t.Fatalf("canceled %v, want [%s]", ids, s.ID())
	}
	info := s.Info()
	if info.Status != abi.ProcessKilled || info.Signal != "SIGKILL" {
		t.Fatalf("after cancel: %+v", info)
	}
	if alive(child) {
		t.Fatalf("child %d of the canceled tree is still running", child)
	}
	ce, _ := e.event("kairo.process.canceled", s.ID())
	xe, _ := e.event("kairo.process.exited", s.ID())
	if ce.CorrelationID != "run-7" || xe.CorrelationID != "run-7" || ce.Seq >= xe.Seq {
		t.Fatalf("canceled %+v, exited %+v", ce, xe)
	}
	// The control: another run loop's process is untouched.
	if other.Info().Status != abi.ProcessRunning {
		t.Fatalf("a process of another run loop was ended: %+v", other.Info())
	}
}

func TestManyConcurrent(t *testing.T) {
	e := newEnv(t, Config{})
	const n = 200
	sessions := make([]*Session, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := e.m.Spawn(Spec{Argv: []string{"sh", "-c", "exit " + strconv.Itoa(i%7)}}, "owner")
			if err != nil {
				errs <- err
				return
			}
			sessions[i] = s
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, s := range sessions {
		if info := wait(t, s); info.ExitCode == nil || *info.ExitCode != i%7 {
			t.Fatalf("process %d: %+v, want exit %d", i, info, i%7)
		}
		e.event("kairo.process.exited", s.ID())
	}
}

func TestSpawnErrors(t *testing.T) {
	e := newEnv(t, Config{})
	file := t.TempDir() + "/f"
	os.WriteFile(file, nil, 0o600)
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{}, "argv is empty"},
		{Spec{Argv: []string{"/no/such/binary"}}, "/no/such/binary"},
		{Spec{Argv: []string{"true"}, Cwd: "/no/such/dir"}, `cwd "/no/such/dir"`},
		{Spec{Argv: []string{"true"}, Cwd: file}, "is not a directory"},
		{Spec{Argv: []string{"true"}, Mode: "words"}, `stream mode "words"`},
		{Spec{Argv: []string{"true"}, MaxChunkBytes: 1 << 30}, "over the limit"},
	} {
		if _, err := e.m.Spawn(tc.spec, "owner"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Spawn(%+v): %v, want an error naming %q", tc.spec, err, tc.want)
		}
	}
	// The control: a good spec spawns.
	wait(t, e.spawn(Spec{Argv: []string{"true"}, Cwd: t.TempDir()}))
}

func TestPTY(t *testing.T) {
	e := newEnv(t, Config{})
	out := &collect{}
	s := e.spawn(Spec{Argv: []string{"sh", "-c", "test -t 0 && test -t 1 && echo tty; stty size"}, PTY: true, Cols: 100, Rows: 30}, out)
	wait(t, s)
	got := strings.ReplaceAll(out.text("stdout"), "\r", "")
	if got != "tty\n30 100\n" {
		t.Fatalf("pty output %q, want a terminal of 30x100", got)
	}
	// The control: without a PTY the same test says no terminal.
	out2 := &collect{}
	wait(t, e.spawn(Spec{Argv: []string{"sh", "-c", "test -t 1 && echo tty || echo pipe"}}, out2))
	if out2.text("stdout") != "pipe\n" {
		t.Fatalf("without a pty: %q", out2.text("stdout"))
	}
}

func TestRateLimitTruncates(t *testing.T) {
	e := newEnv(t, Config{})
	out := &collect{}
	s := e.spawn(Spec{Argv: []string{"head", "-c", "2000000", "/dev/zero"}, MaxBytesPerSecond: 100000}, out)
	wait(t, s)
	got := len(out.text("stdout"))
	if got < 50000 || got > 400000 {
		t.Fatalf("%d bytes got through a 100 kB/s limit", got)
	}
	truncated := false
	for _, ch := range out.chunks {
		truncated = truncated || ch.Truncated
	}
	_, data := e.event("kairo.process.output.throttled", s.ID())
	dropped, _ := strconv.Atoi(fmt.Sprint(data["droppedBytes"]))
	if !truncated || dropped <= 0 || got+dropped > 2000000 {
		t.Fatalf("truncated %v, dropped %v, got %d", truncated, data["droppedBytes"], got)
	}
}

func TestSignalPauseResume(t *testing.T) {
	e := newEnv(t, Config{})
	s := e.spawn(Spec{Argv: []string{"sleep", "300"}})
	if err := s.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := s.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := s.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if info := wait(t, s); info.Status != abi.ProcessKilled || info.Signal != "SIGTERM" {
		t.Fatalf("after SIGTERM: %+v", info)
	}
	if err := s.Signal(syscall.SIGTERM); err == nil {
		t.Fatal("signalling an exited process succeeded")
	}
}

// alive reports whether pid runs: a zombie (killed, not yet reaped by the
// init process it was handed to) does not count.
func alive(pid int) bool {
	deadline := time.Now().Add(2 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		// The state follows the parenthesised command name.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
			return false
		}
		if time.Now().After(deadline) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Closing the manager (as `kairo up` does when it stops) ends every tree.
func TestCloseLeavesNoProcess(t *testing.T) {
	b := bus.New(bus.NewMemoryStore(testRing), bus.Config{})
	defer b.Close()
	m := NewManager(b, Config{})
	out := &collect{}
	s, err := m.Spawn(Spec{Argv: []string{"sh", "-c", "sleep 300 & echo $!; wait"}}, "owner", out)
	if err != nil {
		t.Fatal(err)
	}
	var child int
	for deadline := time.Now().Add(10 * time.Second); child == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the child's pid never came")
		}
		child, _ = strconv.Atoi(strings.TrimSpace(out.text("stdout")))
		time.Sleep(5 * time.Millisecond)
	}
	m.Close()
	if info := s.Info(); info.Status != abi.ProcessKilled {
		t.Fatalf("after Close: %+v", info)
	}
	if alive(child) || alive(s.Info().PID) {
		t.Fatalf("a process outlived the manager (leader %d, child %d)", s.Info().PID, child)
	}
	if _, err := m.Spawn(Spec{Argv: []string{"true"}}, "owner"); err == nil {
		t.Fatal("spawn after Close succeeded")
	}
}

// A sink that reads slowly slows the child through the pipe: the child
// cannot finish before its output has been taken, and nothing is dropped.
func TestSlowSinkSlowsChild(t *testing.T) {
	e := newEnv(t, Config{})
	out := &collect{slow: 20 * time.Millisecond}
	const size = 4 << 20 // 4 MiB: far more than the pipe and the pump's buffer hold
	s := e.spawn(Spec{Argv: []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}}, out)
	time.Sleep(300 * time.Millisecond)
	if st := s.Info().Status; st != abi.ProcessRunning {
		t.Fatalf("the child finished (%s) while its reader was slow: output was not holding it back", st)
	}
	wait(t, s)
	if got := len(out.text("stdout")); got != size {
		t.Fatalf("got %d of %d bytes", got, size)
	}
}

// The exit comes after the output the process wrote before it exited,
// however long a sink takes to take it: here each batch of chunks takes
// longer than the exit's grace (ExitGrace, 200 ms), and the last is still
// being handed on when head has exited.
func TestExitAfterSlowOutput(t *testing.T) {
	e := newEnv(t, Config{})
	out := &collect{slow: 300 * time.Millisecond}
	const size = 1 << 20
	s := e.spawn(Spec{Argv: []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}, MaxChunkBytes: 64 << 10}, out)
	if info := wait(t, s); info.ExitCode == nil || *info.ExitCode != 0 {
		t.Fatalf("head: %+v", info)
	}
	if got := len(out.text("stdout")); got != size {
		t.Fatalf("at the exit, %d of %d bytes were handed on", got, size)
	}
}

// As a subreaper the kernel reaps the orphans of its trees (PID 1 may not),
// and still reports every leader's own exit.
func TestSubreaperReapsOrphans(t *testing.T) {
	stop, err := Subreaper()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	e := newEnv(t, Config{})
	out := &collect{}
	s := e.spawn(Spec{Argv: []string{"sh", "-c", "sleep 0.2 & echo $!"}}, out)
	if info := wait(t, s); info.ExitCode == nil || *info.ExitCode != 0 {
		t.Fatalf("leader: %+v", info)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(out.text("stdout")))
	if err != nil {
		t.Fatalf("orphan pid %q: %v", out.text("stdout"), err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat("/proc/" + strconv.Itoa(orphan)); os.IsNotExist(err) {
			break // exited and reaped: not even a zombie
		}
		if time.Now().After(deadline) {
			stat, _ := os.ReadFile("/proc/" + strconv.Itoa(orphan) + "/stat")
			t.Fatalf("orphan %d was not reaped: %s", orphan, stat)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The reaper never takes a leader's exit: many short processes, each
	// with its own code, while it sweeps.
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := e.m.Spawn(Spec{Argv: []string{"sh", "-c", "sleep 0.01 & exit " + strconv.Itoa(i%9)}}, "owner")
			if err != nil {
				t.Error(err)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if info, err := s.Wait(ctx); err != nil || info.ExitCode == nil || *info.ExitCode != i%9 {
				t.Errorf("process %d: %+v (%v), want exit %d", i, info, err, i%9)
			}
		}()
	}
	wg.Wait()
}
