// Package client connects Go programs — binary skills, UIs, scripts, the
// kairo command itself — to a running Kairo kernel over its Unix socket
// ($KAIRO_SOCKET, else kernel.sock in the data folder [FindHome] finds).
// [Dial] connects to it; a skill the kernel started uses [DialEnv], on the
// descriptor it inherited. A [*Client] is safe for concurrent use.
//
// Its calls are typed, their params and results [abi] types:
// [Client.Spawn] returns a [Process], whose [Process.Wait] gives its exit
// and which keeps its output; [Client.Send] sends the agent a message and
// [Conversation.Next] returns its replies; [Client.Subscribe] and
// [Client.Replay] give events whose data [DecodeData] decodes. [Client.Call]
// reaches any other method by its abi.Method constant.
//
// It imports abi, the msgpack it encodes with, and the standard library only:
// a program that dials the kernel does not link the kernel, its store or the
// plugin runtime. The frames it reads and writes are abi's ([abi.FrameReader],
// [abi.AppendFrame]), the same codec the kernel's server uses.
package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/vmihailenco/msgpack/v5"
)

// readBuffer is the receive buffer asked for the connection: events and
// process output arrive in bursts.
const readBuffer = 1 << 20

// frameBufs holds the buffers requests are framed in.
var frameBufs = sync.Pool{New: func() any { return new([]byte) }}

// ErrClosed is returned by calls on a closed client or after the
// connection to the kernel was lost.
var ErrClosed = errors.New("connection to the kernel is closed")

// Client is a connection to the kernel. It is safe for concurrent use;
// calls are pipelined on the one connection.
type Client struct {
	conn net.Conn
	wmu  sync.Mutex

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan *abi.Response
	streams map[uint64]*stream
	err     error // why the connection ended
	done    chan struct{}
	closing chan struct{} // closed by Close, once
	closeMu sync.Once
	onChunk func(*abi.StreamChunk)
	procs   procTable // the output of the processes of Spawn and Attach
}

// stream routes the events of one subscription or replay. quit is closed
// when the consumer stops listening, so the reader never blocks on a channel
// nobody drains.
type stream struct {
	ch      chan streamItem
	quit    chan struct{}
	closing <-chan struct{} // the client's: Close must not wait on a consumer
}

// put hands it to the consumer; false if the consumer is gone.
func (s *stream) put(it streamItem) {
	select {
	case s.ch <- it:
	case <-s.quit:
	case <-s.closing:
	}
}

// streamItem is an event of a subscription or replay, or the response that
// ends (replay) or opens (subscribe) it; they share a channel so their order
// on the wire is kept.
type streamItem struct {
	ev   *abi.Event
	resp *abi.Response
}

// Dial connects to the kernel socket at path (SocketPath() when empty).
func Dial(ctx context.Context, path string) (*Client, error) {
	if path == "" {
		path = SocketPath()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("connect to the kernel at %s: %w (is `kairo up` running? KAIRO_HOME and KAIRO_SOCKET choose the socket)", path, err)
	}
	return newClient(conn), nil
}

// New starts a client on conn, a connection to the kernel that the caller
// made: one end of a socket pair, as host.Daemon.Connect gives a program
// that embeds Kairo. The client owns conn from here on.
func New(conn net.Conn) *Client { return newClient(conn) }

// newClient starts a client on a connection to the kernel.
func newClient(conn net.Conn) *Client {
	if uc, ok := conn.(*net.UnixConn); ok {
		uc.SetReadBuffer(readBuffer)
	}
	c := &Client{
		conn:    conn,
		pending: map[uint64]chan *abi.Response{},
		streams: map[uint64]*stream{},
		done:    make(chan struct{}),
		closing: make(chan struct{}),
	}
	go c.readLoop()
	return c
}

// Close closes the connection; pending calls fail with [ErrClosed].
func (c *Client) Close() error {
	c.closeMu.Do(func() { close(c.closing) })
	err := c.conn.Close()
	<-c.done
	return err
}

func (c *Client) readLoop() {
	// The kernel is trusted to send frames within its own configured
	// limit, which may be above the default; only the ABI ceiling applies.
	fr := abi.NewFrameReader(socketReader(c.conn), abi.MaxFrameCeiling)
	var err error
	defer func() {
		c.mu.Lock()
		if c.err == nil {
			c.err = fmt.Errorf("%w: %v", ErrClosed, err)
		}
		for id, ch := range c.pending {
			close(ch)
			delete(c.pending, id)
		}
		for id, st := range c.streams {
			close(st.ch)
			delete(c.streams, id)
		}
		c.mu.Unlock()
		close(c.done)
	}()
	for {
		var t abi.PacketType
		var p []byte
		if t, p, err = fr.Next(); err != nil {
			return
		}
		switch t {
		case abi.PacketResponse:
			resp := new(abi.Response)
			if err = abi.DecodeResponse(bytes.Clone(p), resp); err != nil {
				err = fmt.Errorf("kernel sent an unreadable response: %w", err)
				return
			}
			c.mu.Lock()
			ch, ok := c.pending[resp.ID]
			delete(c.pending, resp.ID)
			sch, sok := c.streams[resp.ID]
			c.mu.Unlock()
			switch {
			case ok:
				ch <- resp
			case sok:
				sch.put(streamItem{resp: resp})
			case resp.ID == 0 && resp.Error != nil:
				// The kernel could not tell which request failed (a bad
				// frame); it closes the connection next.
				err = resp.Error
				return
			}
		case abi.PacketStreamChunk:
			c.mu.Lock()
			h := c.onChunk
			keep := c.procs.listening()
			c.mu.Unlock()
			if h == nil && !keep {
				continue // nobody listens: process output is dropped
			}
			// The output bytes are the reader's buffer, lent for the call
			// (no copy on the throughput path); the small strings, which
			// alias it too, get copies of their own.
			var ch abi.StreamChunk
			if err = abi.DecodeStreamChunk(p, &ch); err != nil {
				err = fmt.Errorf("kernel sent an unreadable stream chunk: %w", err)
				return
			}
			ch.ProcessID, ch.Stream = strings.Clone(ch.ProcessID), strings.Clone(ch.Stream)
			ch.Encoding, ch.CorrelationID = strings.Clone(ch.Encoding), strings.Clone(ch.CorrelationID)
			if keep {
				c.keepChunk(&ch)
			}
			if h != nil {
				h(&ch)
			}
		case abi.PacketEvent:
			// The event aliases its bytes, so it gets a copy of its own:
			// the frame reader reuses p.
			var ep abi.EventPacket
			if err = abi.DecodeEventPacket(bytes.Clone(p), &ep); err != nil {
				err = fmt.Errorf("kernel sent an unreadable event: %w", err)
				return
			}
			c.mu.Lock()
			sch, ok := c.streams[ep.Subscription]
			c.mu.Unlock()
			if ok {
				ev := ep.Event
				// Blocking here when the consumer is slow stops reading the
				// socket, which slows the kernel's push for this connection
				// only; the kernel then reads its store to catch up.
				sch.put(streamItem{ev: &ev})
			}
		}
	}
}

func (c *Client) send(id uint64, method string, params any) error {
	var raw msgpack.RawMessage
	if params != nil {
		var err error
		if raw, err = msgpack.Marshal(params); err != nil {
			return fmt.Errorf("%s: encode params: %w", method, err)
		}
	}
	bp := frameBufs.Get().(*[]byte)
	req := abi.Request{ID: id, Method: method, Params: raw}
	b := abi.AppendFrame((*bp)[:0], abi.PacketRequest, func(p []byte) []byte { return abi.AppendRequest(p, &req) })
	c.wmu.Lock()
	_, err := c.conn.Write(b)
	c.wmu.Unlock()
	if cap(b) <= 1<<20 { // do not keep a huge buffer
		*bp = b
		frameBufs.Put(bp)
	}
	if err != nil {
		return c.closedErr(err)
	}
	return nil
}

func (c *Client) closedErr(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	return fmt.Errorf("%w: %v", ErrClosed, err)
}

func (c *Client) newID() uint64 {
	c.nextID++
	return c.nextID
}

// Call invokes method with params and decodes its result into result (which
// may be nil). A failure reported by the kernel is an [*abi.Error].
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	ch := make(chan *abi.Response, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	id := c.newID()
	c.pending[id] = ch
	c.mu.Unlock()
	if err := c.send(id, method, params); err != nil {
		c.forget(id)
		return err
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return c.closedErr(nil)
		}
		return decodeResponse(resp, result)
	case <-ctx.Done():
		c.forget(id)
		return ctx.Err()
	}
}

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	if st, ok := c.streams[id]; ok {
		close(st.quit)
		delete(c.streams, id)
	}
	c.mu.Unlock()
}

func decodeResponse(resp *abi.Response, result any) error {
	if resp.Error != nil {
		return resp.Error
	}
	if result == nil || len(resp.Result) == 0 {
		return nil
	}
	if err := msgpack.Unmarshal(resp.Result, result); err != nil {
		return fmt.Errorf("decode result into %T: %w", result, err)
	}
	return nil
}

// OnChunk sets the function that receives the output (STREAM_CHUNK) of the
// processes this client spawned or attached to, in order per process and
// stream; a [Process] keeps its own besides. ch.Chunk is only valid during the call: copy the bytes you keep.
// It runs on the client's reader: while it blocks, nothing else is read, and the kernel slows the processes that write to it.
func (c *Client) OnChunk(fn func(*abi.StreamChunk)) {
	c.mu.Lock()
	c.onChunk = fn
	c.mu.Unlock()
}

// Ping measures one round trip to the kernel.
func (c *Client) Ping(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	err := c.Call(ctx, abi.MethodKernelPing, nil, nil)
	return time.Since(start), err
}

// WaitReady waits until the daemon is up — its plugins, tools, memory and
// agent started, not only the socket this client dialed — by asking
// kernel.ping until it answers ready ([abi.PingResult.Ready]). It returns
// ctx's error if that comes first, and the call's error if the kernel
// cannot answer: the daemon failed to start or is stopping. A kernel that
// predates the ready flag never answers ready; give ctx a deadline.
func (c *Client) WaitReady(ctx context.Context) error {
	const most = 200 * time.Millisecond
	wait := 5 * time.Millisecond
	for {
		var res abi.PingResult
		if err := c.Call(ctx, abi.MethodKernelPing, nil, &res); err != nil {
			return err
		}
		if res.Ready {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		wait = min(2*wait, most)
	}
}

// Publish appends ev to the bus; it returns once the event is durable.
// An ev.ID the caller sets is stored in its scope ("operator/1000:ID",
// see [abi.PublishParams]), which the result's ID names; publishing either
// id again is a duplicate.
func (c *Client) Publish(ctx context.Context, ev abi.Event) (abi.PublishResult, error) {
	var res abi.PublishResult
	err := c.Call(ctx, abi.MethodEventsPublish, abi.PublishParams{Event: ev}, &res)
	return res, err
}

// openStream sends a request whose events arrive on a channel of their own.
func (c *Client) openStream(method string, params any, buffer int) (uint64, chan streamItem, error) {
	ch := make(chan streamItem, buffer)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return 0, nil, c.err
	}
	id := c.newID()
	c.streams[id] = &stream{ch: ch, quit: make(chan struct{}), closing: c.closing}
	c.mu.Unlock()
	if err := c.send(id, method, params); err != nil {
		c.forget(id)
		return 0, nil, err
	}
	return id, ch, nil
}

// Replay calls fn for each stored event that p selects, in sequence order.
func (c *Client) Replay(ctx context.Context, p abi.ReplayParams, fn func(*abi.Event) error) (abi.ReplayResult, error) {
	var res abi.ReplayResult
	id, ch, err := c.openStream(abi.MethodEventsReplay, p, 1024)
	if err != nil {
		return res, err
	}
	defer c.forget(id)
	for {
		select {
		case it, ok := <-ch:
			if !ok {
				return res, c.closedErr(nil)
			}
			if it.resp != nil {
				return res, decodeResponse(it.resp, &res)
			}
			if err := fn(it.ev); err != nil {
				// Stop listening; what the kernel still sends is dropped.
				return res, err
			}
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
}

// Subscription receives the events of an events.subscribe. Its buffer
// holds 4096 events; a consumer that lets it fill stops the client's reader,
// which holds up the other calls on the same [Client] and makes the kernel
// serve this subscription from its store until the consumer catches up.
// Give a slow consumer a Client of its own.
type Subscription struct {
	c     *Client
	id    uint64
	ch    chan streamItem
	early []*abi.Event // events that arrived before the subscribe response
	err   error        // why the kernel ended it, once it has
}

// Subscribe opens a subscription to pattern ("" for every subject), from
// now (fromSeq 0) or from a sequence number.
func (c *Client) Subscribe(ctx context.Context, pattern string, fromSeq uint64) (*Subscription, error) {
	id, ch, err := c.openStream(abi.MethodEventsSubscribe, abi.SubscribeParams{Pattern: pattern, FromSeq: fromSeq}, 4096)
	if err != nil {
		return nil, err
	}
	s := &Subscription{c: c, id: id, ch: ch}
	for {
		select {
		case it, ok := <-ch:
			if !ok {
				return nil, c.closedErr(nil)
			}
			if it.resp == nil {
				s.early = append(s.early, it.ev)
				continue
			}
			if err := decodeResponse(it.resp, nil); err != nil {
				c.forget(id)
				return nil, err
			}
			return s, nil
		case <-ctx.Done():
			c.forget(id)
			return nil, ctx.Err()
		}
	}
}

// ID is the subscription's ID (the ID of the request that opened it).
func (s *Subscription) ID() uint64 { return s.id }

// Next returns the next event, waiting for it.
func (s *Subscription) Next(ctx context.Context) (*abi.Event, error) {
	if len(s.early) > 0 {
		ev := s.early[0]
		s.early = s.early[1:]
		return ev, nil
	}
	if s.err != nil {
		return nil, s.err
	}
	select {
	case it, ok := <-s.ch:
		if !ok {
			return nil, s.c.closedErr(nil)
		}
		if it.ev == nil { // a late error response: the kernel ended it
			if s.err = decodeResponse(it.resp, nil); s.err == nil {
				s.err = fmt.Errorf("subscription %d: the kernel ended it", s.id)
			}
			return nil, s.err
		}
		return it.ev, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close ends the subscription.
func (s *Subscription) Close(ctx context.Context) error {
	s.c.forget(s.id)
	err := s.c.Call(ctx, abi.MethodEventsUnsubscribe, abi.UnsubscribeParams{Subscription: s.id}, nil)
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}
