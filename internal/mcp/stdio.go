package mcp

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxLine bounds one JSON-RPC message from a server, as the SDK's own stdio
// transport does.
const maxLine = sdk.DefaultMaxLineLength

// exitWait is how long an error waits for the server's exit to be
// recorded before it describes the server as it stands; exitRecord, how
// long once the server is seen to have exited (a zombie, or reaped), which
// only a loaded machine makes more than a moment.
const (
	exitWait   = 2 * time.Second
	exitRecord = 30 * time.Second
)

// stderrTail is how much of a server's stderr is kept for error messages.
const stderrTail = 2 << 10

// session is the MCP host as a caller of the kernel: it owns the server
// processes it spawns, so that `kairo ps` shows them under its name and a
// client of the same user may attach to them like to any other.
type session struct {
	ctx    context.Context
	caller kernel.Caller
}

func newSession(ctx context.Context, name string) *session {
	return &session{ctx: ctx, caller: kernel.Caller{
		Kind: kernel.KindHost, Name: "mcp/" + name, UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), PID: int32(os.Getpid()),
	}}
}

func (s *session) Caller() kernel.Caller                { return s.caller }
func (s *session) Context() context.Context             { return s.ctx }
func (s *session) PushEvents(uint64, []abi.Event) error { return nil }
func (s *session) PushChunks([]abi.StreamChunk) error   { return nil }
func (s *session) EndStream(uint64, *abi.Error) error   { return nil }

// stdioConn is an MCP connection over a kernel process's stdin and stdout:
// newline-delimited JSON-RPC, as the MCP stdio transport has it. It is also
// the process's output sink: stdout is cut into messages, stderr is kept,
// its end only, for the errors that explain why a server went away.
type stdioConn struct {
	name string
	log  *slog.Logger
	p    *proc.Session // set once Spawn returned, before the SDK reads

	lines  chan []byte   // whole lines of stdout
	closed chan struct{} // by Close
	once   sync.Once
	part   []byte // an unfinished line; the stdout pump's alone
	skip   bool   // the rest of an overlong line is dropped
	max    int    // the longest line kept
	over   idScan // of an overlong line: the id it answers

	wmu sync.Mutex // one message at a time on stdin

	mu      sync.Mutex
	stderr  []byte
	noisy   bool // a line that is not JSON-RPC was reported
	tooLong bool
}

func newStdioConn(name string, log *slog.Logger, max int) *stdioConn {
	return &stdioConn{name: name, log: log, max: max, lines: make(chan []byte, 64), closed: make(chan struct{})}
}

// Connect makes stdioConn its own mcp.Transport: the process runs already.
func (c *stdioConn) Connect(context.Context) (sdk.Connection, error) { return c, nil }

// Chunks takes the process's output. It blocks while the SDK does not read,
// which holds the server back in its writes, until the connection closes;
// then it lets go, and the pump reads on to the end of the output.
func (c *stdioConn) Chunks(cs []abi.StreamChunk) error {
	for i := range cs {
		ch := &cs[i]
		if ch.Stream == "stderr" {
			c.keepStderr(ch.Chunk)
			continue
		}
		data := ch.Chunk
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				c.add(data)
				break
			}
			c.add(data[:i])
			data = data[i+1:]
			line := c.part
			if c.skip {
				// The answer to a request is not dropped but turned into
				// an error, so its caller hears at once why.
				line = c.over.refusal(c.max)
			}
			c.part, c.skip = nil, false
			if len(line) == 0 {
				continue
			}
			select {
			case c.lines <- line:
			case <-c.closed:
				return sdk.ErrConnectionClosed
			}
		}
	}
	return nil
}

// add appends b to the line being read, dropping a line over c.max: what
// is read of it past the cap is only scanned for the id it answers.
func (c *stdioConn) add(b []byte) {
	if c.skip {
		c.over.write(b)
		return
	}
	if len(c.part)+len(b) > c.max {
		c.over = idScan{}
		c.over.write(c.part)
		c.over.write(b)
		c.part, c.skip = nil, true
		c.mu.Lock()
		c.tooLong = true
		c.mu.Unlock()
		c.log.Warn("mcp server wrote a line over the limit; dropped", "server", c.name, "limit", c.max)
		return
	}
	c.part = append(c.part, b...)
}

func (c *stdioConn) keepStderr(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stderr = append(c.stderr, b...)
	if n := len(c.stderr); n > 2*stderrTail {
		c.stderr = append(c.stderr[:0], c.stderr[n-stderrTail:]...)
	}
}

// Read returns the next message. Lines that are not JSON-RPC (a server
// that logs to stdout) are passed over, once said in the log.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		line, err := c.next(ctx)
		if err != nil {
			return nil, err
		}
		msg, err := jsonrpc.DecodeMessage(line)
		if err == nil {
			return msg, nil
		}
		c.mu.Lock()
		said := c.noisy
		c.noisy = true
		c.mu.Unlock()
		if !said {
			c.log.Warn("mcp server wrote a line that is not a JSON-RPC message to stdout, where only messages belong (its logs go to stderr); passed over",
				"server", c.name, "line", clip(string(line), 200), "err", err)
		}
	}
}

// next is the next line of stdout; once the process has exited and its
// output is read, an error that says how it ended.
func (c *stdioConn) next(ctx context.Context) ([]byte, error) {
	select {
	case l := <-c.lines:
		return l, nil
	default:
	}
	select {
	case l := <-c.lines:
		return l, nil
	case <-c.closed:
		return nil, sdk.ErrConnectionClosed
	case <-c.p.Done():
		select {
		case l := <-c.lines:
			return l, nil
		default:
		}
		return nil, fmt.Errorf("%w: %s", sdk.ErrConnectionClosed, c.exit())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write sends msg on the process's stdin.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encode a message for mcp server %q: %w", c.name, err)
	}
	data = append(data, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.closed:
		return sdk.ErrConnectionClosed
	default:
	}
	// The write blocks while the server does not read; Close ends it by
	// closing stdin, and the caller's context by giving up.
	if err := c.p.WriteStdinContext(ctx, data); err != nil {
		return fmt.Errorf("%w: %v", sdk.ErrConnectionClosed, err)
	}
	return nil
}

// Close closes the server's stdin, the first step of an MCP stdio
// shutdown; stop takes the process the rest of the way.
func (c *stdioConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.p.CloseStdin()
	})
	return nil
}

func (c *stdioConn) SessionID() string { return "" }

// exit says how the process ended and what its stderr said last.
func (c *stdioConn) exit() string {
	// A write that failed with a broken pipe, or a read that ended, is
	// usually the server exiting: give its exit a moment to be recorded,
	// so the error says how it ended rather than that it runs.
	select {
	case <-c.p.Done():
	case <-time.After(exitWait):
		// Past the wait, a server that no longer runs has exited, and its
		// exit will be recorded: wait for that, so that the error does not
		// say it runs.
		if runs, _ := procState(c.p.Info().PID); !runs {
			select {
			case <-c.p.Done():
			case <-time.After(exitRecord):
			}
		}
	}
	info := c.p.Info()
	var b strings.Builder
	switch {
	case info.Status == abi.ProcessRunning:
		fmt.Fprintf(&b, "the server (pid %d) runs", info.PID)
	case info.Signal != "":
		fmt.Fprintf(&b, "the server (pid %d) was killed by %s", info.PID, info.Signal)
	case info.ExitCode != nil:
		fmt.Fprintf(&b, "the server (pid %d) exited with code %d", info.PID, *info.ExitCode)
	default:
		fmt.Fprintf(&b, "the server (pid %d) exited", info.PID)
	}
	c.mu.Lock()
	tail := strings.TrimSpace(string(c.stderr))
	tooLong := c.tooLong
	c.mu.Unlock()
	if tooLong {
		fmt.Fprintf(&b, "; it wrote a message over %d bytes, which was dropped", maxLine)
	}
	if tail != "" {
		if len(tail) > stderrTail {
			tail = "…" + tail[len(tail)-stderrTail:]
		}
		fmt.Fprintf(&b, "; its stderr ends with:\n%s", tail)
	}
	return b.String()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
