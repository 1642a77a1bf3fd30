package egress

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kairo-os/kairo/manifests"
)

// Config configures a Proxy. The zero value is usable and allows no host;
// New fills the defaults named on each field.
type Config struct {
	// Rules are the hosts the tree may reach; nil allows none.
	Rules *manifests.EgressRules
	// Resolve looks up a host name; default net.DefaultResolver's
	// LookupNetIP for "ip". Tests map names to loopback servers with it.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// OnDenied receives the refusals, coalesced per (host, port) within
	// DenialWindow, from one goroutine at a time; it may block without
	// holding up the proxy, but Close waits for it. See ReportNow for
	// the other way.
	OnDenied func(Denial)
	// DenialWindow is how long further refusals of one (host, port) are
	// counted before they are reported as one Denial; default 10s.
	DenialWindow time.Duration
	// ReportNow gives OnDenied each refusal as it happens, with Count 1,
	// in the request's own goroutine before the client reads its 403:
	// for a caller that coalesces refusals itself and must hold each one
	// before the client can act on it (the kernel publishes a tree's
	// refusals before its exit). OnDenied must then be quick and safe for
	// concurrent use; DenialWindow is unused.
	ReportNow bool
	// AllowLocal lets a listed name resolve to any address that is not
	// public: loopback, link-local, private, shared (CGNAT) and the
	// machine's own. Without it a name reaches those only when the
	// address itself is listed as an IP literal for that port (and a
	// "localhost" name its loopback), so a listed public name that
	// someone points at 127.0.0.1, 10.0.0.1 or 169.254.169.254 cannot
	// reach the host's or the network's own services. For tests.
	AllowLocal bool
	// PeerUID, when positive, is the only uid whose sockets the proxy
	// serves: a connection from a socket of another uid is closed as it
	// is accepted, before it counts against MaxConns or is read. The
	// kernel gives the tree's sandbox uid (or its own, for trees that run
	// as it). Linux only, through sock_diag; Start fails if the kernel
	// cannot tell a connection's uid.
	PeerUID int
	// MaxConns bounds the client connections open at once; past it a
	// client gets a 503 with the reason. Default 256.
	MaxConns int
	// MaxHeaderBytes bounds a request's header; default 16 KiB.
	MaxHeaderBytes int
	// ReadHeaderTimeout bounds the time to read a request's header; also
	// the keep-alive wait between requests. Default 10s.
	ReadHeaderTimeout time.Duration
	// DialTimeout bounds resolving and connecting to an upstream; default 10s.
	DialTimeout time.Duration
	// IdleTimeout closes a tunnel or a forwarded exchange with no byte
	// moved in either direction for this long; default 5 minutes.
	IdleTimeout time.Duration
}

func (c *Config) fill() error {
	if c.Resolve == nil {
		c.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"DenialWindow", &c.DenialWindow, 10 * time.Second},
		{"ReadHeaderTimeout", &c.ReadHeaderTimeout, 10 * time.Second},
		{"DialTimeout", &c.DialTimeout, 10 * time.Second},
		{"IdleTimeout", &c.IdleTimeout, 5 * time.Minute},
	} {
		if *f.v < 0 {
			return fmt.Errorf("egress: Config.%s is negative (%v); leave it 0 for the default", f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if c.MaxConns < 0 || c.MaxHeaderBytes < 0 {
		return fmt.Errorf("egress: Config.MaxConns (%d) and MaxHeaderBytes (%d) must not be negative", c.MaxConns, c.MaxHeaderBytes)
	}
	if c.MaxConns == 0 {
		c.MaxConns = 256
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = 16 << 10
	}
	return nil
}

// Proxy is a loopback egress proxy: HTTP CONNECT tunnels and plain HTTP
// forward requests, to the hosts its Rules allow only. Its lifecycle is
// New, Start, then Close, which stops every goroutine it started.
type Proxy struct {
	cfg      Config
	srv      *http.Server
	fwd      *forwarder
	reporter *reporter
	ln       net.Listener
	self     netip.AddrPort // the listening address, never dialed
	secret   string         // the password of the proxy's URL
	auth     string         // the Proxy-Authorization every request must carry
	locals   localAddrs     // the machine's own addresses, refreshed now and then

	mu       sync.Mutex // guards closed, active, conns and the Adds of handlers
	closed   bool
	active   int                       // client connections open
	conns    map[*net.TCPConn]struct{} // clients and tunnel upstreams, closed by Close
	handlers sync.WaitGroup            // handlers and tunnel halves
	serving  sync.WaitGroup            // Serve, the reporter, the http.Server's connections, refusals
	refusing chan struct{}             // semaphore for connections refused over the cap
}

// New checks cfg and returns a Proxy that is not listening yet.
func New(cfg Config) (*Proxy, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("egress: a secret for the proxy's URL: %w", err)
	}
	secret := hex.EncodeToString(b[:])
	p := &Proxy{
		cfg:      cfg,
		secret:   secret,
		auth:     "Basic " + base64.StdEncoding.EncodeToString([]byte(proxyUser+":"+secret)),
		conns:    map[*net.TCPConn]struct{}{},
		refusing: make(chan struct{}, 32),
	}
	onDenied := cfg.OnDenied
	if cfg.ReportNow {
		onDenied = nil // deny calls it; the reporter only waits for Close
	}
	p.reporter = newReporter(onDenied, cfg.DenialWindow)
	p.fwd = newForwarder(p)
	p.srv = &http.Server{
		Handler:           p,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.ReadHeaderTimeout,
		ErrorLog:          quiet, // refusals reach the client and OnDenied, not a log
		ConnState:         p.connState,
	}
	return p, nil
}

// Start listens on 127.0.0.1 on a port the kernel picks (see Addr) and
// serves until Close.
func (p *Proxy) Start() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("egress: listen on loopback: %w", err)
	}
	if p.cfg.PeerUID > 0 {
		// A proxy that cannot tell whose a connection is would serve any
		// local user: it does not start.
		if err := checkPeerUID(ln.(*net.TCPListener)); err != nil {
			ln.Close()
			return fmt.Errorf("egress: Config.PeerUID is set, but %w", err)
		}
	}
	p.mu.Lock()
	if p.closed || p.ln != nil {
		p.mu.Unlock()
		ln.Close()
		return errors.New("egress: Start called twice or after Close")
	}
	p.ln = ln
	p.self = ln.Addr().(*net.TCPAddr).AddrPort()
	p.mu.Unlock()
	p.serving.Add(2)
	go func() {
		defer p.serving.Done()
		p.reporter.run()
	}()
	go func() {
		defer p.serving.Done()
		p.srv.Serve(&limitListener{TCPListener: ln.(*net.TCPListener), p: p})
	}()
	return nil
}

// Addr is the address the proxy listens on, for HTTPS_PROXY and the
// sandbox's one TCP grant; invalid before Start.
func (p *Proxy) Addr() netip.AddrPort {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.self
}

// Close stops listening, closes every connection and tunnel, reports the
// denials still pending and returns when every goroutine of the proxy
// has ended.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	started := p.ln != nil
	p.mu.Unlock()
	if !started {
		return nil
	}
	err := p.srv.Close()
	p.handlers.Wait()
	p.fwd.close()
	p.reporter.close()
	p.serving.Wait()
	return err
}

// track registers a connection for Close; false if the proxy is closing
// (the caller closes it).
func (p *Proxy) track(c *net.TCPConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c *net.TCPConn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// begin counts a handler for Close to wait on; false if closing.
func (p *Proxy) begin() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.handlers.Add(1)
	return true
}

// connState counts the http.Server's connection goroutines, so Close can
// wait for them: the Add runs in Serve before the goroutine starts.
func (p *Proxy) connState(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		p.serving.Add(1)
	case http.StateHijacked, http.StateClosed:
		p.serving.Done()
	}
}

// ServeHTTP checks the request's Proxy-Authorization, then dispatches a
// CONNECT to a tunnel and an absolute-URI request to the forwarder.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.begin() {
		refuse(w, http.StatusServiceUnavailable, "the proxy is shutting down")
		return
	}
	defer p.handlers.Done()
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("Proxy-Authorization")), []byte(p.auth)) != 1 {
		// Not the tree's: no Denial, so nothing of it reaches the tree's
		// refusals or a re-run request.
		w.Header().Set("Proxy-Authenticate", `Basic realm="kairo egress"`)
		refuse(w, http.StatusProxyAuthRequired, "this proxy serves one sandbox: use the URL in its HTTPS_PROXY, with its credentials")
		return
	}
	r.Header.Del("Proxy-Authorization")
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	p.fwd.serve(w, r)
}

// quiet drops the net/http logs (a client that hung up mid-copy); what
// matters reaches the client and OnDenied.
var quiet = log.New(io.Discard, "", 0)

// deny refuses a request with a 403 and reports it, under the host's
// normal form so EXAMPLE.com. and example.com coalesce.
func (p *Proxy) deny(w http.ResponseWriter, host string, port int, method, reason string) {
	host = manifests.NormalHost(host)
	d := Denial{Host: host, Port: port, Method: method, Reason: reason}
	if p.cfg.ReportNow {
		if p.cfg.OnDenied != nil {
			d.Count = 1
			p.cfg.OnDenied(d)
		}
	} else {
		p.reporter.add(d)
	}
	refuse(w, http.StatusForbidden, reason)
}

// notAHost is the reason for a host that is not one host name or
// address: a pattern, which no re-run may grant.
func notAHost(host string) string {
	return fmt.Sprintf("%q is not a host name or an IP address; the proxy connects to one host, never a pattern", host)
}

// checkHost refuses a host that is not plain, or not listed for port;
// false if it refused.
func (p *Proxy) checkHost(w http.ResponseWriter, host string, port int, method string) bool {
	switch {
	case !manifests.IsPlainHost(host):
		p.deny(w, host, port, method, notAHost(host))
		return false
	case !p.cfg.Rules.Allow(host, port):
		p.deny(w, host, port, method, notListed(host, port))
		return false
	}
	return true
}

// notListed is the reason for a host the rules do not allow.
func notListed(host string, port int) string {
	return fmt.Sprintf("%s port %d is not in this sandbox's [net] hosts list", host, port)
}

// refuse writes a one-line plain-text reason the client's process can
// read, also in the X-Kairo-Egress header for clients that hide bodies.
func refuse(w http.ResponseWriter, code int, reason string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Kairo-Egress", reason)
	w.Header().Set("Connection", "close")
	w.WriteHeader(code)
	fmt.Fprintf(w, "kairo egress: %s\n", reason)
}

// limitListener counts client connections and refuses those past
// MaxConns with a 503 before the http.Server sees them.
type limitListener struct {
	*net.TCPListener
	p *Proxy
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptTCP()
		if err != nil {
			return nil, err
		}
		p := l.p
		if p.cfg.PeerUID > 0 {
			if uid, err := peerUID(c); err != nil || uid != p.cfg.PeerUID {
				// Another user's (or one whose owner cannot be told): not
				// the tree's, so it takes no slot and gets no answer.
				c.Close()
				continue
			}
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return nil, net.ErrClosed
		}
		over := p.active >= p.cfg.MaxConns
		if !over {
			// Tracked from here, so Close reaches it in every state:
			// new, serving, hijacked into a tunnel.
			p.active++
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		if !over {
			return &clientConn{TCPConn: c, p: p}, nil
		}
		select {
		case p.refusing <- struct{}{}:
			p.serving.Add(1)
			go func() {
				defer p.serving.Done()
				defer func() { <-p.refusing }()
				p.refuseOverCap(c)
			}()
		default:
			c.Close() // a flood: not even a 503
		}
	}
}

// refuseOverCap reads the request head (briefly), so the client sees the
// 503 rather than a reset, then closes.
func (p *Proxy) refuseOverCap(c *net.TCPConn) {
	defer c.Close()
	if !p.track(c) {
		return
	}
	defer p.untrack(c)
	c.SetDeadline(time.Now().Add(time.Second))
	br := bufio.NewReaderSize(c, 4096)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil || len(line) <= 2 {
			break
		}
	}
	reason := "too many connections through the egress proxy (limit " + strconv.Itoa(p.cfg.MaxConns) + ")"
	body := "kairo egress: " + reason + "\n"
	fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nX-Kairo-Egress: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", reason, len(body), body)
	c.CloseWrite()
}

// clientConn gives back its slot, and leaves the set Close closes, when
// it is closed, once.
type clientConn struct {
	*net.TCPConn
	p    *Proxy
	once sync.Once
}

func (c *clientConn) Close() error {
	err := c.TCPConn.Close()
	c.once.Do(func() {
		c.p.mu.Lock()
		c.p.active--
		delete(c.p.conns, c.TCPConn)
		c.p.mu.Unlock()
	})
	return err
}

// proxyUser is the user name of the proxy's URL; the password is the
// proxy's secret.
const proxyUser = "kairo"

// URL is the proxy's URL with its credentials,
// http://kairo:SECRET@127.0.0.1:PORT: every request must carry them
// (Proxy-Authorization: Basic), which curl, Python's requests and urllib
// and Go's net/http send on their own when HTTPS_PROXY holds such a URL.
// The secret is the proxy's, made by New; whoever holds the URL may use
// the proxy, so it goes to the tree's environment only (never a command
// line or an event). Empty before Start.
func (p *Proxy) URL() string {
	a := p.Addr()
	if !a.IsValid() {
		return ""
	}
	return "http://" + proxyUser + ":" + p.secret + "@" + a.String()
}

// Env is the environment that sends a tree's HTTP clients through the
// proxy: HTTP_PROXY, HTTPS_PROXY and ALL_PROXY in both cases (curl reads
// only lowercase http_proxy; Go and Python read both), set to URL, and an
// empty NO_PROXY so an inherited one bypasses nothing. Nil before Start.
func (p *Proxy) Env() []string {
	u := p.URL()
	if u == "" {
		return nil
	}
	var env []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env = append(env, k+"="+u, strings.ToLower(k)+"="+u)
	}
	return append(env, "NO_PROXY=", "no_proxy=")
}
