package ipc

import (
	"bytes"
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
	"github.com/vmihailenco/msgpack/v5"
	"golang.org/x/sys/unix"
)

// socketBuffer is the send buffer asked for each connection (the system
// caps it at net.core.wmem_max).
const socketBuffer = 1 << 20

// ServerOptions configures a Server. Path is required.
type ServerOptions struct {
	Path string
	// MaxFrame bounds a request's payload; default abi.DefaultMaxFrame.
	MaxFrame uint32
	// MaxInFlight bounds the requests of one connection running at once;
	// past it the server stops reading that connection. Default 64.
	MaxInFlight int
	Logger      *slog.Logger
}

// Server serves the kernel method table on a Unix socket.
type Server struct {
	k    *kernel.Kernel
	opts ServerOptions
	ln   *net.UnixListener
	lock *os.File // held while listening
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	conns  map[*conn]struct{}
	wg     sync.WaitGroup
	closed atomic.Bool

	badFrames atomic.Int64
}

// Listen creates the socket at opts.Path with mode 0600. A stale socket file
// left by a crash is replaced; a live kernel on it is an error.
func Listen(k *kernel.Kernel, opts ServerOptions) (*Server, error) {
	if opts.Path == "" {
		return nil, errors.New("ipc: ServerOptions.Path is empty")
	}
	if opts.MaxFrame == 0 {
		opts.MaxFrame = abi.DefaultMaxFrame
	}
	if opts.MaxFrame > abi.MaxFrameCeiling {
		return nil, fmt.Errorf("ipc: MaxFrame %d is over the ABI ceiling of %d bytes", opts.MaxFrame, abi.MaxFrameCeiling)
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 64
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
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
	if _, err := os.Lstat(opts.Path); err == nil {
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
	s := &Server{k: k, opts: opts, ln: ln, lock: lock, log: opts.Logger, conns: map[*conn]struct{}{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	k.SetGauge("connections", func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns)
	})
	k.SetGauge("badFrames", func() int { return int(s.badFrames.Load()) })
	return s, nil
}

// Addr is the socket path.
func (s *Server) Addr() string { return s.opts.Path }

// Serve accepts connections until Close.
func (s *Server) Serve() error {
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
			return fmt.Errorf("accept on %s: %w", s.opts.Path, err)
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

// Close stops accepting, closes every connection and waits for their
// goroutines; it removes the socket file.
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
	s.wg.Wait()
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

// conn is one client connection and the kernel.Session it stands for.
type conn struct {
	s      *Server
	nc     *net.UnixConn
	raw    syscall.RawConn // nc's descriptor, for SpliceChunk, under wmu
	caller kernel.Caller
	ctx    context.Context
	cancel context.CancelFunc
	wmu    sync.Mutex
	head   []byte // SpliceChunk's frame head, under wmu
	reqs   sync.WaitGroup
	sem    chan struct{}
}

func (s *Server) newConn(uc *net.UnixConn) (*conn, error) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %w", cerr)
	}
	// Room for a burst of process output in the socket, so a pump rarely
	// waits for the client to be scheduled.
	uc.SetWriteBuffer(socketBuffer)
	c := &conn{
		s:      s,
		nc:     uc,
		caller: kernel.Caller{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid},
		sem:    make(chan struct{}, s.opts.MaxInFlight),
	}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	return c, nil
}

func (c *conn) Caller() kernel.Caller    { return c.caller }
func (c *conn) Context() context.Context { return c.ctx }

// PushEvents writes the events as EVENT frames in one write. It blocks while
// the peer does not read; only this connection's pushes wait.
func (c *conn) PushEvents(sub uint64, evs []abi.Event) error {
	f := getFrameBuf()
	defer putFrameBuf(f)
	for i := range evs {
		f.addEvent(sub, &evs[i])
	}
	return c.write(f)
}

// PushChunks writes STREAM_CHUNK frames in one write. The output bytes go
// from the pump's buffer to the socket by writev, without a copy. It blocks
// while the peer does not read, which is how a slow client slows the
// process it watches.
func (c *conn) PushChunks(cs []abi.StreamChunk) error {
	f := getFrameBuf()
	defer putFrameBuf(f)
	bufs := make(net.Buffers, 0, 2*len(cs))
	heads := f.b.AvailableBuffer()[:0]
	for i := range cs {
		start := len(heads)
		heads = append(heads, make([]byte, abi.HeaderSize)...)
		heads = abi.AppendStreamChunkHead(heads, &cs[i])
		abi.PutHeader(heads[start:], abi.Header{Type: abi.PacketStreamChunk, Length: uint32(len(heads) - start - abi.HeaderSize + len(cs[i].Chunk))})
		bufs = append(bufs, heads[start:len(heads):len(heads)], cs[i].Chunk)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := bufs.WriteTo(c.nc)
	return err
}

// EndStream answers request id again, with the error that ended its stream.
func (c *conn) EndStream(id uint64, err *abi.Error) error {
	return c.respond(&abi.Response{ID: id, Error: err})
}

func (c *conn) write(f *frameBuf) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.nc.Write(f.b.Bytes())
	return err
}

func (c *conn) respond(resp *abi.Response) error {
	f := getFrameBuf()
	defer putFrameBuf(f)
	f.addRaw(abi.PacketResponse, func(p []byte) []byte { return abi.AppendResponse(p, resp) })
	return c.write(f)
}

func (c *conn) serve() {
	defer c.s.wg.Done()
	defer func() {
		c.cancel()
		c.nc.Close()
		c.reqs.Wait()
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
	}()
	fr := newFrameReader(c.nc, c.s.opts.MaxFrame)
	for {
		t, p, err := fr.next()
		if err != nil {
			var fe *abi.FrameError
			if errors.As(err, &fe) {
				// The stream is out of step: say why, then hang up.
				c.s.badFrames.Add(1)
				c.s.log.Warn("bad frame; closing connection", "peer", c.caller.String(), "err", err)
				c.respond(&abi.Response{Error: abi.Errorf(abi.CodeBadFrame, "%s; closing the connection", fe.Reason)})
			}
			return
		}
		if t != abi.PacketRequest {
			c.respond(&abi.Response{Error: abi.Errorf(abi.CodeBadRequest, "clients send REQUEST packets only, got %s", t)})
			continue
		}
		// The request is decoded by hand: every length is checked against
		// the payload, and params, kept raw, get their own copy since the
		// reader reuses p.
		var req abi.Request
		if err := abi.DecodeRequest(bytes.Clone(p), &req); err != nil {
			if cerr := abi.CheckMsgpack(p); cerr != nil {
				c.respond(&abi.Response{Error: abi.Errorf(abi.CodeBadRequest, "request is not valid MsgPack: %v", cerr)})
			} else {
				c.respond(&abi.Response{ID: salvageID(p), Error: abi.Errorf(abi.CodeBadRequest, "request is not a valid MsgPack Request map {id, method, params}: %v", err)})
			}
			continue
		}
		if req.Method == "" {
			c.respond(&abi.Response{ID: req.ID, Error: abi.Errorf(abi.CodeBadRequest, "request %d has no method", req.ID)})
			continue
		}
		if c.s.k.Quick(req.Method) {
			c.reply(req)
			continue
		}
		select {
		case c.sem <- struct{}{}:
		case <-c.ctx.Done():
			return
		}
		c.reqs.Add(1)
		go c.handle(req)
	}
}

// handle runs one request. Requests run concurrently so that a long one
// (a replay, a wait) does not hold up a ping behind it.
func (c *conn) handle(req abi.Request) {
	defer c.reqs.Done()
	defer func() { <-c.sem }()
	c.reply(req)
}

func (c *conn) reply(req abi.Request) {
	call := &kernel.Call{Session: c, RequestID: req.ID, Params: req.Params}
	res, aerr := c.s.k.Invoke(c.ctx, req.Method, call)
	resp := abi.Response{ID: req.ID, Result: res}
	if aerr != nil {
		resp = abi.Response{ID: req.ID, Error: aerr}
	}
	if err := c.respond(&resp); err != nil && c.ctx.Err() == nil {
		c.s.log.Debug("write response", "peer", c.caller.String(), "err", err)
	}
}

// salvageID reads the id of a request whose other fields did not decode, so
// the error can still be matched to the call.
func salvageID(p []byte) uint64 {
	var partial struct {
		ID uint64 `msgpack:"id"`
	}
	if msgpack.Unmarshal(p, &partial) != nil {
		return 0
	}
	return partial.ID
}
