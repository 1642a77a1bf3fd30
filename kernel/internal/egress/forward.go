package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync"
	"time"
)

// forwarder serves plain HTTP forward-proxy requests (absolute URI) with
// its own Transport: no proxy of its own, the proxy's dial (so resolution
// and the address checks apply), and no redirects followed — a redirect
// goes back to the client, whose follow-up request is checked again.
type forwarder struct {
	p  *Proxy
	tr *http.Transport
	rp *httputil.ReverseProxy
}

func newForwarder(p *Proxy) *forwarder {
	f := &forwarder{p: p}
	f.tr = &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, portStr, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			port, _ := strconv.Atoi(portStr)
			return p.dial(ctx, host, port)
		},
		DisableCompression:     true, // pass the body through as the server sent it
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    8,
		IdleConnTimeout:        90 * time.Second,
		ResponseHeaderTimeout:  p.cfg.IdleTimeout,
		MaxResponseHeaderBytes: int64(p.cfg.MaxHeaderBytes) * 4,
	}
	f.rp = &httputil.ReverseProxy{
		Transport: f.tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.RequestURI = ""
		},
		ErrorHandler: f.failed,
		ErrorLog:     quiet,
	}
	return f
}

func (f *forwarder) close() { f.tr.CloseIdleConnections() }

type reqInfo struct {
	host, method string
	port         int
}

type reqInfoKey struct{}

func (f *forwarder) serve(w http.ResponseWriter, r *http.Request) {
	u := r.URL
	if !u.IsAbs() || u.Host == "" {
		refuse(w, http.StatusBadRequest, "this is an egress proxy: send an absolute URI (http://host/path) or CONNECT host:port")
		return
	}
	if u.Scheme != "http" {
		refuse(w, http.StatusBadRequest, "scheme "+strconv.Quote(u.Scheme)+" is not forwarded; use CONNECT for https")
		return
	}
	if r.Header.Get("Upgrade") != "" {
		refuse(w, http.StatusNotImplemented, "protocol upgrades over plain HTTP are not forwarded; use CONNECT")
		return
	}
	host := u.Hostname()
	port := 80
	if ps := u.Port(); ps != "" {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 || n > 65535 {
			refuse(w, http.StatusBadRequest, "port "+strconv.Quote(ps)+" is not a number from 1 to 65535")
			return
		}
		port = n
	}
	if !f.p.checkHost(w, host, port, r.Method) {
		return
	}

	// An exchange with no byte moved for IdleTimeout is cut: the timer
	// cancels the upstream request and ends a stalled write to the client.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	it := &idleTimer{d: f.p.cfg.IdleTimeout}
	rc := http.NewResponseController(w)
	it.start(func() {
		cancel()
		rc.SetWriteDeadline(time.Now())
	})
	defer it.stop()
	kick := it.kick

	r = r.WithContext(context.WithValue(ctx, reqInfoKey{}, reqInfo{host, r.Method, port}))
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &kickReader{ReadCloser: r.Body, kick: kick}
	}
	rp := *f.rp
	rp.ModifyResponse = func(resp *http.Response) error {
		resp.Body = &kickReader{ReadCloser: resp.Body, kick: kick}
		return nil
	}
	rp.ServeHTTP(w, r)
}

// failed answers a request the transport could not complete.
func (f *forwarder) failed(w http.ResponseWriter, r *http.Request, err error) {
	info, _ := r.Context().Value(reqInfoKey{}).(reqInfo)
	var de *denyError
	switch {
	case errors.As(err, &de):
		f.p.deny(w, info.host, info.port, info.method, de.reason)
	case r.Context().Err() != nil:
		refuse(w, http.StatusGatewayTimeout, "the exchange was idle or cancelled: "+err.Error())
	default:
		var ue *upstreamError
		if errors.As(err, &ue) {
			refuse(w, http.StatusBadGateway, ue.Error())
			return
		}
		refuse(w, http.StatusBadGateway, "upstream: "+err.Error())
	}
}

// kickReader renews the idle timer on every read.
type kickReader struct {
	io.ReadCloser
	kick func()
}

func (k *kickReader) Read(b []byte) (int, error) {
	n, err := k.ReadCloser.Read(b)
	if n > 0 {
		k.kick()
	}
	return n, err
}

// idleTimer runs its function once no kick came for d. After stop returns
// the function is not running and never will: a request body can still be
// read by the transport after the handler ends, and a late write deadline
// would break the next request on the client's connection.
type idleTimer struct {
	d       time.Duration
	mu      sync.Mutex // guards stopped and the function's run
	stopped bool
	t       *time.Timer
}

func (it *idleTimer) start(fn func()) {
	it.t = time.AfterFunc(it.d, func() {
		it.mu.Lock()
		defer it.mu.Unlock()
		if !it.stopped {
			it.stopped = true
			fn()
		}
	})
}

func (it *idleTimer) kick() {
	it.mu.Lock()
	if !it.stopped {
		it.t.Reset(it.d)
	}
	it.mu.Unlock()
}

func (it *idleTimer) stop() {
	it.mu.Lock()
	it.stopped = true
	it.t.Stop()
	it.mu.Unlock()
}
