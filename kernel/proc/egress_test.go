package proc

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/internal/egress"
	"github.com/kairo-os/kairo/manifests"
	"github.com/vmihailenco/msgpack/v5"
)

// netProbeSource is the sandboxed child of the egress tests: a static Go
// program that runs its operations in order and prints one line for each.
//
//	env                   the proxy variables it was given
//	get URL               "status N BODY" or "error ..." (through the proxy the environment names)
//	dial HOST:PORT        a TCP connect of its own: "ok" or "errno NAME"
//	dial-proxy            the same, to the proxy's address
//	wait                  reads stdin to its end
const netProbeSource = `package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"
)

func main() {
	args := os.Args[1:]
	for len(args) > 0 {
		op := args[0]
		args = args[1:]
		switch op {
		case "env":
			for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"} {
				v, ok := os.LookupEnv(k)
				fmt.Printf("%s=%s set=%v\n", k, v, ok)
			}
		case "get":
			fmt.Println(get(args[0]))
			args = args[1:]
		case "dial":
			fmt.Println(dial(args[0]))
			args = args[1:]
		case "dial-proxy":
			u, err := url.Parse(os.Getenv("HTTPS_PROXY"))
			if err != nil || u.Host == "" {
				fmt.Println("error: no HTTPS_PROXY")
				continue
			}
			fmt.Println(dial(u.Host))
		case "wait":
			io.Copy(io.Discard, os.Stdin)
		default:
			fmt.Println("error: unknown operation " + op)
		}
	}
}

func get(u string) string {
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		Proxy:           http.ProxyFromEnvironment,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the test is about the proxy, not the certificate
	}}
	resp, err := c.Get(u)
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("status %d %s", resp.StatusCode, strings.TrimSpace(string(b)))
}

func dial(addr string) string {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			if errno == syscall.EACCES {
				return "errno EACCES"
			}
			return fmt.Sprintf("errno %d (%v)", int(errno), errno)
		}
		return "error: " + err.Error()
	}
	c.Close()
	return "ok"
}
`

var netProbeBin struct {
	once sync.Once
	path string
	err  error
}

// netProbe builds the probe once, static, into a folder every uid may
// pass and read, and returns its path.
func netProbe(t *testing.T) string {
	t.Helper()
	netProbeBin.once.Do(func() {
		src, err := os.MkdirTemp("", "kairo-netprobe-src-")
		if err != nil {
			netProbeBin.err = err
			return
		}
		defer os.RemoveAll(src)
		os.WriteFile(filepath.Join(src, "go.mod"), []byte("module netprobe\n\ngo 1.26\n"), 0o644)
		os.WriteFile(filepath.Join(src, "main.go"), []byte(netProbeSource), 0o644)
		dir, err := os.MkdirTemp("", "kairo-netprobe-")
		if err != nil {
			netProbeBin.err = err
			return
		}
		os.Chmod(dir, 0o755)
		netProbeBin.path = filepath.Join(dir, "netprobe")
		cmd := exec.Command("go", "build", "-o", netProbeBin.path, ".")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			netProbeBin.err = fmt.Errorf("build the probe: %v\n%s", err, out)
		}
	})
	if netProbeBin.err != nil {
		t.Fatal(netProbeBin.err)
	}
	return netProbeBin.path
}

// egressEnv is a sandboxed manager whose trees' proxies resolve every
// name under .test to 127.0.0.1, and the kairo.sandbox.> and
// kairo.process.> events it publishes, in order.
type egressEnv struct {
	*env
	l *Sandboxed

	mu     sync.Mutex
	events []abi.Event
}

func newEgressEnv(t *testing.T) *egressEnv {
	t.Helper()
	e, l := newSandboxEnv(t)
	l.egressConfig = func(c *egress.Config) {
		c.Resolve = func(_ context.Context, host string) ([]netip.Addr, error) {
			if strings.HasSuffix(host, ".test") {
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return nil, fmt.Errorf("no such host %s (test resolver)", host)
		}
		// The test's servers are on loopback. Without AllowLocal the proxy
		// refuses a listed name that resolves to loopback, so that a public
		// name pointed at 127.0.0.1 cannot reach the host's own services;
		// here that is the point of the resolver.
		c.AllowLocal = true
	}
	ee := &egressEnv{env: e, l: l}
	sub, err := e.bus.Subscribe(context.Background(), "kairo.>", bus.SubscribeConfig{}, func(evs []abi.Event) error {
		ee.mu.Lock()
		ee.events = append(ee.events, evs...)
		ee.mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	return ee
}

// denied waits for the exit of process id on this env's subscription and
// returns every kairo.sandbox.denied seen, with whether the exit of its
// process had been published before it.
func (e *egressEnv) denied(id string) (out []abi.SandboxDenied, afterExit []bool) {
	e.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		e.mu.Lock()
		seen := slices.ContainsFunc(e.events, func(ev abi.Event) bool {
			var d abi.ProcessExitedEvent
			return ev.Type == abi.SubjectProcessExited && msgpack.Unmarshal(ev.Data, &d) == nil && d.ProcessID == id
		})
		e.mu.Unlock()
		if seen {
			break
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no %s for %s", abi.SubjectProcessExited, id)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	exited := map[string]bool{}
	for _, ev := range e.events {
		switch ev.Type {
		case abi.SubjectProcessExited:
			var d abi.ProcessExitedEvent
			msgpack.Unmarshal(ev.Data, &d)
			exited[d.ProcessID] = true
		case abi.SubjectSandboxDenied:
			var d abi.SandboxDenied
			msgpack.Unmarshal(ev.Data, &d)
			out = append(out, d)
			afterExit = append(afterExit, exited[d.ProcessID])
		}
	}
	return out, afterExit
}

// probeSkill is a skill running the probe with ops, granted hosts.
func probeSkill(t *testing.T, probe string, hosts []string, ops ...string) *manifests.Skill {
	t.Helper()
	q := func(l []string) string {
		s := make([]string, len(l))
		for i, x := range l {
			s[i] = strconv.Quote(x)
		}
		return "[" + strings.Join(s, ", ") + "]"
	}
	text := "[skill]\nname = \"netprobe\"\ncommand = " + q(append([]string{probe}, ops...)) +
		"\n[fs]\nexec = [" + strconv.Quote(filepath.Dir(probe)) + "]\n"
	if hosts != nil {
		text += "[net]\nhosts = " + q(hosts) + "\n"
	}
	s, err := manifests.ParseSkill(filepath.Join(t.TempDir(), "skill.toml"), []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// servers are an HTTPS and a plain HTTP server on loopback that answer
// "hello from NAME" to any request, NAME being the host asked for.
func servers(t *testing.T) (tlsPort, plainPort string) {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from "+r.Host)
	})
	s1 := httptest.NewTLSServer(h)
	t.Cleanup(s1.Close)
	s2 := httptest.NewServer(h)
	t.Cleanup(s2.Close)
	_, p1, _ := net.SplitHostPort(s1.Listener.Addr().String())
	_, p2, _ := net.SplitHostPort(s2.Listener.Addr().String())
	return p1, p2
}

// TestSandboxedEgress: a skill with [net] hosts reaches a listed host
// through its tree's proxy; an unlisted one gets a 403 and a
// kairo.sandbox.denied naming it, before the exit; a TCP connect of its
// own to the server's port, past the proxy, is refused by Landlock, while
// one to the proxy's port goes through. The proxy is closed with the tree.
func TestSandboxedEgress(t *testing.T) {
	e := newEgressEnv(t)
	probe := netProbe(t)
	tlsPort, plainPort := servers(t)
	s := probeSkill(t, probe, []string{"api.test:" + tlsPort, "api.test:" + plainPort},
		"env",
		"get", "https://api.test:"+tlsPort+"/",
		"get", "https://other.test:"+tlsPort+"/",
		"get", "http://api.test:"+plainPort+"/x",
		"get", "http://other.test:"+plainPort+"/x",
		"get", "https://other.test:"+tlsPort+"/again",
		"dial", "127.0.0.1:"+tlsPort,
		"dial-proxy",
	)
	sess, info, out := e.run(skillSpec(t, s, ""))
	stdout := out.text("stdout")
	if !exitedWith(info, 0) {
		t.Fatalf("probe: %+v\nstdout %s\nstderr %s", info, stdout, out.text("stderr"))
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 15 {
		t.Fatalf("probe printed %d lines, want 15:\n%s", len(lines), stdout)
	}
	env, res := lines[:8], lines[8:]

	proxy := strings.TrimSuffix(strings.TrimPrefix(env[0], "HTTPS_PROXY="), " set=true")
	pu, err := url.Parse(proxy)
	if err != nil || pu.Scheme != "http" || !strings.HasPrefix(pu.Host, "127.0.0.1:") || pu.User.Username() != "kairo" {
		t.Fatalf("HTTPS_PROXY: %q, want http://kairo:SECRET@127.0.0.1:PORT", env[0])
	}
	if pw, _ := pu.User.Password(); len(pw) < 32 {
		t.Fatalf("HTTPS_PROXY: %q, want a secret of 128 bits or more", env[0])
	}
	for i, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"} {
		if want := k + "=" + proxy + " set=true"; env[i] != want {
			t.Errorf("env: %q, want %q", env[i], want)
		}
	}
	for i, k := range []string{"NO_PROXY", "no_proxy"} {
		if want := k + "= set=true"; env[6+i] != want {
			t.Errorf("env: %q, want %q (set, empty: nothing bypasses the proxy)", env[6+i], want)
		}
	}

	// Each refusal beside the allowed request that differs in the host.
	for _, c := range []struct{ what, got, want string }{
		{"listed host over HTTPS", res[0], "status 200 hello from api.test:" + tlsPort},
		{"unlisted host over HTTPS", res[1], `": Forbidden`}, // Go's error for a CONNECT answered 403
		{"listed host over HTTP", res[2], "status 200 hello from api.test:" + plainPort},
		{"unlisted host over HTTP", res[3], "status 403 kairo egress: other.test port " + plainPort + " is not in this sandbox's [net] hosts list"},
		{"connect past the proxy", res[5], "errno EACCES"},
		{"connect to the proxy", res[6], "ok"},
	} {
		if !strings.Contains(c.got, c.want) {
			t.Errorf("%s: %q, want %q", c.what, c.got, c.want)
		}
	}

	ds, afterExit := e.denied(sess.ID())
	byObject := map[string]abi.SandboxDenied{}
	for i, d := range ds {
		if afterExit[i] {
			t.Errorf("%s was published after the tree's exit", d.Object)
		}
		if d.Op == abi.DeniedHost {
			byObject[d.Object] = d
			if d.Object == "api.test:"+tlsPort || d.Object == "api.test:"+plainPort {
				t.Errorf("a listed host was reported denied: %+v", d)
			}
		}
	}
	d, ok := byObject["other.test:"+tlsPort]
	if !ok {
		t.Fatalf("no kairo.sandbox.denied for other.test:%s; got %+v", tlsPort, ds)
	}
	want := abi.SandboxDenied{
		ProcessID: sess.ID(), Skill: "netprobe", Op: abi.DeniedHost, Object: "other.test:" + tlsPort,
		Detail: "other.test port " + tlsPort + " is not in this sandbox's [net] hosts list",
		Count:  2, Grant: `[net] hosts = ["other.test:` + tlsPort + `"]`, Reporter: "egress",
	}
	if d != want {
		t.Errorf("denied:\n got %+v\nwant %+v", d, want)
	}
	if _, ok := byObject["other.test:"+plainPort]; !ok {
		t.Errorf("no kairo.sandbox.denied for other.test:%s; got %+v", plainPort, ds)
	}

	// The proxy ends with the tree.
	if px := e.l.egress.get(sess.Tree()); px != nil {
		t.Errorf("the tree's proxy is still registered after its end")
	}
	if c, err := net.DialTimeout("tcp", pu.Host, time.Second); err == nil {
		c.Close()
		t.Errorf("the proxy at %s still accepts connections after its tree ended", proxy)
	}
}

// TestSandboxedEgressNoHosts: a skill without [net] hosts gets no proxy,
// no proxy variables and no TCP at all — the control of the test above.
func TestSandboxedEgressNoHosts(t *testing.T) {
	e := newEgressEnv(t)
	probe := netProbe(t)
	tlsPort, _ := servers(t)
	s := probeSkill(t, probe, nil, "env", "dial", "127.0.0.1:"+tlsPort)
	sess, info, out := e.run(skillSpec(t, s, ""))
	stdout := out.text("stdout")
	if !exitedWith(info, 0) {
		t.Fatalf("probe: %+v\nstdout %s\nstderr %s", info, stdout, out.text("stderr"))
	}
	if !strings.Contains(stdout, "HTTPS_PROXY= set=false") || !strings.Contains(stdout, "no_proxy= set=false") {
		t.Errorf("proxy variables without [net] hosts:\n%s", stdout)
	}
	// No TCP grant: the seccomp filter refuses the socket itself.
	if !strings.Contains(stdout, "errno EACCES") {
		t.Errorf("a connect without any grant: %s", stdout)
	}
	if p := sess.Policy(); len(p.ConnectTCP) != 0 {
		t.Errorf("ConnectTCP without [net] hosts: %v", p.ConnectTCP)
	}
}

// TestSandboxedEgressMember: a skill started in a tree uses the tree's
// proxy, whose list its own cannot widen; in a tree without one, its
// hosts reach nothing.
func TestSandboxedEgressMember(t *testing.T) {
	e := newEgressEnv(t)
	probe := netProbe(t)
	tlsPort, _ := servers(t)
	member := probeSkill(t, probe, []string{"other.test:" + tlsPort},
		"env", "get", "https://other.test:"+tlsPort+"/", "get", "https://api.test:"+tlsPort+"/")

	t.Run("tree with a proxy", func(t *testing.T) {
		root := e.spawn(skillSpec(t, probeSkill(t, probe, []string{"api.test:" + tlsPort}, "wait"), ""))
		defer root.CloseStdin()
		spec := skillSpec(t, member, "")
		spec.Parent = root
		_, info, out := e.run(spec)
		stdout := out.text("stdout")
		if !exitedWith(info, 0) {
			t.Fatalf("member: %+v\nstdout %s\nstderr %s", info, stdout, out.text("stderr"))
		}
		px := e.l.egress.get(root.Tree())
		if px == nil {
			t.Fatal("the root's tree has no proxy")
		}
		if want := "HTTPS_PROXY=" + px.URL() + " set=true"; !strings.Contains(stdout, want) {
			t.Errorf("member's environment: want %q in\n%s", want, stdout)
		}
		if !strings.Contains(stdout, `error: Get "https://other.test:`+tlsPort+`/": Forbidden`) {
			t.Errorf("the member's own host, not in the tree's list: want Forbidden in\n%s", stdout)
		}
		if !strings.Contains(stdout, "status 200 hello from api.test:"+tlsPort) {
			t.Errorf("the tree's host through the tree's proxy: want status 200 in\n%s", stdout)
		}
	})

	t.Run("tree without a proxy", func(t *testing.T) {
		root := e.spawn(skillSpec(t, probeSkill(t, probe, nil, "wait"), ""))
		defer root.CloseStdin()
		spec := skillSpec(t, member, "")
		spec.Parent = root
		sess, info, out := e.run(spec)
		stdout := out.text("stdout")
		if !exitedWith(info, 0) {
			t.Fatalf("member: %+v\nstdout %s\nstderr %s", info, stdout, out.text("stderr"))
		}
		if !strings.Contains(stdout, "HTTPS_PROXY= set=false") {
			t.Errorf("a member of a tree without a proxy got one:\n%s", stdout)
		}
		if p := sess.Policy(); len(p.Hosts) != 0 || len(p.ConnectTCP) != 0 {
			t.Errorf("member's policy: hosts %v, connect %v; want none", p.Hosts, p.ConnectTCP)
		}
	})
}

// TestSandboxedEgressOnlyItsTree: a tree's proxy serves the tree only.
// Another uid, and the kernel's own, holding the proxy's URL with its
// secret, are cut off as they connect, and their refused
// attacker.test is no refusal of the tree's; the control, the tree's own
// process, reaches its host and has its refusals reported. A refused
// pattern (*.test) is reported with no grant and is not in what a re-run
// would grant; the control, a refused plain name, is.
func TestSandboxedEgressOnlyItsTree(t *testing.T) {
	needRoot(t)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	e := newEgressEnv(t)
	probe := netProbe(t)
	tlsPort, _ := servers(t)
	out := &collect{}
	root := e.spawn(skillSpec(t, probeSkill(t, probe, []string{"api.test:" + tlsPort},
		"get", "https://*.test:"+tlsPort+"/",
		"get", "https://other.test:"+tlsPort+"/",
		"get", "https://api.test:"+tlsPort+"/",
		"wait"), ""), out)
	px := e.l.egress.get(root.Tree())
	if px == nil {
		t.Fatal("the tree has no proxy")
	}

	// Outsiders, with everything the tree's environment holds.
	const outsider = 0x7fd00000 // below the sandboxes' range: no tree's
	for _, uid := range []int{outsider, os.Geteuid()} {
		for _, u := range []string{"https://api.test:" + tlsPort + "/", "https://attacker.test:443/"} {
			cmd := exec.Command(curl, "-sSk", "--max-time", "20", "-w", " %{http_code}", u)
			cmd.Env = append([]string{"HOME=/", "PATH=/usr/bin:/bin"}, px.Env()...)
			cmd.Dir = "/"
			if uid != os.Geteuid() {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
			}
			b, err := cmd.CombinedOutput()
			if err == nil || strings.Contains(string(b), "hello") || strings.Contains(string(b), "403") {
				t.Errorf("curl %s as uid %d through the tree's proxy: %v %q, want the connection cut", u, uid, err, b)
			}
		}
	}

	root.CloseStdin()
	info := wait(t, root)
	stdout := out.text("stdout")
	if !exitedWith(info, 0) {
		t.Fatalf("probe: %+v\nstdout %s\nstderr %s", info, stdout, out.text("stderr"))
	}
	if !strings.Contains(stdout, "status 200 hello from api.test:"+tlsPort) {
		t.Errorf("the tree's own request: want status 200 in\n%s", stdout)
	}
	ds, _ := e.denied(root.ID())
	var hosts []abi.SandboxDenied
	for _, d := range ds {
		if d.Op == abi.DeniedHost {
			hosts = append(hosts, d)
		}
	}
	byObject := map[string]abi.SandboxDenied{}
	for _, d := range hosts {
		byObject[d.Object] = d
	}
	if d, ok := byObject["attacker.test:443"]; ok {
		t.Errorf("another uid's refusal was reported as the tree's: %+v", d)
	}
	pattern, ok := byObject["*.test:"+tlsPort]
	if !ok {
		t.Errorf("no refusal of *.test:%s; got %+v", tlsPort, hosts)
	} else if pattern.Grant != "" {
		t.Errorf("the refused pattern names a grant: %+v", pattern)
	}
	if d := byObject["other.test:"+tlsPort]; d.Grant != `[net] hosts = ["other.test:`+tlsPort+`"]` {
		t.Errorf("the refused plain name: %+v, want its grant", d)
	}
	if g := GrantsFor(hosts); !slices.Equal(g.Hosts, []string{"other.test:" + tlsPort}) {
		t.Errorf("a re-run would grant hosts %q, want exactly other.test:%s", g.Hosts, tlsPort)
	}
}

// TestGrantsForHosts: a host refusal becomes a grant only when it names
// one and is one host and port; the control, a plain one, does.
func TestGrantsForHosts(t *testing.T) {
	ds := []abi.SandboxDenied{
		{Op: abi.DeniedHost, Object: "*.com:443", Grant: `[net] hosts = ["*.com:443"]`},
		{Op: abi.DeniedHost, Object: "evil.example.com:443"}, // listed, refused for its address
		{Op: abi.DeniedHost, Object: "api.example.com"},
		{Op: abi.DeniedHost, Object: "api.example.com:443", Grant: `[net] hosts = ["api.example.com:443"]`},
		{Op: abi.DeniedHost, Object: "[::1]:8080", Grant: `[net] hosts = ["[::1]:8080"]`},
	}
	if g := GrantsFor(ds); !slices.Equal(g.Hosts, []string{"api.example.com:443", "[::1]:8080"}) {
		t.Errorf("hosts %q", g.Hosts)
	}
	if l := GrantLine(abi.DeniedHost, "*.com:443"); l != "" {
		t.Errorf("GrantLine of a pattern: %q", l)
	}
	if l := GrantLine(abi.DeniedHost, "api.example.com:443"); l != `[net] hosts = ["api.example.com:443"]` {
		t.Errorf("GrantLine of a host: %q", l)
	}
}
