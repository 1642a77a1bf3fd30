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
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/manifests"
)

// rawRequest sends head (request line and headers, without the blank
// line) on a new connection and returns the proxy's status and body.
func rawRequest(t *testing.T, p *Proxy, head string) (int, string, http.Header) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, head+"\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	method, _, _ := strings.Cut(head, " ")
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s: %v", head, err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestProxyAuthorization: a request without the tree's credentials, or
// with wrong ones, gets a 407 and is no Denial, even for a host the tree
// may not reach; the control, the same requests with the credentials, go
// through or are refused and reported as the tree's.
func TestProxyAuthorization(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(hello))
	defer tlsSrv.Close()
	plain := httptest.NewServer(http.HandlerFunc(hello))
	defer plain.Close()
	listed := "api.example.com:" + port(tlsSrv)
	p, d := startProxy(t, Config{ReportNow: true}, listed, "api.example.com:"+port(plain))

	wrong := "Basic " + strings.Repeat("A", len(p.auth)-len("Basic "))
	for _, c := range []struct{ what, auth string }{
		{"no credentials", ""},
		{"wrong credentials", "Proxy-Authorization: " + wrong},
		{"the user without the secret", "Proxy-Authorization: Basic a2Fpcm86"}, // kairo:
	} {
		for _, head := range []string{
			"CONNECT " + listed + " HTTP/1.1\r\nHost: " + listed,
			"CONNECT attacker.example.com:443 HTTP/1.1\r\nHost: attacker.example.com:443",
			"GET http://api.example.com:" + port(plain) + "/ HTTP/1.1\r\nHost: api.example.com:" + port(plain),
		} {
			if c.auth != "" {
				head += "\r\n" + c.auth
			}
			code, body, h := rawRequest(t, p, head)
			if code != http.StatusProxyAuthRequired || !strings.Contains(body, "serves one sandbox") || h.Get("Proxy-Authenticate") == "" {
				t.Errorf("%s, %q: %d %q %v, want 407 with Proxy-Authenticate", c.what, head, code, body, h)
			}
		}
	}
	if got := d.get(); len(got) != 0 {
		t.Fatalf("requests without the tree's credentials were reported as its refusals: %+v", got)
	}

	// Control: with them, the listed host is reached and the other refused
	// as the tree's.
	auth := "\r\nProxy-Authorization: " + p.auth
	if code, err := tryConnect(p, listed); code != 200 {
		t.Errorf("CONNECT with the credentials: %d %v, want 200", code, err)
	}
	if code, _, _ := rawRequest(t, p, "CONNECT attacker.example.com:443 HTTP/1.1\r\nHost: attacker.example.com:443"+auth); code != http.StatusForbidden {
		t.Errorf("unlisted CONNECT with the credentials: %d, want 403", code)
	}
	if code, body := get(t, client(plain, p), "http://api.example.com:"+port(plain)+"/"); code != 200 || body != "hello api.example.com:"+port(plain) {
		t.Errorf("plain HTTP with the credentials: %d %q", code, body)
	}
	if got := d.get(); len(got) != 1 || got[0].Host != "attacker.example.com" {
		t.Errorf("denials %+v, want the one unlisted CONNECT", got)
	}
}

// TestProxyAuthorizationForwarded: the upstream never sees the proxy's
// credentials.
func TestProxyAuthorizationForwarded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "auth=%q", r.Header.Get("Proxy-Authorization"))
	}))
	defer srv.Close()
	p, _ := startProxy(t, Config{}, "api.example.com:"+port(srv))
	if code, body := get(t, client(srv, p), "http://api.example.com:"+port(srv)+"/"); code != 200 || body != `auth=""` {
		t.Errorf("%d %q, want the credentials dropped", code, body)
	}
}

// TestCommonClients: curl and Python's requests, given the proxy's
// environment, send its credentials on their own, over CONNECT and plain
// HTTP; the control, the same environment without the credentials, is
// refused with a 407.
func TestCommonClients(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(hello))
	defer tlsSrv.Close()
	plain := httptest.NewServer(http.HandlerFunc(hello))
	defer plain.Close()
	p, d := startProxy(t, Config{}, "api.example.com:"+port(tlsSrv), "api.example.com:"+port(plain))
	httpsURL := "https://api.example.com:" + port(tlsSrv) + "/"
	httpURL := "http://api.example.com:" + port(plain) + "/"
	bare := "http://" + p.Addr().String() // the URL without the credentials
	withEnv := func(env []string, name string, args ...string) (string, error) {
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	bareEnv := []string{"HTTPS_PROXY=" + bare, "https_proxy=" + bare, "HTTP_PROXY=" + bare, "http_proxy=" + bare, "NO_PROXY=", "no_proxy="}

	clients := []struct {
		name string
		argv func(u string) []string
	}{
		{"curl", func(u string) []string { return []string{"curl", "-sSk", "-w", " %{http_code}", u} }},
		{"python3", func(u string) []string {
			return []string{"python3", "-c", `import sys, requests, urllib3
urllib3.disable_warnings()
try:
    r = requests.get(sys.argv[1], verify=False, timeout=20)
    print(r.text, r.status_code)
except Exception as e:
    print("error", e)`, u}
		}},
	}
	for _, c := range clients {
		if _, err := exec.LookPath(c.name); err != nil {
			t.Logf("%s not installed: not tried", c.name)
			continue
		}
		if c.name == "python3" {
			if out, err := exec.Command("python3", "-c", "import requests").CombinedOutput(); err != nil {
				t.Logf("python3 without requests (%s): not tried", out)
				continue
			}
		}
		for _, u := range []string{httpsURL, httpURL} {
			argv := c.argv(u)
			out, err := withEnv(p.Env(), argv[0], argv[1:]...)
			host := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://"), "/")
			if err != nil || !strings.Contains(out, "hello "+host+" 200") {
				t.Errorf("%s %s through the proxy's environment: %v %q, want hello and 200", c.name, u, err, out)
			}
			out, _ = withEnv(bareEnv, argv[0], argv[1:]...)
			if strings.Contains(out, "hello") || !strings.Contains(out, "407") {
				t.Errorf("%s %s without the credentials: %q, want a 407", c.name, u, out)
			}
		}
	}
	if got := d.get(); len(got) != 0 {
		t.Errorf("denials %+v, want none", got)
	}
}

// TestPeerUID: with Config.PeerUID, curl run as that uid goes through
// and its refused host is reported; curl run as another uid, with the
// same URL and secret, is cut off as it connects: no answer, no Denial,
// no slot held. The test runs real processes as two unused uids, so it
// needs root.
func TestPeerUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs curl as other uids: needs root")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed")
	}
	const tree, other = 0x7fe0fff0, 0x7fe0fff1 // in the sandboxes' default range, last of it
	srv := httptest.NewTLSServer(http.HandlerFunc(hello))
	defer srv.Close()
	listed := "api.example.com:" + port(srv)
	p, d := startProxy(t, Config{PeerUID: tree, ReportNow: true}, listed)

	curl := func(uid int, u string) (string, error) {
		cmd := exec.Command("curl", "-sSk", "--max-time", "20", "-w", " %{http_code}", u)
		cmd.Env = append([]string{"HOME=/", "PATH=/usr/bin:/bin"}, p.Env()...)
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	// Another uid, with everything the tree's environment holds.
	for _, u := range []string{"https://" + listed + "/", "https://attacker.example.com:443/"} {
		if out, err := curl(other, u); err == nil || strings.Contains(out, "hello") || strings.Contains(out, "403") {
			t.Errorf("curl %s as uid %d: %v %q, want the connection cut", u, other, err, out)
		}
	}
	if got := d.get(); len(got) != 0 {
		t.Errorf("another uid's refusals were reported as the tree's: %+v", got)
	}
	p.mu.Lock()
	active := p.active
	p.mu.Unlock()
	if active != 0 {
		t.Errorf("%d connections counted after another uid's attempts, want 0", active)
	}
	// Nor the kernel's own (root) connections: the proxy is the tree's.
	if code, _ := tryConnect(p, listed); code != 0 {
		t.Errorf("CONNECT as uid %d: status %d, want the connection cut", os.Geteuid(), code)
	}

	// Control: the tree's uid.
	if out, err := curl(tree, "https://"+listed+"/"); err != nil || !strings.Contains(out, "hello "+listed+" 200") {
		t.Errorf("curl as the tree's uid: %v %q, want hello and 200", err, out)
	}
	if out, _ := curl(tree, "https://attacker.example.com:443/"); !strings.Contains(out, "403") {
		t.Errorf("curl to an unlisted host as the tree's uid: %q, want a 403", out)
	}
	if got := d.get(); len(got) != 1 || got[0].Host != "attacker.example.com" || got[0].Port != 443 {
		t.Errorf("denials %+v, want the tree's one", got)
	}
}

// tryConnect sends an authorized CONNECT and returns the status, 0 when
// the proxy closed the connection without one.
func tryConnect(p *Proxy, target string) (int, error) {
	c, err := net.Dial("tcp", p.Addr().String())
	if err != nil {
		return 0, err
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\n\r\n", target, target, p.auth)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// TestPatternIsNoGrant: a CONNECT to a wildcard, or to anything that is
// not one host name or address, is refused and its Denial is not a
// host:port a re-run could grant; the control, an unlisted plain name, is
// refused and is one.
func TestPatternIsNoGrant(t *testing.T) {
	p, d := startProxy(t, Config{ReportNow: true}, "*.example.com:443")
	for _, target := range []string{"*.com:443", "*.example.com:443", "a*b.example.com:443", "exa_mple..com:443"} {
		if _, code, body := rawConnect(t, p, target); code != http.StatusForbidden || !strings.Contains(body, "not a host name or an IP address") {
			t.Errorf("CONNECT %s: %d %q, want 403 naming it no host", target, code, body)
		}
	}
	for _, x := range d.get() {
		if hp := net.JoinHostPort(x.Host, fmt.Sprint(x.Port)); manifests.IsHostPort(hp) {
			t.Errorf("the refusal of %q reads as the grantable %q", x.Host, hp)
		}
	}
	if n := len(d.get()); n != 4 {
		t.Errorf("%d denials, want 4", n)
	}
	// Control: a plain unlisted name is refused and grantable.
	if _, code, _ := rawConnect(t, p, "attacker.com:443"); code != http.StatusForbidden {
		t.Errorf("CONNECT attacker.com:443: %d, want 403", code)
	}
	got := d.get()
	if last := got[len(got)-1]; last.Host != "attacker.com" || !manifests.IsHostPort(net.JoinHostPort(last.Host, "443")) {
		t.Errorf("last denial %+v, want attacker.com, grantable", last)
	}
}

// TestLocalAddressKinds: every address that is not public is refused for
// a listed name, and dialed when the same address is listed for that
// port (the control); public addresses are dialed.
func TestLocalAddressKinds(t *testing.T) {
	for _, c := range []struct{ addr, kind string }{
		{"10.1.2.3", "private"}, {"172.16.0.1", "private"}, {"172.31.255.255", "private"},
		{"192.168.1.10", "private"}, {"fd00::2", "private"}, {"fec0::1", "private"},
		{"100.64.0.1", "shared (CGNAT)"}, {"100.127.255.254", "shared (CGNAT)"},
		{"127.0.0.1", "loopback"}, {"127.8.9.10", "loopback"}, {"::1", "loopback"},
		{"169.254.169.254", "link-local"}, {"fe80::1", "link-local"},
		{"64:ff9b::a00:1", "private"}, // 10.0.0.1 behind NAT64
		{"0.0.0.0", "unspecified"}, {"0.1.2.3", "unspecified"}, {"::", "unspecified"},
		{"8.8.8.8", ""}, {"100.128.0.1", ""}, {"172.32.0.1", ""}, {"2606:4700::1", ""}, {"64:ff9b::808:808", ""},
	} {
		a := netip.MustParseAddr(c.addr)
		rules, _ := manifests.ParseEgressRules([]string{"api.example.com:443"})
		p := &Proxy{cfg: Config{Rules: rules}}
		ok, kind := p.addrOK(a, 443, "api.example.com", false)
		if ok != (c.kind == "") || kind != c.kind {
			t.Errorf("%s for a listed name: %v %q, want kind %q", c.addr, ok, kind, c.kind)
		}
		if c.kind == "" {
			continue
		}
		// Listed as such, for that port: dialed, except what is never.
		rules, _ = manifests.ParseEgressRules([]string{"api.example.com:443", netip.AddrPortFrom(a, 443).String()})
		p = &Proxy{cfg: Config{Rules: rules}}
		ok, _ = p.addrOK(a, 443, "api.example.com", false)
		if want := c.kind != "unspecified"; ok != want {
			t.Errorf("%s listed as such: %v, want %v", c.addr, ok, want)
		}
		if ok, _ = p.addrOK(a, 8443, "api.example.com", false); ok {
			t.Errorf("%s listed for port 443 is dialed on 8443", c.addr)
		}
	}
}

// TestOwnAddress: a listed name that resolves to one of the machine's own
// non-loopback addresses does not reach a service listening on 0.0.0.0;
// with that address listed too, it does.
func TestOwnAddress(t *testing.T) {
	var own netip.Addr
	list, _ := net.InterfaceAddrs()
	for _, x := range list {
		if n, ok := x.(*net.IPNet); ok {
			if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap().Is4() && !a.IsLoopback() && !a.IsLinkLocalUnicast() {
				own = a.Unmap()
				break
			}
		}
	}
	if !own.IsValid() {
		t.Skip("no IPv4 address of this machine beside loopback")
	}
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(hello)}}
	srv.Start()
	defer srv.Close()
	svcPort := ln.Addr().(*net.TCPAddr).Port
	resolve := func(context.Context, string) ([]netip.Addr, error) { return []netip.Addr{own}, nil }
	name := fmt.Sprintf("intranet.example.com:%d", svcPort)
	u := "http://" + name + "/"

	p, d := startProxy(t, Config{Resolve: resolve, ReportNow: true}, name)
	resp, err := client(srv, p).Get(u)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), own.String()+": ") || strings.Contains(string(b), "hello") {
		t.Errorf("a listed name resolving to the machine's %s: %d %q, want 403", own, resp.StatusCode, b)
	}
	if got := d.get(); len(got) != 1 {
		t.Errorf("denials %+v, want 1", got)
	}

	// Control: the address listed as such.
	p, _ = startProxy(t, Config{Resolve: resolve}, name, netip.AddrPortFrom(own, uint16(svcPort)).String())
	if code, body := get(t, client(srv, p), u); code != 200 || body != "hello "+name {
		t.Errorf("with %s listed: %d %q, want 200", own, code, body)
	}
}
