package ipc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/vmihailenco/msgpack/v5"
	"golang.org/x/sys/unix"
)

// SocketPath is the socket a client dials: $KAIRO_SOCKET, else
// kernel.sock in the data folder FindHome finds.
func SocketPath() string {
	if p := os.Getenv("KAIRO_SOCKET"); p != "" {
		return p
	}
	home, _ := FindHome(nil)
	return filepath.Join(home, "kernel.sock")
}

// Home is the data folder kairo up runs on: $KAIRO_HOME, else ./.kairo.
// A client looks further: FindHome.
func Home() string {
	if h := os.Getenv("KAIRO_HOME"); h != "" {
		return h
	}
	return ".kairo"
}

// FindHome is the data folder a client uses, so that it finds the kernel
// its user started from whatever folder it runs in: $KAIRO_HOME; else
// ./.kairo when a kernel listens there; else the folder the user's running
// kernel named in the pointer file (PointerPath) when a kernel listens
// there; else ./.kairo. pointer is the pointer file when the folder came
// from it. socketOf is where a kernel on a data folder listens; nil means
// kernel.sock in it.
func FindHome(socketOf func(home string) (string, error)) (home, pointer string) {
	if h := os.Getenv("KAIRO_HOME"); h != "" {
		return h, ""
	}
	if socketOf == nil {
		socketOf = func(home string) (string, error) { return filepath.Join(home, "kernel.sock"), nil }
	}
	listens := func(home string) bool {
		sock, err := socketOf(home)
		if err != nil {
			return false
		}
		c, err := net.DialTimeout("unix", sock, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	const here = ".kairo"
	if listens(here) {
		return here, ""
	}
	if path := PointerPath(); path != "" {
		if h, err := ReadPointer(path); err == nil && listens(h) {
			return h, path
		}
	}
	return here, ""
}

// PointerPath is the file in which a running kernel names its data folder
// for the clients of its user: $XDG_RUNTIME_DIR/kairo/current, else
// kairo/current in the user's cache folder; "" when neither is known.
// XDG_RUNTIME_DIR is the user's own, private, and emptied at logout; where
// it is unset (a container, a service) the cache folder is the user's own
// too, unlike /tmp, where another user may make the folder first. A
// pointer a crash left names a socket nobody listens on, and is passed
// over.
func PointerPath() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "kairo", "current")
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "kairo", "current")
	}
	return ""
}

// maxPointer bounds the pointer file: a path, and a newline.
const maxPointer = 4096

// ReadPointer returns the data folder the pointer file at path names. It
// refuses a pointer that another user could have written: the file and its
// folder must be this user's, writable by nobody else, and the file a
// regular one, not a link.
func ReadPointer(path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Dir(path), &st); err != nil {
		return "", &os.PathError{Op: "lstat", Path: filepath.Dir(path), Err: err}
	}
	if err := ownOnly(filepath.Dir(path), &st, unix.S_IFDIR); err != nil {
		return "", err
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	// The file opened, not whatever the name points at by now.
	if err := unix.Fstat(fd, &st); err != nil {
		return "", &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if err := ownOnly(path, &st, unix.S_IFREG); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPointer+1))
	switch {
	case err != nil:
		return "", err
	case len(b) > maxPointer:
		return "", fmt.Errorf("%s: over %d bytes, so not a pointer", path, maxPointer)
	}
	home := strings.TrimSuffix(string(b), "\n")
	if !filepath.IsAbs(home) || strings.ContainsAny(home, "\x00\n") {
		return "", fmt.Errorf("%s: does not hold an absolute path", path)
	}
	return home, nil
}

// ownOnly checks that st, of path, is of type typ (unix.S_IFDIR or
// S_IFREG), belongs to this process's user and may be written by no one
// else.
func ownOnly(path string, st *unix.Stat_t, typ uint32) error {
	what := "a regular file"
	if typ == unix.S_IFDIR {
		what = "a folder"
	}
	switch {
	case st.Mode&unix.S_IFMT != typ:
		return fmt.Errorf("%s: not %s", path, what)
	case int(st.Uid) != os.Getuid():
		return fmt.Errorf("%s: belongs to uid %d, not to this user", path, st.Uid)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("%s: others may write it (mode %#o)", path, st.Mode&0o777)
	}
	return nil
}

// ErrClientClosed is returned by calls on a closed client or after the
// connection to the kernel was lost.
var ErrClientClosed = errors.New("connection to the kernel is closed")

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

// newClient starts a client on a connection to the kernel.
func newClient(conn net.Conn) *Client {
	if uc, ok := conn.(*net.UnixConn); ok {
		uc.SetReadBuffer(socketBuffer)
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

// Close closes the connection; pending calls fail with ErrClientClosed.
func (c *Client) Close() error {
	c.closeMu.Do(func() { close(c.closing) })
	err := c.conn.Close()
	<-c.done
	return err
}

func (c *Client) readLoop() {
	// The kernel is trusted to send frames within its own configured
	// limit, which may be above the default; only the ABI ceiling applies.
	fr := newFrameReader(c.conn, abi.MaxFrameCeiling)
	var err error
	defer func() {
		c.mu.Lock()
		if c.err == nil {
			c.err = fmt.Errorf("%w: %v", ErrClientClosed, err)
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
		if t, p, err = fr.next(); err != nil {
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
			c.mu.Unlock()
			if h == nil {
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
			h(&ch)
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
	f := getFrameBuf()
	defer putFrameBuf(f)
	req := abi.Request{ID: id, Method: method, Params: raw}
	f.addRaw(abi.PacketRequest, func(p []byte) []byte { return abi.AppendRequest(p, &req) })
	c.wmu.Lock()
	_, err := c.conn.Write(f.b.Bytes())
	c.wmu.Unlock()
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
	return fmt.Errorf("%w: %v", ErrClientClosed, err)
}

func (c *Client) newID() uint64 {
	c.nextID++
	return c.nextID
}

// Call invokes method with params and decodes its result into result (which
// may be nil). A failure reported by the kernel is an *abi.Error.
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
// stream. ch.Chunk is only valid during the call: copy the bytes you keep. It runs on the client's reader: while it blocks, nothing else is
// read, and the kernel slows the processes that write to it.
func (c *Client) OnChunk(fn func(*abi.StreamChunk)) {
	c.mu.Lock()
	c.onChunk = fn
	c.mu.Unlock()
}

// Ping measures one round trip to the kernel.
func (c *Client) Ping(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	err := c.Call(ctx, "kernel.ping", nil, nil)
	return time.Since(start), err
}

// Publish appends ev to the bus; it returns once the event is durable.
func (c *Client) Publish(ctx context.Context, ev abi.Event) (abi.PublishResult, error) {
	var res abi.PublishResult
	err := c.Call(ctx, "events.publish", abi.PublishParams{Event: ev}, &res)
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
	id, ch, err := c.openStream("events.replay", p, 1024)
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
// which holds up the other calls on the same Client and makes the kernel
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
	id, ch, err := c.openStream("events.subscribe", abi.SubscribeParams{Pattern: pattern, FromSeq: fromSeq}, 4096)
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
	err := s.c.Call(ctx, "events.unsubscribe", abi.UnsubscribeParams{Subscription: s.id}, nil)
	if errors.Is(err, ErrClientClosed) {
		return nil
	}
	return err
}
