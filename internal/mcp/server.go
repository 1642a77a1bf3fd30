package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Restart backoff: a server that went away is started again on the next
// call, no sooner than this after its last failure, doubling with each
// failure in a row up to the maximum.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// ErrClosed is returned by calls to a Server after Close.
var ErrClosed = errors.New("mcp server closed")

// Server is a connection to one MCP server, made again when it drops.
type Server struct {
	cfg    ServerConfig
	k      *kernel.Kernel
	log    *slog.Logger
	client *sdk.Client
	owner  *session

	// ctx ends with Close: it ends calls in flight, a start under way and
	// the tool list refresher.
	ctx       context.Context
	cancel    context.CancelFunc
	hurry     chan struct{} // closed when Close's context ends: stop kills at once
	hurryOnce sync.Once
	refresh   chan struct{}  // the server said its tool list changed
	wg        sync.WaitGroup // every goroutine the Server starts

	dial sync.Mutex // one start at a time

	mu       sync.Mutex
	conn     *conn // nil while down
	last     *conn // the newest connection, live or being stopped
	closed   bool
	tools    []abi.Tool
	changed  chan struct{} // closed and replaced when tools change
	failures int           // in a row, since the last answer
	retryAt  time.Time
}

// conn is one MCP session and, for a stdio server, its process.
type conn struct {
	cs      *sdk.ClientSession
	stdio   *stdioConn    // nil for HTTP
	proc    *proc.Session // nil for HTTP
	dead    chan struct{} // closed once the session has ended
	stopped chan struct{} // closed once the process has exited too
}

func (c *conn) isDead() bool {
	select {
	case <-c.dead:
		return true
	default:
		return false
	}
}

// why is what is known of why c ended.
func (c *conn) why() string {
	if c.stdio != nil {
		return c.stdio.exit()
	}
	return "the connection was lost"
}

// Connect starts the server cfg describes (spawning a stdio server through
// k), completes the MCP handshake and lists its tools. ctx bounds the start
// only; the server runs until Close. log may be nil.
func Connect(ctx context.Context, k *kernel.Kernel, cfg ServerConfig, log *slog.Logger) (*Server, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.URL == "" && k == nil {
		return nil, fmt.Errorf("mcp server %q: a stdio server needs a kernel to spawn it through", cfg.Name)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("mcp", cfg.Name)
	s := &Server{
		cfg: cfg, k: k, log: log,
		hurry: make(chan struct{}), refresh: make(chan struct{}, 1), changed: make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.owner = newSession(s.ctx, cfg.Name)
	s.client = sdk.NewClient(&sdk.Implementation{Name: "kairo", Version: "1"}, &sdk.ClientOptions{
		Logger: log,
		// No roots, no sampling, no elicitation: Kairo asks servers for
		// tools and nothing else. (A filesystem server given roots would
		// take them over the folders its command line allows.)
		Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case s.refresh <- struct{}{}:
			default:
			}
		},
	})
	if _, err := s.connect(ctx); err != nil {
		s.Close(context.Background())
		return nil, err
	}
	s.wg.Add(1)
	go s.refresher()
	return s, nil
}

// Name is the server's name, as its config gives it.
func (s *Server) Name() string { return s.cfg.Name }

// Tools are the server's tools in the OpenAI function format, under the
// names the server gives them, as last listed. Their Parameters maps are
// shared: read them, do not change them.
func (s *Server) Tools() []abi.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]abi.Tool(nil), s.tools...)
}

// ToolsChanged is closed when the tool list changes next: the server said
// so, or a restarted server lists other tools.
func (s *Server) ToolsChanged() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Call runs tool with its arguments, a JSON object (or ""), and returns the
// text of its result: text content as it is, other content described, one
// piece a line. A tool that failed, or that the server refused, is a result
// with isError; err is for a call that got no answer: the server went away
// (it is started again on the next call), ctx ended, or the Server is
// closed.
func (s *Server) Call(ctx context.Context, tool, argsJSON string) (content string, isError bool, err error) {
	args, msg := arguments(argsJSON)
	if msg != "" {
		return fmt.Sprintf("the arguments of %s: %s", tool, msg), true, nil
	}
	c, err := s.session(ctx)
	if err != nil {
		return "", false, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	var capHit atomic.Bool
	ctx = context.WithValue(ctx, capHitKey{}, &capHit)
	res, err := c.cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	var rpcErr *jsonrpc.Error
	switch {
	case err != nil && capHit.Load() || errors.As(err, &rpcErr) && rpcErr.Message == overMessage(s.cfg.maxMessage()):
		// Cut while read: over HTTP by capBody, over stdio by stdioConn,
		// whose stand-in answer is a refusal.
		s.answered()
		return fmt.Sprintf("mcp server %s answered the call of %s with more than %d bytes, the most read of one answer (max_result_bytes of its [mcp.%s] in kairo.toml is %d); the result is not used", s.cfg.Name, tool, s.cfg.maxMessage(), s.cfg.Name, s.cfg.MaxResultBytes), true, nil
	case err == nil:
		s.answered()
		text := resultText(res)
		if int64(len(text)) > s.cfg.MaxResultBytes {
			return fmt.Sprintf("mcp server %s answered the call of %s with %d bytes, over the %d of max_result_bytes of its [mcp.%s] in kairo.toml; the result is not used", s.cfg.Name, tool, len(text), s.cfg.MaxResultBytes, s.cfg.Name), true, nil
		}
		return text, res.IsError, nil
	case errors.As(err, &rpcErr):
		s.answered()
		return fmt.Sprintf("mcp server %s refused the call of %s: %s", s.cfg.Name, tool, rpcErr.Message), true, nil
	case s.ctx.Err() != nil:
		return "", false, fmt.Errorf("mcp server %q: call %s: %w", s.cfg.Name, tool, ErrClosed)
	case ctx.Err() != nil:
		return "", false, fmt.Errorf("mcp server %q: call %s: %w", s.cfg.Name, tool, ctx.Err())
	}
	// No answer: the session is over (a stdio server exited, an HTTP
	// server forgot it) or in no state to go on. The next call starts anew.
	s.retire(c)
	return "", false, fmt.Errorf("mcp server %q: call %s: %w", s.cfg.Name, tool, err)
}

// arguments checks that argsJSON is a JSON object, and says what is wrong
// when it is not.
func arguments(argsJSON string) (json.RawMessage, string) {
	var obj map[string]json.RawMessage
	switch {
	case argsJSON == "" || argsJSON == "null":
		return json.RawMessage("{}"), ""
	case json.Unmarshal([]byte(argsJSON), &obj) != nil:
		return nil, fmt.Sprintf("not a JSON object: %s", clip(argsJSON, 200))
	}
	return json.RawMessage(argsJSON), ""
}

// session is the live connection, made when there is none: a server that
// went away is started again, no sooner than its backoff allows.
func (s *Server) session(ctx context.Context) (*conn, error) {
	if c, err := s.current(); c != nil || err != nil {
		return c, err
	}
	s.dial.Lock()
	defer s.dial.Unlock()
	if c, err := s.current(); c != nil || err != nil {
		return c, err
	}
	s.mu.Lock()
	last, wait, n := s.last, time.Until(s.retryAt), s.failures
	s.mu.Unlock()
	if last != nil {
		// The old process goes before a new one starts.
		select {
		case <-last.stopped:
		case <-ctx.Done():
			return nil, fmt.Errorf("mcp server %q: waiting for the old server to stop: %w", s.cfg.Name, ctx.Err())
		}
	}
	if wait > 0 {
		if d, ok := ctx.Deadline(); ok && time.Until(d) < wait {
			return nil, fmt.Errorf("mcp server %q is down after %d failures in a row; the next start is in %s", s.cfg.Name, n, wait.Round(time.Millisecond))
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("mcp server %q: waiting to start again: %w", s.cfg.Name, ctx.Err())
		case <-s.ctx.Done():
			return nil, fmt.Errorf("mcp server %q: %w", s.cfg.Name, ErrClosed)
		}
	}
	c, err := s.connect(ctx)
	if err != nil {
		s.mu.Lock()
		s.failed()
		s.mu.Unlock()
		return nil, err
	}
	s.log.Info("mcp server started again", "after", n)
	return c, nil
}

// current is the live connection, if any.
func (s *Server) current() (*conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("mcp server %q: %w", s.cfg.Name, ErrClosed)
	}
	if s.conn != nil && !s.conn.isDead() {
		return s.conn, nil
	}
	return nil, nil
}

// connect starts the server and makes it the live connection.
func (s *Server) connect(parent context.Context) (*conn, error) {
	ctx, cancel := context.WithTimeout(parent, s.cfg.ConnectTimeout)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	c := &conn{dead: make(chan struct{}), stopped: make(chan struct{})}
	var t sdk.Transport
	if s.cfg.URL != "" {
		t = &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: &http.Client{
			Transport: capTransport{base: http.DefaultTransport, max: int64(s.cfg.maxMessage())},
		}}
		close(c.stopped)
	} else {
		if err := s.spawn(c); err != nil {
			return nil, err
		}
		t = c.stdio
	}
	cs, err := s.client.Connect(ctx, t, nil)
	if err == nil && !s.track() {
		cs.Close()
		err = ErrClosed
	}
	if err != nil {
		return nil, s.startFailed(c, s.timedOut(parent, ctx, err))
	}
	c.cs = cs
	go s.watch(c)
	tools, err := listTools(ctx, cs, s.cfg.MaxTools)
	if err != nil {
		return nil, s.startFailed(c, s.timedOut(parent, ctx, err))
	}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.conn, s.last = c, c
		s.setTools(tools)
	}
	s.mu.Unlock()
	if closed {
		return nil, s.startFailed(c, ErrClosed)
	}
	return c, nil
}

// timedOut says so when err is the end of connect_timeout rather than of
// the caller's context.
func (s *Server) timedOut(parent, ctx context.Context, err error) error {
	if ctx.Err() == nil || parent.Err() != nil || s.ctx.Err() != nil {
		return err
	}
	if s.cfg.URL != "" {
		return fmt.Errorf("no answer within %s (connect_timeout): %w", s.cfg.ConnectTimeout, err)
	}
	return fmt.Errorf("no answer to the MCP handshake within %s (connect_timeout): is it a server that speaks MCP on stdin and stdout? %w", s.cfg.ConnectTimeout, err)
}

// track counts a goroutine in s.wg, unless s is closed.
func (s *Server) track() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// startFailed ends what a start made, waits for its process to be gone,
// and says why the start failed.
func (s *Server) startFailed(c *conn, err error) error {
	if c.stdio == nil {
		if c.cs != nil {
			c.cs.Close()
		}
		return fmt.Errorf("mcp server %q: connect to %s: %w", s.cfg.Name, s.cfg.URL, err)
	}
	why := c.why() // before the stop, which would be all it tells
	c.stdio.Close()
	if c.cs != nil {
		c.cs.Close()
	} else {
		close(c.dead)
	}
	<-c.stopped
	if strings.Contains(err.Error(), why) {
		return fmt.Errorf("mcp server %q: start %q: %w", s.cfg.Name, s.cfg.Command, err)
	}
	return fmt.Errorf("mcp server %q: start %q: %w (%s)", s.cfg.Name, s.cfg.Command, err, why)
}

// spawn starts the server process through the kernel, with c.stdio as
// its stdio, and a goroutine that stops it once the connection is over.
func (s *Server) spawn(c *conn) error {
	spec, err := s.cfg.spec()
	if err != nil {
		return err
	}
	c.stdio = newStdioConn(s.cfg.Name, s.log, s.cfg.maxMessage())
	if !s.track() {
		return fmt.Errorf("mcp server %q: %w", s.cfg.Name, ErrClosed)
	}
	given, err := s.k.SecretsFor(s.cfg.Name, s.cfg.Secrets)
	if err != nil {
		s.wg.Done()
		return fmt.Errorf("mcp server %q: %w", s.cfg.Name, err)
	}
	if given != nil {
		spec.Secrets, spec.Mask = given, s.k.Masker()
	}
	p, err := s.k.Proc.Spawn(spec, s.owner, c.stdio)
	if err != nil {
		s.wg.Done()
		return fmt.Errorf("mcp server %q: %w", s.cfg.Name, err)
	}
	s.k.RecordSecrets(context.Background(), p.ID(), s.cfg.Name, given)
	c.stdio.p, c.proc = p, p
	s.log.Info("mcp server spawned", "process", p.ID(), "pid", p.Info().PID)
	go func() {
		defer s.wg.Done()
		<-c.dead
		stop(p, s.cfg.ShutdownGrace, s.hurry, s.log)
		close(c.stopped)
	}()
	return nil
}

// watch waits for the end of c's session and takes it out of service; the
// process, if any, is then stopped.
func (s *Server) watch(c *conn) {
	defer s.wg.Done()
	c.cs.Wait()
	if c.stdio != nil {
		c.stdio.Close()
	}
	close(c.dead)
	s.drop(c)
}

// retire takes c out of service and ends its session, if it has not ended
// already.
func (s *Server) retire(c *conn) {
	s.drop(c)
	switch {
	case c.stdio != nil:
		c.stdio.Close() // watch and the process's stop follow
	case s.track():
		go func() { defer s.wg.Done(); c.cs.Close() }() // waits for the calls in flight
	default:
		c.cs.Close() // Close ended the calls in flight
	}
}

// drop takes c out of service if it still is the live connection, and
// counts the failure.
func (s *Server) drop(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != c {
		return
	}
	s.conn = nil
	if s.closed {
		return
	}
	s.failed()
	s.log.Warn("mcp server went away; it starts again on the next call", "why", c.why(), "failures", s.failures)
}

// failed counts a failure and sets when the next start may be; s.mu held.
func (s *Server) failed() {
	s.failures++
	s.retryAt = time.Now().Add(min(minBackoff<<min(s.failures-1, 20), maxBackoff))
}

// answered resets the failure count: the server works.
func (s *Server) answered() {
	s.mu.Lock()
	s.failures = 0
	s.mu.Unlock()
}

// setTools replaces the tool list and tells of a change; s.mu held.
func (s *Server) setTools(tools []abi.Tool) {
	if reflect.DeepEqual(tools, s.tools) {
		return
	}
	s.tools = tools
	close(s.changed)
	s.changed = make(chan struct{})
}

// refresher lists the tools again each time the server says they changed.
func (s *Server) refresher() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.refresh:
		}
		c, _ := s.current()
		if c == nil {
			continue // a restart lists them anew
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.ConnectTimeout)
		tools, err := listTools(ctx, c.cs, s.cfg.MaxTools)
		cancel()
		if err != nil {
			s.log.Warn("list the tools of an mcp server again", "err", err)
			continue
		}
		s.mu.Lock()
		if s.conn == c {
			s.setTools(tools)
		}
		s.mu.Unlock()
	}
}

// Close stops the server and waits until it has: a stdio server's process
// has exited, and its process group is killed. When ctx ends first, the
// waits are cut short (the server is killed at once) and Close returns
// ctx's error once the process is gone. Calls in flight end with ErrClosed.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	c := s.conn
	s.conn = nil
	s.mu.Unlock()
	s.cancel()
	hurried := false
	defer context.AfterFunc(ctx, func() {
		s.hurryOnce.Do(func() { hurried = true; close(s.hurry) })
	})()
	if c != nil {
		if c.stdio != nil {
			c.stdio.Close()
		}
		c.cs.Close()
	}
	s.wg.Wait()
	s.hurryOnce.Do(func() {}) // hurried is settled from here
	if hurried {
		return fmt.Errorf("mcp server %q: the context ended before the server stopped by itself, so it was killed: %w", s.cfg.Name, ctx.Err())
	}
	return nil
}
