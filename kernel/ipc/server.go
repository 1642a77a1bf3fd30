package ipc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"golang.org/x/sys/unix"
)

// socketBuffer is the send buffer asked for each connection (the system
// caps it at net.core.wmem_max).
const socketBuffer = 1 << 20

// Config configures a [Server]. Path is required; zero fields take
// the defaults. Every bound is on what a client can make the kernel hold
// (docs/RATIONALE.md#what-a-connection-may-make-the-kernel-hold).
type Config struct {
	Path string
	// MaxFrame bounds a request's payload; default abi.DefaultMaxFrame.
	MaxFrame uint32
	// MaxInFlight bounds the requests of one connection running at once;
	// past it the server stops reading that connection. Default 64.
	MaxInFlight int
	// MaxBufferedBytes bounds the bytes of large requests (64 KiB and
	// over) held for all connections together: those being read, which
	// are allocated as their bytes arrive, and those whose handlers still
	// run. A request past it is read, dropped and answered "unavailable".
	// Default the larger of 64 MiB and twice MaxFrame.
	MaxBufferedBytes int64
	// MaxConnBytes bounds the bytes of large requests one connection's
	// handlers hold; past it the server stops reading that connection
	// until they finish. At least MaxFrame; default twice MaxFrame.
	MaxConnBytes int64
	// MaxSubscriptions bounds the subscriptions one connection has open.
	// Default 64.
	MaxSubscriptions int
	// MaxSubscriptionBytes bounds the bytes of events the bus holds for one
	// connection's subscriptions; a subscription that falls further behind
	// is ended with an error naming the seq to resubscribe from. All
	// connections together are bounded by the bus's MaxClientBytes.
	// Default 8 MiB.
	MaxSubscriptionBytes int64
	// CloseTimeout bounds how long Close waits for running handlers once
	// it has closed every connection; it then returns and logs what it
	// abandoned. Default 2 s.
	CloseTimeout time.Duration
	Logger       *slog.Logger
}

// fill sets the defaults and checks the options; errors name the field.
func (o *Config) fill() error {
	if o.Path == "" {
		return errors.New("ipc: Config.Path is empty")
	}
	if o.MaxFrame == 0 {
		o.MaxFrame = abi.DefaultMaxFrame
	}
	if o.MaxFrame > abi.MaxFrameCeiling {
		return fmt.Errorf("ipc: MaxFrame %d is over the ABI ceiling of %d bytes", o.MaxFrame, abi.MaxFrameCeiling)
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 64
	}
	if o.MaxBufferedBytes == 0 {
		o.MaxBufferedBytes = max(64<<20, 2*int64(o.MaxFrame))
	}
	if o.MaxBufferedBytes < int64(o.MaxFrame) {
		return fmt.Errorf("ipc: Config.MaxBufferedBytes %d is below MaxFrame %d: a frame of MaxFrame bytes could never be read", o.MaxBufferedBytes, o.MaxFrame)
	}
	if o.MaxConnBytes == 0 {
		o.MaxConnBytes = 2 * int64(o.MaxFrame)
	}
	if o.MaxConnBytes < int64(o.MaxFrame) {
		return fmt.Errorf("ipc: Config.MaxConnBytes %d is below MaxFrame %d: a frame of MaxFrame bytes could never be read", o.MaxConnBytes, o.MaxFrame)
	}
	if o.MaxSubscriptions <= 0 {
		o.MaxSubscriptions = 64
	}
	if o.MaxSubscriptionBytes <= 0 {
		o.MaxSubscriptionBytes = 8 << 20
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// readBufferSize is each connection's read buffer: requests are small, and
// large payloads are read around it.
const readBufferSize = 16 << 10

// Accept back-off while the process is out of descriptors or memory.
const (
	minAcceptDelay = 5 * time.Millisecond
	maxAcceptDelay = time.Second
)

// Server serves the kernel method table on a Unix socket.
type Server struct {
	k    *kernel.Kernel
	opts Config
	ln   *net.UnixListener
	lock *os.File // held while listening
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	conns  map[*conn]struct{}
	wg     sync.WaitGroup
	closed atomic.Bool

	badFrames    atomic.Int64
	acceptStalls atomic.Int64 // episodes of accept failing for want of descriptors or memory
	running      atomic.Int64 // requests whose handlers run, for Close's log
	frames       *frameBudget // large requests of every connection
}

// describeMode names what kind of file a mode is, for an error.
func describeMode(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m.IsRegular():
		return "a regular file"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "not a socket"
}

// Listen creates the socket at opts.Path with mode 0600. A stale socket file
// left by a crash is replaced; a live kernel on it is an error.
func Listen(k *kernel.Kernel, opts Config) (*Server, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(opts.Path), 0o700); err != nil {
		return nil, fmt.Errorf("create socket folder: %w", err)
	}
	// A lock beside the socket makes probing, removing a stale socket and
	// binding one step, even for two kernels that share a socket path.
	lock, err := lockFile(opts.Path + ".lock")
	if err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(opts.Path); err == nil {
		// Only a socket is ever removed: a file or folder at the path is
		// someone's data, named there by mistake.
		if fi.Mode().Type() != os.ModeSocket {
			lock.Close()
			return nil, fmt.Errorf("%s exists and is not a socket (it is %s); Kairo removes only a stale socket of its own there: move it away, or set KAIRO_SOCKET or kernel.socket in kairo.toml to another path", opts.Path, describeMode(fi.Mode()))
		}
		if c, err := net.DialTimeout("unix", opts.Path, time.Second); err == nil {
			c.Close()
			lock.Close()
			return nil, fmt.Errorf("a kernel is already listening on %s; stop it first or choose another KAIRO_HOME", opts.Path)
		}
		if err := os.Remove(opts.Path); err != nil {
			lock.Close()
			return nil, fmt.Errorf("remove stale socket %s: %w", opts.Path, err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: opts.Path, Net: "unix"})
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("listen on %s: %w", opts.Path, err)
	}
	// The folder is 0700 as well, so nobody else can reach the socket in
	// the moment between bind and chmod.
	if err := os.Chmod(opts.Path, 0o600); err != nil {
		ln.Close()
		lock.Close()
		return nil, fmt.Errorf("chmod socket %s: %w", opts.Path, err)
	}
	s := &Server{k: k, opts: opts, ln: ln, lock: lock, log: opts.Logger, conns: map[*conn]struct{}{}, frames: &frameBudget{max: opts.MaxBufferedBytes}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	k.SetGauge("connections", func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns)
	})
	k.SetGauge("badFrames", func() int { return int(s.badFrames.Load()) })
	k.SetGauge("acceptStalls", func() int { return int(s.acceptStalls.Load()) })
	k.SetGauge("requestBytes", func() int { return int(s.frames.used.Load()) })
	return s, nil
}

// Addr is the socket path.
func (s *Server) Addr() string { return s.opts.Path }

// Serve accepts connections until Close. When the process runs out of
// descriptors or memory it backs off and keeps serving: the connections it
// has go on, and new ones are accepted once descriptors free up.
func (s *Server) Serve() error {
	var delay time.Duration // non-zero while accept is starved
	for {
		uc, err := s.ln.AcceptUnix()
		if err != nil {
			if s.closed.Load() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if !starved(err) {
				return fmt.Errorf("accept on %s: %w", s.opts.Path, err)
			}
			if delay == 0 { // once an episode, not once an accept
				s.acceptStalls.Add(1)
				s.log.Warn("cannot accept connections; backing off until resources free up", "socket", s.opts.Path, "err", err)
				delay = minAcceptDelay
			} else {
				delay = min(2*delay, maxAcceptDelay)
			}
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-s.ctx.Done():
				t.Stop()
				return nil
			}
			continue
		}
		if delay != 0 {
			s.log.Info("accepting connections again", "socket", s.opts.Path)
			delay = 0
		}
		c, err := s.newConn(uc)
		if err != nil {
			s.log.Warn("refused connection", "err", err)
			uc.Close()
			continue
		}
		s.mu.Lock()
		if s.closed.Load() {
			s.mu.Unlock()
			uc.Close()
			return nil
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// starved reports whether accept failed for want of descriptors or memory,
// which other connections closing or processes ending will give back.
func starved(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Close stops accepting, closes every connection, ends their contexts and
// waits for their handlers at most CloseTimeout: a stop never waits on a
// client. It removes the socket file and releases the lock beside it.
func (s *Server) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	err := s.ln.Close() // also unlinks the socket file
	s.cancel()
	s.mu.Lock()
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { // ends when the last handler does, abandoned or not
		s.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(s.opts.CloseTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.log.Warn("closed the socket server without waiting for every handler", "waited", s.opts.CloseTimeout, "abandonedRequests", s.running.Load())
	}
	s.lock.Close() // releases the flock
	return err
}

// lockFile takes an exclusive flock on path; it fails at once when another
// kernel holds it.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("socket lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, fmt.Errorf("a kernel is already listening on %s (it holds %s); stop it first or choose another KAIRO_HOME", path[:len(path)-len(".lock")], path)
		}
		return nil, fmt.Errorf("socket lock %s: %w", path, err)
	}
	return f, nil
}
