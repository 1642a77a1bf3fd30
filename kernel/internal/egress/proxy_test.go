package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/manifests"
)

// loopbackResolver maps every name under example.com (the test
// certificate's names) to 127.0.0.1, so no test touches real DNS.
func loopbackResolver(_ context.Context, host string) ([]netip.Addr, error) {
	if host == "example.com" || strings.HasSuffix(host, ".example.com") {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return nil, fmt.Errorf("no such host %s (test resolver)", host)
}

// denials collects what OnDenied receives.
type denials struct {
	mu   sync.Mutex
	list []Denial
}

func (d *denials) add(x Denial) {
	d.mu.Lock()
	d.list = append(d.list, x)
	d.mu.Unlock()
}

func (d *denials) get() []Denial {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Denial(nil), d.list...)
}

// startProxy starts a proxy for hosts with the test resolver; cfg's other
// fields are kept. Close runs at cleanup (again is harmless).
func startProxy(t testing.TB, cfg Config, hosts ...string) (*Proxy, *denials) {
	t.Helper()
	rules, err := manifests.ParseEgressRules(hosts)
	if err != nil {
		t.Fatal(err)
	}
	d := &denials{}
	cfg.Rules = rules
	if cfg.Resolve == nil {
		cfg.Resolve = loopbackResolver
		cfg.AllowLocal = true
	}
	cfg.OnDenied = d.add
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, d
}

// client returns srv's client (it trusts srv's certificate) going through p.
func client(srv *httptest.Server, p *Proxy) *http.Client {
	tr := srv.Client().Transport.(*http.Transport).Clone()
	u, err := url.Parse(p.URL())
	if err != nil {
		panic(err)
	}
	tr.Proxy = http.ProxyURL(u)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

func port(srv *httptest.Server) string {
	return srv.URL[strings.LastIndex(srv.URL, ":")+1:]
}

func hello(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.Host) }

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body: %v", u, err)
	}
	return resp.StatusCode, string(b)
}

// rawConnect sends a CONNECT on a new connection and returns the
// connection and the proxy's response head (the body read when not 200).
func rawConnect(t *testing.T, p *Proxy, target string) (net.Conn, int, string) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\n\r\n", target, target, p.auth)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	body := ""
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
	}
	c.SetReadDeadline(time.Time{})
	return c, resp.StatusCode, body
}

func TestConnectListedHost(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(hello))
	defer srv.Close()
	p, d := startProxy(t, Config{}, "api.example.com:"+port(srv))
	code, body := get(t, client(srv, p), "https://api.example.com:"+port(srv)+"/")
	if code != 200 || body != "hello api.example.com:"+port(srv) {
		t.Fatalf("got %d %q", code, body)
	}
	p.Close()
	if got := d.get(); len(got) != 0 {
		t.Errorf("denials for an allowed host: %+v", got)
	}
}

func TestConnectUnlistedRefusedAndCoalesced(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(hello))
	defer srv.Close()
	p, d := startProxy(t, Config{DenialWindow: time.Hour}, "api.example.com:"+port(srv))
	target := "evil.example.com:" + port(srv)

	_, code, body := rawConnect(t, p, target)
	want := "kairo egress: evil.example.com port " + port(srv) + " is not in this sandbox's [net] hosts list\n"
	if code != http.StatusForbidden || body != want {
		t.Fatalf("CONNECT %s: %d %q, want 403 %q", target, code, body, want)
	}
	c := client(srv, p)
	const tries = 300
	for i := 1; i < tries; i++ {
		if _, err := c.Get("https://" + target + "/"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Fatalf("try %d: err %v, want Forbidden", i, err)
		}
	}
	// Control: the listed host still goes through.
	if code, _ := get(t, c, "https://api.example.com:"+port(srv)+"/"); code != 200 {
		t.Fatalf("listed host: %d", code)
	}
	p.Close() // reports the pending count
	got := d.get()
	if len(got) != 2 {
		t.Fatalf("want 2 reports (the first, then the coalesced rest), got %d: %+v", len(got), got)
	}
	total := 0
	for _, x := range got {
		if x.Host != "evil.example.com" || fmt.Sprint(x.Port) != port(srv) || x.Method != "CONNECT" || x.Reason+"\n" != strings.TrimPrefix(want, "kairo egress: ") {
			t.Errorf("report %+v", x)
		}
		total += x.Count
	}
	if got[0].Count != 1 || total != tries {
		t.Errorf("counts %d then %d, want 1 then %d", got[0].Count, got[1].Count, tries-1)
	}
}

func TestDenialWindowReportsAgain(t *testing.T) {
	p, d := startProxy(t, Config{DenialWindow: 200 * time.Millisecond}, "api.example.com")
	for range 5 {
		rawConnect(t, p, "evil.example.com:443")
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(d.get()) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	got := d.get()
	if len(got) != 2 || got[0].Count != 1 || got[1].Count != 4 {
		t.Fatalf("want reports of 1 and then 4 within the window's end, got %+v", got)
	}
}

func TestPlainHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			io.WriteString(w, "got "+string(b))
			return
		}
		hello(w, r)
	}))
	defer srv.Close()
	p, d := startProxy(t, Config{}, "api.example.com:"+port(srv))
	c := client(srv, p)
	if code, body := get(t, c, "http://api.example.com:"+port(srv)+"/x"); code != 200 || body != "hello api.example.com:"+port(srv) {
		t.Fatalf("listed: %d %q", code, body)
	}
	resp, err := c.Post("http://api.example.com:"+port(srv)+"/", "text/plain", strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "got payload" {
		t.Fatalf("POST: %q", b)
	}
	code, body := get(t, c, "http://evil.example.com:"+port(srv)+"/x")
	if code != http.StatusForbidden || !strings.Contains(body, "evil.example.com port "+port(srv)+" is not in") {
		t.Fatalf("unlisted: %d %q", code, body)
	}
	p.Close()
	if got := d.get(); len(got) != 1 || got[0].Method != "GET" || got[0].Host != "evil.example.com" {
		t.Fatalf("denials %+v", got)
	}
}

func TestRedirectIsCheckedAgain(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(hello))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, "http://evil.example.com:"+port(other)+"/", http.StatusFound)
		case "/here":
			http.Redirect(w, r, "/done", http.StatusFound)
		default:
			hello(w, r)
		}
	}))
	defer srv.Close()
	p, d := startProxy(t, Config{}, "api.example.com:"+port(srv))
	c := client(srv, p)
	base := "http://api.example.com:" + port(srv)
	if code, _ := get(t, c, base+"/here"); code != 200 {
		t.Fatalf("redirect within the listed host: %d", code)
	}
	code, body := get(t, c, base+"/away")
	if code != http.StatusForbidden || !strings.Contains(body, "evil.example.com") {
		t.Fatalf("redirect to an unlisted host: %d %q", code, body)
	}
	p.Close()
	if got := d.get(); len(got) != 1 || got[0].Host != "evil.example.com" {
		t.Fatalf("denials %+v", got)
	}
}

func TestRedirectOverHTTPSIsCheckedAgain(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://evil.example.com:"+port2(r)+"/", http.StatusFound)
	}))
	defer srv.Close()
	p, d := startProxy(t, Config{}, "api.example.com:"+port(srv))
	_, err := client(srv, p).Get("https://api.example.com:" + port(srv) + "/")
	if err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("err %v, want the follow-up CONNECT refused", err)
	}
	p.Close()
	if got := d.get(); len(got) != 1 || got[0].Host != "evil.example.com" || got[0].Method != "CONNECT" {
		t.Fatalf("denials %+v", got)
	}
}

func port2(r *http.Request) string { return r.Host[strings.LastIndex(r.Host, ":")+1:] }

func TestConnectIPLiteral(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(hello))
	defer srv.Close()
	u := "https://127.0.0.1:" + port(srv) + "/"

	p, d := startProxy(t, Config{}, "api.example.com:"+port(srv), "example.com:"+port(srv))
	if _, err := client(srv, p).Get(u); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("unlisted literal (its name is listed): err %v, want Forbidden", err)
	}
	p.Close()
	if got := d.get(); len(got) != 1 || got[0].Host != "127.0.0.1" {
		t.Fatalf("denials %+v", got)
	}

	p, _ = startProxy(t, Config{}, "127.0.0.1:"+port(srv))
	if code, _ := get(t, client(srv, p), u); code != 200 {
		t.Fatalf("listed literal: %d", code)
	}
}

func TestNameResolvingToLoopback(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(hello))
	defer srv.Close()
	target := "api.example.com:" + port(srv)
	// Without AllowLocal a listed name that resolves to loopback is refused.
	p, d := startProxy(t, Config{Resolve: loopbackResolver}, target)
	_, code, body := rawConnect(t, p, target)
	if code != http.StatusForbidden || !strings.Contains(body, "resolves only to addresses the proxy does not dial (127.0.0.1: loopback)") {
		t.Fatalf("%d %q", code, body)
	}
	p.Close()
	if got := d.get(); len(got) != 1 || !strings.Contains(got[0].Reason, "127.0.0.1") {
		t.Fatalf("denials %+v", got)
	}
	// Control: with AllowLocal it goes through.
	p, _ = startProxy(t, Config{Resolve: loopbackResolver, AllowLocal: true}, target)
	if _, code, _ := rawConnect(t, p, target); code != 200 {
		t.Fatalf("AllowLocal: %d", code)
	}
	// Unspecified addresses and the proxy itself are refused even so.
	zero := func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("::")}, nil
	}
	p, _ = startProxy(t, Config{Resolve: zero, AllowLocal: true}, target)
	if _, code, _ := rawConnect(t, p, target); code != http.StatusForbidden {
		t.Fatalf("0.0.0.0: %d", code)
	}
	// Nor does the proxy dial itself, even as a listed literal.
	self := p.Addr()
	if ok, _ := p.addrOK(self.Addr(), int(self.Port()), self.Addr().String(), true); ok {
		t.Error("the proxy would dial its own address")
	}
}

func TestConnectionCap(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(hello))
	defer srv.Close()
	target := "api.example.com:" + port(srv)
	p, _ := startProxy(t, Config{MaxConns: 2}, target)
	c1, code, _ := rawConnect(t, p, target)
	_, code2, _ := rawConnect(t, p, target)
	if code != 200 || code2 != 200 {
		t.Fatalf("two tunnels: %d %d", code, code2)
	}
	_, code, body := rawConnect(t, p, target)
	if code != http.StatusServiceUnavailable || body != "kairo egress: too many connections through the egress proxy (limit 2)\n" {
		t.Fatalf("third: %d %q", code, body)
	}
	// Control: once a tunnel ends its slot is free again.
	c1.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, code, _ := rawConnect(t, p, target)
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot not given back: %d", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTunnelIdleTimeout(t *testing.T) {
	// An upstream that echoes what it gets and never closes first.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); defer c.Close(); io.Copy(c, c) }()
		}
	}()
	target := "127.0.0.1:" + fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	idle := 400 * time.Millisecond
	p, _ := startProxy(t, Config{IdleTimeout: idle}, target)
	defer func() {
		ln.Close()
		p.Close() // closes the upstream ends, so the echo goroutines end
		wg.Wait()
	}()

	busy, code, _ := rawConnect(t, p, target)
	quiet, code2, _ := rawConnect(t, p, target)
	if code != 200 || code2 != 200 {
		t.Fatalf("%d %d", code, code2)
	}
	// The busy tunnel moves a byte every idle/4 for 4 idle periods.
	buf := make([]byte, 1)
	for range 16 {
		time.Sleep(idle / 4)
		busy.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := busy.Write([]byte{'x'}); err != nil {
			t.Fatalf("busy tunnel closed: %v", err)
		}
		if _, err := io.ReadFull(busy, buf); err != nil {
			t.Fatalf("busy tunnel closed: %v", err)
		}
	}
	// The quiet one is closed by now.
	quiet.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := quiet.Read(buf); err != io.EOF {
		t.Fatalf("quiet tunnel: read %d, %v; want EOF", n, err)
	}
}

// egressFrames lists the goroutines running code of this package, other
// than the tests'.
func egressFrames() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "internal/egress.") && !strings.Contains(g, "testing.tRunner") {
			out = append(out, g)
		}
	}
	return out
}

func TestCloseStopsEverything(t *testing.T) {
	tls := httptest.NewTLSServer(http.HandlerFunc(hello))
	plain := httptest.NewServer(http.HandlerFunc(hello))
	before := runtime.NumGoroutine()

	p, _ := startProxy(t, Config{MaxConns: 3, DenialWindow: time.Hour}, "api.example.com:"+port(tls), "api.example.com:"+port(plain))
	tunnel, code, _ := rawConnect(t, p, "api.example.com:"+port(tls)) // open, idle
	if code != 200 {
		t.Fatal(code)
	}
	rawConnect(t, p, "evil.example.com:443") // a denial pending report
	// A keep-alive plain HTTP connection, left open after its request.
	kc := client(plain, p)
	if code, _ := get(t, kc, "http://api.example.com:"+port(plain)+"/"); code != 200 {
		t.Fatal(code)
	}
	half, _ := net.Dial("tcp", p.Addr().String()) // a request head never finished
	defer half.Close()
	io.WriteString(half, "GET http://api.example.com/ HTTP/1.1\r\n")

	start := time.Now()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Close took %v", d)
	}
	// A goroutine that has said it is done (the WaitGroup Close waits
	// on) may still be returning from its last deferred call: a moment
	// for it to be gone, but no goroutine may be left working.
	g := egressFrames()
	for deadline := time.Now().Add(time.Second); len(g) > 0 && time.Now().Before(deadline); g = egressFrames() {
		time.Sleep(10 * time.Millisecond)
	}
	if len(g) > 0 {
		t.Errorf("goroutines of the proxy after Close:\n%s", strings.Join(g, "\n\n"))
	}
	tunnel.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := tunnel.Read(make([]byte, 1)); err == nil {
		t.Error("tunnel still open after Close")
	}
	if _, err := net.Dial("tcp", p.Addr().String()); err == nil {
		t.Error("still listening after Close")
	}
	kc.CloseIdleConnections()
	half.Close()
	tunnel.Close()
	tls.Close()
	plain.Close()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

func TestEnv(t *testing.T) {
	p, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Env() != nil {
		t.Error("Env before Start")
	}
	p, _ = startProxy(t, Config{})
	env := strings.Join(p.Env(), " ")
	u := "http://kairo:" + p.secret + "@" + p.Addr().String()
	for _, want := range []string{"HTTPS_PROXY=" + u, "https_proxy=" + u, "http_proxy=" + u, "ALL_PROXY=" + u, "NO_PROXY= "} {
		if !strings.Contains(env+" ", want) {
			t.Errorf("Env %q lacks %q", env, want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		says string
	}{
		{Config{IdleTimeout: -1}, "Config.IdleTimeout"},
		{Config{DenialWindow: -time.Second}, "Config.DenialWindow"},
		{Config{MaxConns: -1}, "Config.MaxConns"},
	} {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("New(%+v): %v, want it to name %s", c.cfg, err, c.says)
		}
	}
}

func TestHeaderBounds(t *testing.T) {
	p, _ := startProxy(t, Config{MaxHeaderBytes: 4 << 10, ReadHeaderTimeout: 300 * time.Millisecond}, "api.example.com")

	big, err := net.Dial("tcp", p.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	fmt.Fprintf(big, "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 64<<10))
	big.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(big), nil)
	if err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("64 KiB header: %v %v, want 431", resp, err)
	}

	slow, err := net.Dial("tcp", p.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	io.WriteString(slow, "GET http://api.example.com/ HTTP/1.1\r\n") // and no more
	start := time.Now()
	slow.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(slow); err != nil || time.Since(start) > 3*time.Second {
		t.Fatalf("unfinished header: closed after %v with %v, want closed within the timeout", time.Since(start), err)
	}
}

// TestReportNow: with ReportNow each refusal reaches OnDenied before the
// client has its 403, one by one; without it (the control) the first is
// reported and the rest wait for the window.
func TestReportNow(t *testing.T) {
	for _, now := range []bool{true, false} {
		p, d := startProxy(t, Config{DenialWindow: time.Hour, ReportNow: now}, "api.example.com")
		for i := 1; i <= 3; i++ {
			if _, code, _ := rawConnect(t, p, "evil.example.com:443"); code != http.StatusForbidden {
				t.Fatalf("CONNECT: %d, want 403", code)
			}
			got := d.get()
			if !now {
				continue
			}
			if len(got) != i || got[i-1].Host != "evil.example.com" || got[i-1].Port != 443 || got[i-1].Count != 1 {
				t.Fatalf("ReportNow: after refusal %d the reports are %+v, want %d of count 1", i, got, i)
			}
		}
		if !now {
			p.Close()
			if got := d.get(); len(got) != 2 || got[0].Count != 1 || got[1].Count != 2 {
				t.Errorf("coalesced: %+v, want 1 then 2", got)
			}
		}
	}
}
