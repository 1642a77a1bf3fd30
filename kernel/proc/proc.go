// Package proc runs native binaries as process sessions: full-duplex stdio
// (pipes or a PTY), output streamed to sinks with backpressure and a rate
// limit, the whole process tree signalled as one, and every spawn, exit and
// cancel published on the bus with the correlation of the intent that
// started it. Output itself never goes on the bus.
//
// A [Manager] owns the sessions; each [Spec] becomes a command through the
// [Launcher]: [Sandboxed] confines the binary, [Exec] runs it as it is.
package proc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/pipes"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/secrets"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sandbox"
	"github.com/vmihailenco/msgpack/v5"
	"golang.org/x/sys/unix"
)

// Stream modes.
const (
	ModeChunk = "chunk" // output as it is read, up to MaxChunkBytes a chunk
	ModeLine  = "line"  // chunks end at a line boundary (an overlong line is split)
)

// Output encodings.
const (
	EncodingAuto   = "auto"
	EncodingBinary = "binary"
)

// DefaultMaxChunkBytes bounds a chunk, and so the kernel's buffer per stream.
const DefaultMaxChunkBytes = 16 << 10

// MaxChunkBytesLimit bounds what a spawn may ask for as MaxChunkBytes.
const MaxChunkBytesLimit = 1 << 20

// pipeSize is the capacity asked for the output pipes (the kernel may give
// less to an unprivileged user).
const pipeSize = 256 << 10

// Spec says what to run.
type Spec struct {
	Argv []string
	Cwd  string
	Env  []string // nil: the kernel's environment
	// PTY runs the process on a fresh pseudo-terminal (stdout carries its
	// output, stderr is merged into it) with the given size.
	PTY        bool
	Cols, Rows uint16

	Mode              string // ModeChunk (default) or ModeLine
	MaxChunkBytes     int    // default DefaultMaxChunkBytes
	MaxBytesPerSecond int64  // per stream; 0 is unlimited
	// Encoding is EncodingAuto (default: chunks labelled "utf8" or
	// "binary" by their bytes) or EncodingBinary (every chunk "binary",
	// unexamined, which lets output go from pipe to socket uncopied).
	Encoding string

	CorrelationID, CausationID string

	// Policy builds the sandbox policy once the launcher has made the
	// workspace and temp folder; nil is the default profile. Only a
	// sandboxing launcher uses it.
	Policy func(work, tmp string) (*sandbox.Policy, error)
	// Hosts are [net] hosts entries ("api.github.com:443", "*.pypi.org")
	// added to the default profile when Policy is nil: the hosts a command
	// reaches through its tree's egress proxy. None: no network. A Policy
	// lists its own.
	Hosts []string
	// Secrets are what the kernel resolved of the secrets the spawn's
	// manifest names: given to this spawn alone. nil: none.
	Secrets *Secrets
	// Mask, when set, masks the spawn's output before anyone sees it: the
	// output of a tree that holds secrets (kernel/secrets).
	Mask *secrets.Masker
	// WallLimit ends the process tree after this long (0: no limit).
	WallLimit time.Duration
	// OutputLimit drops output beyond this many bytes, all streams
	// together (0: no limit).
	OutputLimit int64
	// Skill names the binary skill the spec runs, if it runs one: the
	// principal its kernel connection (IPC) speaks as.
	Skill string
	// Approval names the approval whose grants the spawn holds besides its
	// manifest's, for the spawned event.
	Approval string
	// IPC, when set, gives the process a connection to the kernel with
	// these scopes only (a sandboxing launcher with ServeIPC).
	IPC *manifests.IPCGrants
	// Progress rules: each line of output that matches one publishes
	// kairo.process.progress with the rule's named groups.
	Progress []*regexp.Regexp
	// Parent, when set, makes the spawn a member of the parent's tree:
	// the same uid, a cgroup inside the tree's (counted in its limits),
	// killed when the tree's root ends, and the parent's CorrelationID
	// and CausationID when the spec's are empty.
	Parent *Session
	// KeepWorkspace keeps the workspace the launcher makes after the
	// process ends; by default it is removed.
	KeepWorkspace bool

	tree *Tree // set by Spawn: the new tree, or Parent's
}

func (s *Spec) check() error {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return errors.New("argv is empty: give the program and its arguments, e.g. [\"echo\", \"hi\"]")
	}
	if s.Cwd != "" {
		fi, err := os.Stat(s.Cwd)
		if err != nil {
			return fmt.Errorf("cwd %q: %w", s.Cwd, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("cwd %q is not a directory", s.Cwd)
		}
	}
	switch s.Mode {
	case "":
		s.Mode = ModeChunk
	case ModeChunk, ModeLine:
	default:
		return fmt.Errorf("stream mode %q: want %q or %q", s.Mode, ModeChunk, ModeLine)
	}
	switch s.Encoding {
	case "":
		s.Encoding = EncodingAuto
	case EncodingAuto, EncodingBinary:
	default:
		return fmt.Errorf("encoding %q: want %q or %q", s.Encoding, EncodingAuto, EncodingBinary)
	}
	if s.MaxChunkBytes <= 0 {
		s.MaxChunkBytes = DefaultMaxChunkBytes
	}
	if s.MaxChunkBytes > MaxChunkBytesLimit {
		return fmt.Errorf("maxChunkBytes %d is over the limit of %d: the kernel holds several chunks per stream", s.MaxChunkBytes, MaxChunkBytesLimit)
	}
	if s.MaxBytesPerSecond < 0 {
		return fmt.Errorf("maxBytesPerSecond %d is negative; 0 means unlimited", s.MaxBytesPerSecond)
	}
	return nil
}

// Config configures a [Manager].
type Config struct {
	Launcher Launcher // default Exec
	Logger   *slog.Logger
	// ExitGrace is how long the exited event waits for the output of a
	// process whose descendants still hold its pipes: output read within
	// it extends it, up to maxExitWait in all, so output the process
	// wrote before it exited comes before its exit however slowly the
	// pumps drain it. Default 200 ms.
	ExitGrace time.Duration
	// KillGrace is how long a cancel waits after SIGTERM before SIGKILL.
	// Default 2 s.
	KillGrace time.Duration
	// Host, when set, ends every process id: "p12@HOST", so that the ids
	// of hosts sharing one store never meet (see IDHost).
	Host string
}

// Manager owns the process sessions of a kernel.
type Manager struct {
	bus  *bus.Bus
	opts Config

	mu       sync.Mutex
	sessions map[string]*Session
	byPID    map[int]*Session // the sessions by their leader's pid
	ended    []*Session       // the ended sessions kept, oldest first
	closed   bool
	nextID   atomic.Uint64
	wg       sync.WaitGroup

	treesMu sync.Mutex
	byUID   map[int]*Tree // the trees by their sandbox uid (TreeOfUID)
}

// NewManager returns a manager publishing to b.
func NewManager(b *bus.Bus, opts Config) *Manager {
	if opts.Launcher == nil {
		opts.Launcher = Exec{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ExitGrace <= 0 {
		opts.ExitGrace = 200 * time.Millisecond
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = 2 * time.Second
	}
	m := &Manager{bus: b, opts: opts, sessions: map[string]*Session{}, byPID: map[int]*Session{}}
	// A process's id is never one the log already has for another: each
	// spawn stores at least one event, so the ids of the daemons before
	// are all at most the log's last sequence number.
	m.nextID.Store(b.LastSeq())
	return m
}

// newID is the next process id: "pN", or "pN@HOST" with Config.Host.
func (m *Manager) newID() string {
	id := "p" + strconv.FormatUint(m.nextID.Add(1), 10)
	if m.opts.Host != "" {
		id += "@" + m.opts.Host
	}
	return id
}

// IDHost is the host of a process id "pN@HOST", and whether id has that
// form; an id "pN" names no host.
func IDHost(id string) (string, bool) {
	n, host, ok := strings.Cut(id, "@")
	if !ok || host == "" || len(n) < 2 || n[0] != 'p' {
		return "", false
	}
	if _, err := strconv.ParseUint(n[1:], 10, 64); err != nil {
		return "", false
	}
	return host, true
}

// maxEnded is how many ended sessions the manager keeps for Get and List;
// the oldest ended is forgotten first (its events stay in the log). A
// variable for the tests.
var maxEnded = 1024

// retire keeps s, which ended, among the last maxEnded ended sessions.
func (m *Manager) retire(s *Session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ended = append(m.ended, s)
	for len(m.ended) > maxEnded {
		old := m.ended[0]
		m.ended[0] = nil
		m.ended = m.ended[1:]
		if m.sessions[old.id] == old {
			delete(m.sessions, old.id)
		}
		if m.byPID[old.info.PID] == old {
			delete(m.byPID, old.info.PID)
		}
	}
}

func (m *Manager) log(format string, args ...any) { m.opts.Logger.Warn(fmt.Sprintf(format, args...)) }

// Session is one spawned process and its stdio.
type Session struct {
	m     *Manager
	id    string
	spec  Spec
	cmd   *exec.Cmd
	l     *Launch
	pgid  int
	owner any // who spawned it; opaque to the manager
	stdin *os.File
	tree  *Tree
	tail  tail // its last lines

	// reason is why the kernel ended the tree, when it did (a workspace
	// over its cap), for the exited event.
	reason atomic.Pointer[string]

	output  atomic.Int64  // bytes of output seen, for the output limit
	moved   atomic.Uint64 // the pumps' reads and splices, for the exit's grace
	handing atomic.Int32  // pumps handing on what they read, for the same
	pumps   atomic.Int32  // pumps still running; the last closes drained
	drained chan struct{} // closed once every pump has ended
	spawned *bus.Ack      // of kairo.process.spawned

	mu    sync.Mutex
	info  abi.ProcessInfo
	sinks []Sink

	done chan struct{} // closed once exited and its output delivered
}

// Spawn starts spec's process. sinks receive its output from the first
// byte; owner is kept for permission checks by the caller.
func (m *Manager) Spawn(spec Spec, owner any, sinks ...Sink) (*Session, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, errors.New("the kernel is shutting down")
	}
	tree := newTree()
	if p := spec.Parent; p != nil {
		tree = p.tree
		if spec.CorrelationID == "" {
			spec.CorrelationID = p.spec.CorrelationID
		}
		if spec.CausationID == "" {
			spec.CausationID = p.spec.CausationID
		}
	}
	spec.tree = tree
	s := &Session{
		m:       m,
		id:      m.newID(),
		spec:    spec,
		owner:   owner,
		sinks:   sinks,
		tree:    tree,
		done:    make(chan struct{}),
		drained: make(chan struct{}),
	}
	if err := tree.join(s); err != nil {
		return nil, fmt.Errorf("spawn %q: %w", spec.Argv[0], err)
	}
	l, err := m.opts.Launcher.Launch(&spec)
	if err != nil {
		s.leaveFailed()
		return nil, err
	}
	root := tree.Root() == s
	if root {
		// Findable by its uid before it runs: the sandbox may refuse it
		// something, and audit report it, before Spawn returns.
		m.trackUID(tree)
	}
	cmd := l.Cmd
	s.cmd, s.l = cmd, l
	var outs []*pump
	leaders.mu.Lock() // the orphan reaper must not take the leader's exit
	if spec.PTY {
		outs, err = s.startPTY()
	} else {
		outs, err = s.startPipes()
	}
	if err == nil {
		leaders.pids[cmd.Process.Pid] = true
	}
	leaders.mu.Unlock()
	if l.Started != nil {
		if serr := l.Started(); serr != nil && err == nil {
			// The process began but never ran its program.
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
			forgetLeader(cmd.Process.Pid)
			for _, p := range outs {
				p.r.Close()
			}
			if s.stdin != nil {
				s.stdin.Close()
			}
			err = serr
		}
	}
	if err != nil {
		if l.Cleanup != nil {
			l.Cleanup()
		}
		if root {
			m.untrackUID(tree)
		}
		s.leaveFailed()
		return nil, fmt.Errorf("spawn %q: %w", spec.Argv[0], err)
	}
	s.pgid = cmd.Process.Pid
	cwd := spec.Cwd
	if cwd == "" {
		cwd = l.Work // the workspace the launcher made
	}
	s.info = abi.ProcessInfo{
		ID: s.id, PID: cmd.Process.Pid, Argv: spec.Argv, Cwd: cwd, PTY: spec.PTY,
		StartedAt: time.Now(), Status: abi.ProcessRunning,
		CorrelationID: spec.CorrelationID, CausationID: spec.CausationID,
	}
	m.mu.Lock()
	m.sessions[s.id] = s
	m.byPID[s.info.PID] = s
	m.mu.Unlock()
	if !root {
		s.tree.joined(s) // before its reap can take it out again
	}
	// Not waited for here: the spawn's answer is not its acknowledgement,
	// and the exited event, published after it, waits for both.
	s.spawned = m.publishAsync(s, abi.SubjectProcessSpawned, abi.ProcessSpawned{
		ProcessID: s.id, PID: s.info.PID, Argv: spec.Argv, Cwd: cwd, PTY: spec.PTY, Approval: spec.Approval,
	})
	s.pumps.Store(int32(len(outs)))
	for _, p := range outs {
		go p.run()
	}
	m.wg.Add(1)
	go s.reap()
	if spec.WallLimit > 0 {
		m.wg.Add(1)
		go s.wallLimit(spec.WallLimit)
	}
	if l.started != nil {
		l.started(s)
	}
	return s, nil
}

// wallLimit ends the tree once it has run for limit.
func (s *Session) wallLimit(limit time.Duration) {
	defer s.m.wg.Done()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
		s.m.publish(s, abi.SubjectProcessCanceled, abi.ProcessCanceled{
			ProcessID: s.id, PID: s.info.PID,
			Reason: fmt.Sprintf("wall-clock limit of %s reached", limit),
		})
		s.Terminate(s.m.opts.KillGrace)
	}
}

// startPipes starts the command on three pipes of our own, so that waiting
// for the process and reading its output are independent: a descendant
// holding the pipes open cannot keep the exit from being seen.
func (s *Session) startPipes() ([]*pump, error) {
	inW, inR, err := stdioPipe("stdin", false)
	if err != nil {
		return nil, err
	}
	outR, outW, err := stdioPipe("stdout", true)
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := stdioPipe("stderr", true)
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	// A larger pipe lets a fast writer get ahead by more than the default
	// 64 KiB, so each read takes several chunks at once.
	unix.FcntlInt(outW.Fd(), unix.F_SETPIPE_SZ, pipeSize)
	unix.FcntlInt(errW.Fd(), unix.F_SETPIPE_SZ, pipeSize)
	if s.l.Handoff != nil {
		err = s.l.Handoff(inR, outW, errW, false)
	} else {
		s.cmd.Stdin, s.cmd.Stdout, s.cmd.Stderr = inR, outW, errW
		err = s.cmd.Start()
	}
	inR.Close() // the child has its copies now
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, err
	}
	s.stdin = inW
	return []*pump{{s: s, stream: "stdout", r: outR}, {s: s, stream: "stderr", r: errR}}, nil
}

// stdioPipe makes one of a child's stdio pipes, named name: the kernel's
// end in the runtime's poller (so that a Close ends a read that waits),
// the child's end blocking and outside it (see [pipes.Open]).
// parentReads says which end is the kernel's: the read end (stdout,
// stderr) or the write end (stdin).
func stdioPipe(name string, parentReads bool) (parent, child *os.File, err error) {
	r, w, err := pipes.Open(name, parentReads, !parentReads)
	if err != nil {
		return nil, nil, err
	}
	if parentReads {
		return r, w, nil
	}
	return w, r, nil
}

// startPTY starts the command on a fresh pseudo-terminal as the leader of a
// new session, never on the kernel's own terminal.
func (s *Session) startPTY() ([]*pump, error) {
	size := &pty.Winsize{Cols: s.spec.Cols, Rows: s.spec.Rows}
	if size.Cols == 0 || size.Rows == 0 {
		size.Cols, size.Rows = 80, 24
	}
	if s.l.Handoff != nil {
		// A process already running in a session of its own: it takes
		// the terminal as its controlling one.
		master, slave, err := pty.Open()
		if err != nil {
			return nil, err
		}
		pty.Setsize(master, size)
		err = s.l.Handoff(slave, slave, slave, true)
		slave.Close()
		if err != nil {
			master.Close()
			return nil, err
		}
		s.stdin = master
		return []*pump{{s: s, stream: "stdout", r: master}}, nil
	}
	attrs := s.cmd.SysProcAttr
	if attrs == nil {
		attrs = &syscall.SysProcAttr{}
	}
	attrs.Setpgid = false // Setsid makes it a group leader already
	attrs.Setsid, attrs.Setctty = true, true
	s.cmd.SysProcAttr = attrs
	f, err := pty.StartWithAttrs(s.cmd, size, attrs)
	if err != nil {
		return nil, err
	}
	s.stdin = f
	return []*pump{{s: s, stream: "stdout", r: f}}, nil
}

// reap waits for the process, then for its output (a short grace when
// descendants keep the pipes), records the exit and publishes it.
func (s *Session) reap() {
	defer s.m.wg.Done()
	err := s.cmd.Wait()
	forgetLeader(s.cmd.Process.Pid)
	s.awaitOutput(s.drained)
	s.mu.Lock()
	s.info.ExitedAt = time.Now()
	st, _ := s.cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case st.Signaled():
		s.info.Signal = signalName(st.Signal())
		s.info.Status = abi.ProcessKilled
	case err != nil && s.cmd.ProcessState == nil:
		s.info.Status = abi.ProcessExited
	default:
		code := s.cmd.ProcessState.ExitCode()
		s.info.ExitCode = &code
		s.info.Status = abi.ProcessExited
	}
	if !s.spec.PTY {
		s.stdin.Close()
	}
	info := s.info
	s.mu.Unlock()
	data := abi.ProcessExitedEvent{
		ProcessID: s.id, PID: info.PID, Status: info.Status,
		DurationMs: info.ExitedAt.Sub(info.StartedAt).Milliseconds(),
		ExitCode:   info.ExitCode, Signal: info.Signal,
	}
	data.LastLines, data.Lines = s.tail.last()
	if r := s.reason.Load(); r != nil {
		data.Reason = *r
	} else if n := s.oomKills(); n > 0 {
		data.Reason = fmt.Sprintf("the tree went over its memory limit of %d bytes: %d of its processes were OOM-killed", s.tree.memory, n)
		data.OOMKills = n
	}
	// A PTY's output ends only when every holder of the terminal is gone;
	// the leader is, so past the grace close our side and end the pump.
	if s.spec.PTY {
		s.stdin.Close()
	}
	if s.spawned != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := s.spawned.Wait(ctx); err != nil {
			s.m.publishFailed(abi.SubjectProcessSpawned, s, err)
		}
		cancel()
	}
	if s.tree.Root() == s {
		// What the tree was refused is published before it is said to
		// have ended: a consumer of the exit knows why it failed.
		s.tree.denials.end()
		s.m.untrackUID(s.tree)
	}
	s.m.publish(s, abi.SubjectProcessExited, data)
	if s.tree.Root() == s {
		s.endTree()
	}
	if s.l.Cleanup != nil {
		s.l.Cleanup() // the rest of the tree, before Wait returns
	}
	if s.tree.Root() != s {
		s.tree.leave(s)
	}
	close(s.done)
	s.m.retire(s)
}

// maxExitWait bounds how long the exited event waits for output still
// being read: a descendant that keeps writing does not hold it back
// longer.
const maxExitWait = 10 * time.Second

// awaitOutput waits until drained is closed (the pumps have read the
// pipes to their end and handed it all on), or the pumps have read nothing
// for ExitGrace and hold nothing read (descendants hold the pipes and are
// quiet), or maxExitWait has passed.
func (s *Session) awaitOutput(drained <-chan struct{}) {
	grace := s.m.opts.ExitGrace
	timer := time.NewTimer(grace)
	defer timer.Stop()
	deadline := time.Now().Add(maxExitWait)
	seen := s.moved.Load()
	for {
		select {
		case <-drained:
			return
		case <-timer.C:
			moved := s.moved.Load()
			if moved == seen && s.handing.Load() == 0 || !time.Now().Before(deadline) {
				return
			}
			seen = moved
			timer.Reset(min(grace, time.Until(deadline)))
		}
	}
}

func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name // SIGKILL, SIGSYS (a seccomp kill), SIGXCPU (the cpu limit), ...
	}
	return "signal " + strconv.Itoa(int(sig))
}

// deliver hands cs to every sink, detaching those that fail.
func (s *Session) deliver(cs []abi.StreamChunk) {
	s.mu.Lock()
	sinks := s.sinks
	s.mu.Unlock()
	for _, k := range sinks {
		if err := k.Chunks(cs); err != nil {
			s.Detach(k)
		}
	}
}

// Attach adds a sink for the output from now on.
func (s *Session) Attach(k Sink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sinks = append(s.sinks[:len(s.sinks):len(s.sinks)], k)
}

// Detach removes a sink.
func (s *Session) Detach(k Sink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.sinks {
		if x == k {
			n := make([]Sink, 0, len(s.sinks)-1)
			s.sinks = append(append(n, s.sinks[:i]...), s.sinks[i+1:]...)
			return
		}
	}
}

// LastLines is what the process wrote last, both streams in order, and
// how many lines it wrote in all ([abi.KeptLines] are kept); its exit
// event carries the same.
func (s *Session) LastLines() ([]abi.OutputLine, int) { return s.tail.last() }

// ID is the session's kernel-wide ID ("p1", "p2", ...).
func (s *Session) ID() string { return s.id }

// Owner is what Spawn was given as the owner.
func (s *Session) Owner() any { return s.owner }

// Info is the session as it stands.
func (s *Session) Info() abi.ProcessInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

// Done is closed once the process has exited and its exit is published.
func (s *Session) Done() <-chan struct{} { return s.done }

// Wait waits for the exit, or for ctx.
func (s *Session) Wait(ctx context.Context) (abi.ProcessInfo, error) {
	select {
	case <-s.done:
		return s.Info(), nil
	case <-ctx.Done():
		return s.Info(), ctx.Err()
	}
}

// WriteStdin writes b to the process's input. It blocks while the process
// does not read; WriteStdinContext gives up when a context ends.
func (s *Session) WriteStdin(b []byte) error {
	return s.WriteStdinContext(context.Background(), b)
}

// WriteStdinContext writes b to the process's input, blocking while the
// process does not read, until ctx ends: then it gives up, and the bytes
// not yet written are dropped. The caller must not write concurrently.
func (s *Session) WriteStdinContext(ctx context.Context, b []byte) error {
	select {
	case <-s.done:
		return fmt.Errorf("process %s has exited", s.id)
	default:
	}
	// A deadline in the past wakes a blocked write (pipes and the PTY
	// master are pollable); it is lifted again once the write returns.
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		s.stdin.SetWriteDeadline(time.Unix(1, 0))
	})
	n, err := s.stdin.Write(b)
	if !stop() {
		<-fired
		s.stdin.SetWriteDeadline(time.Time{})
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil:
		return fmt.Errorf("write to process %s gave up after %d of %d bytes: %w", s.id, n, len(b), context.Cause(ctx))
	case errors.Is(err, os.ErrClosed):
		return fmt.Errorf("stdin of process %s is closed", s.id)
	}
	return fmt.Errorf("write to process %s: %w", s.id, err)
}

// CloseStdin closes the process's input (end of file). On a PTY it sends
// the terminal's end-of-file character instead.
func (s *Session) CloseStdin() error {
	if s.spec.PTY {
		_, err := s.stdin.Write([]byte{4}) // ^D
		return err
	}
	if err := s.stdin.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}

// Resize sets a PTY's window size.
func (s *Session) Resize(cols, rows uint16) error {
	if !s.spec.PTY {
		return fmt.Errorf("process %s has no terminal to resize", s.id)
	}
	return pty.Setsize(s.stdin, &pty.Winsize{Cols: cols, Rows: rows})
}

// Signal sends sig to the session's processes. In a cgroup — a root's is
// its whole tree's — SIGKILL kills the cgroup, SIGSTOP freezes it and
// SIGCONT thaws it, other signals go to each of its processes; without
// one, sig goes to the session's process group.
func (s *Session) Signal(sig syscall.Signal) error {
	select {
	case <-s.done:
		return fmt.Errorf("process %s has exited", s.id)
	default:
	}
	if cg := s.l.cg; cg != nil {
		switch sig {
		case syscall.SIGKILL:
			cg.kill()
		case syscall.SIGSTOP:
			return cg.freeze(true)
		case syscall.SIGCONT:
			return cg.freeze(false)
		default:
			cg.signal(sig)
		}
		return nil
	}
	if err := syscall.Kill(-s.pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal process group %d: %w", s.pgid, err)
	}
	return nil
}

// Terminate ends the process tree: SIGTERM, then SIGKILL after grace if it
// is still there (thawed first, so a paused tree can act on SIGTERM).
func (s *Session) Terminate(grace time.Duration) {
	s.Signal(syscall.SIGCONT)
	s.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
		s.kill()
	}
}

// Get returns a session by ID.
func (m *Manager) Get(id string) (*Session, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	return s, ok
}

// List returns every running session and the last ended ones (maxEnded),
// in spawn order.
func (m *Manager) List() []abi.ProcessInfo {
	m.mu.Lock()
	all := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.mu.Unlock()
	out := make([]abi.ProcessInfo, 0, len(all))
	for _, s := range all {
		out = append(out, s.Info())
	}
	sortByStart(out)
	return out
}

// Cancel ends every running process of the run loop correlationID and
// publishes kairo.process.canceled for each; it returns their IDs once
// they have exited.
func (m *Manager) Cancel(correlationID, reason string) []string {
	m.mu.Lock()
	var hit []*Session
	for _, s := range m.sessions {
		if s.spec.CorrelationID == correlationID {
			hit = append(hit, s)
		}
	}
	m.mu.Unlock()
	var ids []string
	var wg sync.WaitGroup
	for _, s := range hit {
		select {
		case <-s.done:
			continue
		default:
		}
		ids = append(ids, s.id)
		m.publish(s, abi.SubjectProcessCanceled, abi.ProcessCanceled{ProcessID: s.id, PID: s.info.PID, Reason: reason})
		wg.Add(1)
		go func() { defer wg.Done(); s.Terminate(m.opts.KillGrace) }()
	}
	wg.Wait()
	for _, s := range hit {
		<-s.done
	}
	return ids
}

// Close kills every running process tree and waits for their exits.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	all := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		select {
		case <-s.done:
			continue
		default:
		}
		wg.Add(1)
		go func() { defer wg.Done(); s.kill() }()
	}
	wg.Wait()
	m.wg.Wait()
}

// publish puts a process event on the bus with the session's correlation.
func (m *Manager) publish(s *Session, subject string, data any) {
	ack := m.publishAsync(s, subject, data)
	if ack == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := ack.Wait(ctx); err != nil {
		m.publishFailed(subject, s, err)
	}
}

// publishFailed logs a process event the bus did not store: kept, it is
// stored once the store is back; else it is lost.
func (m *Manager) publishFailed(subject string, s *Session, err error) {
	if errors.Is(err, bus.ErrKept) {
		m.opts.Logger.Info(fmt.Sprintf("%s for %s waits for the store", subject, s.id), "err", err)
		return
	}
	m.log("publish %s for %s: %v", subject, s.id, err)
}

// publishAsync puts a process event on the bus and returns its
// acknowledgement to wait for; nil when it could not be published. The
// events of a process are facts: should the store be away when they
// happen, the bus keeps them for when it is back (bus.PublishKept).
func (m *Manager) publishAsync(s *Session, subject string, data any) *bus.Ack {
	raw, err := msgpack.Marshal(data)
	if err != nil {
		m.log("encode %s: %v", subject, err)
		return nil
	}
	ev := &abi.Event{Type: subject, Source: "kernel/proc", Data: raw,
		CorrelationID: s.spec.CorrelationID, CausationID: s.spec.CausationID}
	ack, err := m.bus.PublishKeptAsync(ev)
	if err != nil {
		m.log("publish %s for %s: %v", subject, s.id, err)
		return nil
	}
	return ack
}

// Secrets are the secrets a spawn is given ([secrets] of its manifest):
// variables of its environment and files in a folder of its temp folder,
// $KAIRO_SECRETS, readable by its tree's uid alone.
type Secrets struct {
	// Env are "NAME=value" entries, set after the policy's environment.
	Env []string
	// Files are the values to write to $KAIRO_SECRETS, by secret name.
	Files map[string][]byte
	// Children: what the spawn starts through the kernel is given them
	// too; otherwise nothing it starts is.
	Children bool
	// Uses say what was given, for the record (never a value).
	Uses []abi.SecretUse
}

// SecretsOf is what the session was given and the mask of its output:
// what its children may inherit.
func (s *Session) SecretsOf() (*Secrets, *secrets.Masker) {
	return s.spec.Secrets, s.spec.Mask
}

// EnvSecretsDir is the variable that names a spawn's secrets folder.
const EnvSecretsDir = "KAIRO_SECRETS"
