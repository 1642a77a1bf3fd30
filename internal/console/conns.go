package console

import (
	"container/list"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"
)

// The bounds on connections that have not shown the token, unless Config
// says otherwise.
const (
	DefaultMaxTokenlessPerAddr = 16
	DefaultMaxTokenless        = 64
	DefaultHeaderTimeout       = 10 * time.Second
	// capReportEvery spaces the log lines of a cap that keeps biting.
	capReportEvery = 10 * time.Second
)

// gate is the console's listener: it bounds the connections that have not
// shown the token yet (tokenless), per remote address and in all, and the
// time each may take to show it. Without it any local user could hold the
// daemon's descriptors and memory with connections that send nothing.
//
// A connection is tokenless from its accept until a request on it carries
// the valid token (trust); from then on it is the operator's and no cap
// counts it. When a new connection would pass a cap, the oldest tokenless
// connection of its address (for the cap per address) or of all (for the
// total) is closed to make room, and the new one is kept: a browser sends
// its request at once, so the newest connection is the likeliest to be
// the operator's, and holding connections open cannot lock the operator out.
type gate struct {
	net.Listener
	perAddr, total int
	timeout        time.Duration
	log            *slog.Logger

	mu     sync.Mutex // guards the fields below and each tconn's list places and deadlines
	all    list.List  // the tokenless connections, oldest first
	byAddr map[netip.Addr]*list.List
	closed uint64    // tokenless connections closed to stay within a cap
	since  uint64    // of those, closed since the last report
	report time.Time // when the last report was logged
}

// tconn is a connection the gate accepted.
type tconn struct {
	net.Conn
	g        *gate
	addr     netip.Addr
	deadline time.Time // by when a tokenless connection must have shown the token

	// Guarded by g.mu.
	tokenless bool
	done      bool          // closed, or evicted
	inAll     *list.Element // in g.all while tokenless
	inAddr    *list.Element // in g.byAddr[addr] while tokenless
	asked     time.Time     // the last read deadline the HTTP server set
}

func newGate(ln net.Listener, perAddr, total int, timeout time.Duration, log *slog.Logger) *gate {
	return &gate{Listener: ln, perAddr: perAddr, total: total, timeout: timeout, log: log, byAddr: map[netip.Addr]*list.List{}}
}

// Accept returns the next connection, tokenless, after closing the oldest
// tokenless one of its address or of all if it would pass a cap.
func (g *gate) Accept() (net.Conn, error) {
	c, err := g.Listener.Accept()
	if err != nil {
		return nil, err
	}
	var addr netip.Addr
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		addr = ta.AddrPort().Addr().Unmap()
	}
	now := time.Now()
	tc := &tconn{Conn: c, g: g, addr: addr, deadline: now.Add(g.timeout), tokenless: true}
	// Until the server sets its own, the connection has until the
	// deadline to speak.
	c.SetReadDeadline(tc.deadline)

	g.mu.Lock()
	var victim *tconn
	var which string
	own := g.byAddr[addr]
	switch {
	case own != nil && own.Len() >= g.perAddr:
		victim, which = own.Front().Value.(*tconn), fmt.Sprintf("%d from one address", g.perAddr)
	case g.all.Len() >= g.total:
		victim, which = g.all.Front().Value.(*tconn), fmt.Sprintf("%d in all", g.total)
	}
	if victim != nil {
		g.forget(victim)
		victim.done = true
		g.closed++
		g.since++
	}
	if own == nil {
		own = &list.List{}
		g.byAddr[addr] = own
	}
	tc.inAll, tc.inAddr = g.all.PushBack(tc), own.PushBack(tc)
	var n uint64
	if victim != nil && now.Sub(g.report) >= capReportEvery {
		n, g.since, g.report = g.since, 0, now
	}
	total := g.closed
	g.mu.Unlock()

	if victim != nil {
		victim.Conn.Close()
		if n > 0 {
			g.log.Warn("the console closed connections that had not shown its token, to stay within its cap: a program may be holding the console's connections open",
				"cap", which, "addr", victim.addr.String(), "closed", n, "closed_total", total)
		}
	}
	return tc, nil
}

// forget takes c off the tokenless lists; g.mu is held.
func (g *gate) forget(c *tconn) {
	if c.inAll == nil {
		return
	}
	g.all.Remove(c.inAll)
	own := g.byAddr[c.addr]
	own.Remove(c.inAddr)
	if own.Len() == 0 {
		delete(g.byAddr, c.addr)
	}
	c.inAll, c.inAddr = nil, nil
}

func (g *gate) stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return Stats{TokenlessConnections: g.all.Len(), TokenlessClosed: g.closed}
}

// trust marks c as the operator's: a request on it carried the token. It
// leaves the caps, and the read deadline is the HTTP server's again.
func (c *tconn) trust() {
	g := c.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if !c.tokenless || c.done {
		return
	}
	c.tokenless = false
	g.forget(c)
	c.Conn.SetReadDeadline(c.asked)
}

// SetReadDeadline is the server's deadline, but never later than the
// connection's own while it is tokenless: a client that never shows the
// token, sending its headers or a body slowly, is cut off all the same.
func (c *tconn) SetReadDeadline(t time.Time) error {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	c.asked = t
	if c.tokenless && (t.IsZero() || t.After(c.deadline)) {
		t = c.deadline
	}
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline is SetReadDeadline and the write deadline.
func (c *tconn) SetDeadline(t time.Time) error {
	if err := c.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

// Close closes the connection and takes it off the caps.
func (c *tconn) Close() error {
	c.g.mu.Lock()
	c.g.forget(c)
	c.done = true
	c.g.mu.Unlock()
	return c.Conn.Close()
}

// connKey is the context key of a request's *tconn.
type connKey struct{}

// withConn is the http.Server's ConnContext: it lets a handler find the
// connection its request came on, to trust it.
func withConn(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tconn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// trustConn marks the connection of ctx as the operator's.
func trustConn(ctx context.Context) {
	if tc, ok := ctx.Value(connKey{}).(*tconn); ok {
		tc.trust()
	}
}

// CloseWrite lets the HTTP server close its side gracefully after a
// response, as it does on a bare TCP connection, so the client reads the
// answer before the connection ends.
func (c *tconn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
