package ipc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/vmihailenco/msgpack/v5"
	"golang.org/x/sys/unix"
)

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

	subs *bus.Budget // what the bus may hold for this connection's subscriptions

	// held is the bytes of large requests this connection's handlers hold
	// (Config.MaxConnBytes); freed is signalled when it drops.
	held  atomic.Int64
	freed chan struct{}
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
		freed:  make(chan struct{}, 1),
		subs: s.k.Bus.NewBudget(bus.BudgetConfig{
			MaxSubscriptions: s.opts.MaxSubscriptions,
			MaxBytes:         s.opts.MaxSubscriptionBytes,
		}),
	}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	return c, nil
}

func (c *conn) Caller() kernel.Caller { return c.caller }

func (c *conn) Context() context.Context { return c.ctx }

// SubscriptionBudget bounds this connection's subscriptions together.
func (c *conn) SubscriptionBudget() *bus.Budget { return c.subs }

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
		// Gone for the clients that list connections at once; its
		// handlers, their contexts ended, finish in the background.
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
		c.reqs.Wait()
	}()
	fr := newFrameReaderSize(c.nc, c.s.opts.MaxFrame, readBufferSize, c.s.frames)
	for {
		if !c.roomForFrame() {
			return
		}
		t, p, err := fr.next()
		held := fr.held
		if err != nil {
			var be *busyError
			if errors.As(err, &be) {
				id, _ := abi.PeekRequestID(be.prefix)
				c.respond(&abi.Response{ID: id, Error: abi.Errorf(abi.CodeUnavailable, "%v", be)})
				continue
			}
			var fe *abi.FrameError
			if errors.As(err, &fe) {
				// The stream is out of step: say why, then hang up.
				c.s.badFrames.Add(1)
				c.s.log.Warn("bad frame; closing connection", "peer", c.caller.String(), "err", err)
				c.respond(&abi.Response{Error: abi.Errorf(abi.CodeBadFrame, "%s; closing the connection", fe.Reason)})
			}
			return
		}
		if held > 0 {
			// A large payload is ours: no copy, and its bytes stay charged
			// until the request is done with them.
			c.hold(held)
		} else {
			p = bytes.Clone(p) // the reader reuses its buffer
		}
		if t != abi.PacketRequest {
			c.release(held)
			c.respond(&abi.Response{Error: abi.Errorf(abi.CodeBadRequest, "clients send REQUEST packets only, got %s", t)})
			continue
		}
		// The request is decoded by hand: every length is checked against
		// the payload; params stay raw, aliasing p.
		var req abi.Request
		if err := abi.DecodeRequest(p, &req); err != nil {
			c.release(held)
			if cerr := abi.CheckMsgpack(p); cerr != nil {
				c.respond(&abi.Response{Error: abi.Errorf(abi.CodeBadRequest, "request is not valid MsgPack: %v", cerr)})
			} else {
				c.respond(&abi.Response{ID: salvageID(p), Error: abi.Errorf(abi.CodeBadRequest, "request is not a valid MsgPack Request map {id, method, params}: %v", err)})
			}
			continue
		}
		if req.Method == "" {
			c.release(held)
			c.respond(&abi.Response{ID: req.ID, Error: abi.Errorf(abi.CodeBadRequest, "request %d has no method", req.ID)})
			continue
		}
		if c.s.k.Quick(req.Method) {
			c.reply(req)
			c.release(held)
			continue
		}
		select {
		case c.sem <- struct{}{}:
		case <-c.ctx.Done():
			c.release(held)
			return
		}
		c.reqs.Add(1)
		c.s.running.Add(1)
		go c.handle(req, held)
	}
}

// handle runs one request. Requests run concurrently so that a long one
// (a replay, a wait) does not hold up a ping behind it.
func (c *conn) handle(req abi.Request, held int64) {
	defer c.reqs.Done()
	defer c.s.running.Add(-1)
	defer func() { <-c.sem }()
	defer c.release(held)
	c.reply(req)
}

// hold counts n bytes of a large request against the connection.
func (c *conn) hold(n int64) { c.held.Add(n) }

// release gives back what a request held, to the connection and the server.
func (c *conn) release(n int64) {
	if n == 0 {
		return
	}
	c.held.Add(-n)
	c.s.frames.give(n)
	select {
	case c.freed <- struct{}{}:
	default:
	}
}

// roomForFrame waits until the connection's handlers hold little enough
// that a frame of MaxFrame bytes fits under MaxConnBytes; false if the
// connection ended first.
func (c *conn) roomForFrame() bool {
	for c.held.Load()+int64(c.s.opts.MaxFrame) > c.s.opts.MaxConnBytes {
		select {
		case <-c.freed:
		case <-c.ctx.Done():
			return false
		}
	}
	return true
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
