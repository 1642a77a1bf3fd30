// Package console is the daemon's web page: a server, started by
// host.Daemon when [console] listen is set, that serves the page embedded
// in the binary and an HTTP API over the kernel — the newest events of the
// log, a Server-Sent Events stream of the events and of the processes'
// output, and the operator's few actions (send a message, cancel a run
// loop, signal a process, decide an approval), each the kernel method the CLI calls.
//
// Every request must name the configured host (against DNS rebinding) and
// carry the token of $KAIRO_HOME/console.token, as the cookie kairo_console
// or an Authorization: Bearer header; a request that changes something
// must come from the page's own origin (against CSRF) as JSON. The page
// runs under a Content-Security-Policy without inline script. The browser
// gets the cookie from a login page only the operator can read
// (WriteLoginPage) or from the address with the token.
//
// Connections that have not shown the token are bounded per remote address
// and in all, and in the time they have to show it: past a bound the oldest
// is closed and the console says so in its log and /api/status.
package console

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kairo-os/kairo/kernel"
)

// CookieName is the session cookie that carries the token once the page
// was opened with ?token=.
const CookieName = "kairo_console"

// The server's bounds, unless Config says otherwise.
const (
	DefaultMaxStreams   = 16
	DefaultHeartbeat    = 15 * time.Second
	DefaultStreamBuffer = 8 << 20 // bytes queued for one stream client
	maxBody             = 64 << 10
)

// csp allows the page its own files and nothing else: no inline script or
// style, no eval, no frames, no other origin.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Config configures a Server.
type Config struct {
	// Listen is the address, HOST:PORT, as [console] listen gives it
	// (manifests validated it); port 0 picks a free one.
	Listen string
	// AllowRemote lets Listen be an address other than loopback; the
	// server warns when it is.
	AllowRemote bool
	// Home is the data folder: the token lives there (LoadToken).
	Home string
	// Socket is the kernel's socket, which /api/status reports.
	Socket string
	// Kernel is the daemon's kernel: the console calls its methods in
	// process, as the operator, and reads its bus and processes.
	Kernel *kernel.Kernel
	Logger *slog.Logger
	// MaxStreams bounds the /api/stream clients at once (default 16);
	// StreamBuffer the bytes queued for one (default 8 MiB) before it is
	// dropped; Heartbeat the interval of the stream's comment lines
	// (default 15s).
	MaxStreams   int
	StreamBuffer int
	Heartbeat    time.Duration
	// MaxTokenlessPerAddr and MaxTokenless bound the connections open that
	// have not shown the token yet, from one remote address (default 16)
	// and in all (default 64); past a bound the oldest such connection is
	// closed, with a log line. HeaderTimeout is how long a connection has
	// from its accept to send a request with the token, and how long any
	// request's headers may take (default 10s).
	MaxTokenlessPerAddr int
	MaxTokenless        int
	HeaderTimeout       time.Duration
}

// Server is the console's HTTP server. New prepares it, Start serves, Close
// ends it with its streams.
type Server struct {
	cfg   Config
	log   *slog.Logger
	token string

	ln     *gate
	srv    *http.Server
	hosts  map[string]bool // Host headers accepted
	anyIP  bool            // a wildcard address: any IP literal at the port
	port   string
	urlOf  string
	served chan error

	ctx     context.Context // ends the streams and the console's kernel session
	cancel  context.CancelFunc
	sess    *session
	streams chan struct{} // a slot per stream client
	hub     *hub
	runs    runIndex       // which events of the log's newest are in run loops
	answers answerCache    // the last answer to a first read
	wg      sync.WaitGroup // the goroutines the server owns

	closeOnce sync.Once
	closeErr  error
}

// New checks cfg and loads (or makes) the token; the server does not
// listen yet.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Kernel == nil {
		return nil, errors.New("console: Config.Kernel is nil")
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.StreamBuffer <= 0 {
		cfg.StreamBuffer = DefaultStreamBuffer
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.MaxTokenlessPerAddr <= 0 {
		cfg.MaxTokenlessPerAddr = DefaultMaxTokenlessPerAddr
	}
	if cfg.MaxTokenless <= 0 {
		cfg.MaxTokenless = DefaultMaxTokenless
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = DefaultHeaderTimeout
	}
	host, _, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("[console] listen %q: write HOST:PORT, such as \"127.0.0.1:8765\"", cfg.Listen)
	}
	if !loopback(host) && !cfg.AllowRemote {
		return nil, fmt.Errorf("[console] listen %q is not a loopback address: listen on 127.0.0.1, or set [console] allow_remote = true to mean it", cfg.Listen)
	}
	tok, err := LoadToken(cfg.Home)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg: cfg, log: cfg.Logger, token: tok, served: make(chan error, 1),
		ctx: ctx, cancel: cancel, streams: make(chan struct{}, cfg.MaxStreams),
	}
	s.sess = newSession(ctx)
	s.hub = newHub(s)
	return s, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// Start listens and serves until Close. It returns once the listener is
// open.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		s.cancel()
		return fmt.Errorf("the console cannot listen on %s ([console] listen): %w", s.cfg.Listen, err)
	}
	host, _, _ := net.SplitHostPort(s.cfg.Listen)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	s.ln, s.port = newGate(ln, s.cfg.MaxTokenlessPerAddr, s.cfg.MaxTokenless, s.cfg.HeaderTimeout, s.log), port
	s.hosts = map[string]bool{net.JoinHostPort(host, port): true}
	urlHost := net.JoinHostPort(host, port)
	ip, _ := netip.ParseAddr(host)
	switch {
	case host == "localhost":
		s.hosts[net.JoinHostPort("127.0.0.1", port)] = true
		s.hosts[net.JoinHostPort("::1", port)] = true
	case ip.IsLoopback():
		s.hosts[net.JoinHostPort("localhost", port)] = true
	case ip.IsUnspecified():
		// 0.0.0.0 or :: has no name of its own: any address of the
		// machine reaches it, and a DNS name is still refused.
		s.anyIP = true
		urlHost = net.JoinHostPort("127.0.0.1", port)
	}
	if !loopback(host) {
		s.log.Warn("the console listens on an address other machines may reach ([console] allow_remote = true): anyone who reaches it with the token acts as you", "listen", ln.Addr().String())
	}
	s.urlOf = "http://" + urlHost + "/?token=" + s.token
	s.srv = &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: s.cfg.HeaderTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ConnContext:       withConn,
	}
	if err := s.hub.start(); err != nil {
		s.cancel()
		ln.Close()
		return err
	}
	s.wg.Add(1)
	go func() { // owned by the server: ends with Close
		defer s.wg.Done()
		err := s.srv.Serve(s.ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.served <- err
	}()
	s.log.Info("console up", "url", "http://"+urlHost+"/", "run", "kairo console")
	return nil
}

// URL is the page's address with the token, for the operator to open; ""
// before Start.
func (s *Server) URL() string { return s.urlOf }

// Stats is what the console counts of its connections.
type Stats struct {
	// TokenlessConnections are open and have not shown the token yet.
	TokenlessConnections int
	// TokenlessClosed were closed to stay within MaxTokenlessPerAddr or
	// MaxTokenless since Start.
	TokenlessClosed uint64
}

// Stats counts the connections; zero before Start.
func (s *Server) Stats() Stats {
	if s.ln == nil {
		return Stats{}
	}
	return s.ln.stats()
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server: the streams end, the requests in flight get
// until ctx is done to finish, and every goroutine it started returns.
// Later calls return the first's result.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() { s.closeErr = s.close(ctx) })
	return s.closeErr
}

func (s *Server) close(ctx context.Context) error {
	s.cancel()
	var err error
	if s.srv != nil {
		if err = s.srv.Shutdown(ctx); err != nil {
			s.srv.Close()
		}
	}
	s.hub.stop()
	s.wg.Wait()
	// Each stream holds a slot while it runs: all of them taken, every
	// stream handler has returned (their connections are closed by now,
	// so a write that waited on a client has failed).
	for range cap(s.streams) {
		s.streams <- struct{}{}
	}
	return err
}

// handler is the API and the page behind the checks every request passes,
// in order: the Host, the token, and for a POST the origin and the type.
func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/events", s.events)
	mux.HandleFunc("GET /api/stream", s.stream)
	mux.HandleFunc("POST /api/send", s.send)
	mux.HandleFunc("POST /api/cancel", s.cancelRun)
	mux.HandleFunc("POST /api/kill", s.kill)
	mux.HandleFunc("GET /api/plugins", s.plugins)
	mux.HandleFunc("GET /api/tools", s.tools)
	mux.HandleFunc("GET /api/agents", s.agents)
	mux.HandleFunc("GET /api/status", s.status)
	mux.HandleFunc("GET /api/approvals", s.approvals)
	mux.HandleFunc("POST /api/approve", s.approve)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no API "+r.Method+" "+r.URL.Path+"; the README lists the console's API")
	})
	files := http.FileServerFS(assets)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, http.StatusMethodNotAllowed, "the page's files are read with GET")
			return
		}
		if r.URL.Path == "/index.html" || !serveFile(w, r, strings.TrimPrefix(r.URL.Path, "/")) {
			files.ServeHTTP(w, r) // "/index.html" redirects to "/"; a file not there is 404
		}
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if strings.HasPrefix(r.URL.Path, "/api/") {
			h.Set("Cache-Control", "no-store")
		}
		if !s.hostOK(r.Host) {
			h.Set("Connection", "close")
			writeError(w, http.StatusMisdirectedRequest, fmt.Sprintf("the Host %q is not the console's; run `kairo console`, or open the address `kairo console --print` prints", r.Host))
			return
		}
		if r.Method == http.MethodGet && r.URL.Path == "/" && r.URL.Query().Has("token") {
			s.login(w, r)
			return
		}
		if r.URL.Path == LoginPath {
			s.loginForm(w, r)
			return
		}
		bearer, ok := s.authorized(r)
		if ok {
			trustConn(r.Context())
		} else {
			// A connection that showed no token is not kept alive: it
			// would count against the caps while it idles.
			h.Set("Connection", "close")
			h.Set("WWW-Authenticate", `Bearer realm="kairo console"`)
			writeError(w, http.StatusUnauthorized, "no valid token: run `kairo console`, or open the address `kairo console --print` prints, or send Authorization: Bearer $(cat $KAIRO_HOME/console.token)")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if msg := s.sameOrigin(r, bearer); msg != "" {
				writeError(w, http.StatusForbidden, msg)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		}
		mux.ServeHTTP(w, r)
	})
}

// hostOK reports whether host names this server: the configured address
// (for 127.0.0.1 also localhost) at its port. A page of another name that
// resolves here (DNS rebinding) is refused.
func (s *Server) hostOK(host string) bool {
	if s.hosts[host] {
		return true
	}
	if s.anyIP {
		h, port, err := net.SplitHostPort(host)
		if _, perr := netip.ParseAddr(h); err == nil && perr == nil && port == s.port {
			return true
		}
	}
	return false
}

// authorized checks the token of r, from its Authorization header or its
// cookie; bearer says it came in the header.
func (s *Server) authorized(r *http.Request) (bearer, ok bool) {
	if a := r.Header.Get("Authorization"); a != "" {
		scheme, tok, _ := strings.Cut(a, " ")
		return true, strings.EqualFold(scheme, "Bearer") && s.tokenOK(strings.TrimSpace(tok))
	}
	c, err := r.Cookie(CookieName)
	return false, err == nil && s.tokenOK(c.Value)
}

func (s *Server) tokenOK(tok string) bool {
	return subtle.ConstantTimeCompare([]byte(tok), []byte(s.token)) == 1
}

// sameOrigin says why a request that changes something is refused, or "":
// it must come from the page's origin (a script with the Bearer header may
// send none) and carry JSON, which a form of another site cannot send.
func (s *Server) sameOrigin(r *http.Request, bearer bool) string {
	origin := r.Header.Get("Origin")
	switch {
	case origin == "" && !bearer:
		return "a request that changes something must carry the page's Origin (or an Authorization: Bearer header, from a script)"
	case origin != "" && origin != "http://"+r.Host:
		return fmt.Sprintf("the Origin %q is not the console's (http://%s): a page of another site may not act here", origin, r.Host)
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return "send the body as JSON, with Content-Type: application/json"
	}
	return ""
}

// pid is the daemon's, for the console's Caller.
var pid = os.Getpid()
