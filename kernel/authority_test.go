package kernel

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/testkit"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/sandbox"
	"github.com/vmihailenco/msgpack/v5"
)

// TestIntersectAuthority: what an agent does for another holds what both
// hold, each list cut to the other; nil, the operator, bounds nothing.
// Each case that cuts has a control beside it that keeps.
func TestIntersectAuthority(t *testing.T) {
	ceilingA := &sandbox.Policy{Read: []string{"/usr", "/data"}, Write: []string{"/data/a"}, Hosts: []string{"*.github.com"}}
	ceilingB := &sandbox.Policy{Read: []string{"/usr"}, Write: []string{"/data"}, Hosts: []string{"api.github.com:443", "pypi.org"}}
	for _, c := range []struct {
		name string
		a, b *SpawnAuthority
		want *SpawnAuthority
	}{
		{"the operator and the operator", nil, nil, nil},
		{"the operator bounds nothing", nil, &SpawnAuthority{Skills: []string{"a"}, Commands: true, Hosts: []string{"x.org"}},
			&SpawnAuthority{Skills: []string{"a"}, Commands: true, Hosts: []string{"x.org"}}},
		{"nor on the other side", &SpawnAuthority{Folders: []string{"/srv"}}, nil, &SpawnAuthority{Folders: []string{"/srv"}}},

		{"skills both name", &SpawnAuthority{Skills: []string{"a", "b"}}, &SpawnAuthority{Skills: []string{"b", "c"}}, &SpawnAuthority{Skills: []string{"b"}}},
		{"control: the same skills", &SpawnAuthority{Skills: []string{"a", "b"}}, &SpawnAuthority{Skills: []string{"b", "a"}}, &SpawnAuthority{Skills: []string{"a", "b"}}},
		{"all skills and a list", &SpawnAuthority{Skills: []string{"*"}}, &SpawnAuthority{Skills: []string{"c"}}, &SpawnAuthority{Skills: []string{"c"}}},
		{"a list and all skills", &SpawnAuthority{Skills: []string{"c"}}, &SpawnAuthority{Skills: []string{"*"}}, &SpawnAuthority{Skills: []string{"c"}}},
		{"control: all skills twice", &SpawnAuthority{Skills: []string{"*"}}, &SpawnAuthority{Skills: []string{"*"}}, &SpawnAuthority{Skills: []string{"*"}}},

		{"commands for one only", &SpawnAuthority{Commands: true}, &SpawnAuthority{}, &SpawnAuthority{}},
		{"control: commands for both", &SpawnAuthority{Commands: true}, &SpawnAuthority{Commands: true}, &SpawnAuthority{Commands: true}},

		{"folders: the inner one", &SpawnAuthority{Folders: []string{"/srv"}}, &SpawnAuthority{Folders: []string{"/srv/app", "/home"}}, &SpawnAuthority{Folders: []string{"/srv/app"}}},
		{"folders apart", &SpawnAuthority{Folders: []string{"/srv"}}, &SpawnAuthority{Folders: []string{"/home"}}, &SpawnAuthority{}},
		{"control: the same folder", &SpawnAuthority{Folders: []string{"/srv"}}, &SpawnAuthority{Folders: []string{"/srv"}}, &SpawnAuthority{Folders: []string{"/srv"}}},

		{"hosts one has only", &SpawnAuthority{Hosts: []string{"127.0.0.1:8080"}}, &SpawnAuthority{}, &SpawnAuthority{}},
		{"hosts a wildcard covers, either side", &SpawnAuthority{Hosts: []string{"*.github.com", "evil.example"}}, &SpawnAuthority{Hosts: []string{"api.github.com:443", "pypi.org"}},
			&SpawnAuthority{Hosts: []string{"api.github.com:443"}}},
		{"a host without a port keeps the port the other has", &SpawnAuthority{Hosts: []string{"pypi.org"}}, &SpawnAuthority{Hosts: []string{"pypi.org:443"}},
			&SpawnAuthority{Hosts: []string{"pypi.org:443"}}},
		{"control: the same hosts", &SpawnAuthority{Hosts: []string{"127.0.0.1:8080", "*.pypi.org"}}, &SpawnAuthority{Hosts: []string{"*.pypi.org", "127.0.0.1:8080"}},
			&SpawnAuthority{Hosts: []string{"127.0.0.1:8080", "*.pypi.org"}}},

		{"one ceiling", &SpawnAuthority{Ceiling: ceilingA}, &SpawnAuthority{}, &SpawnAuthority{Ceiling: ceilingA}},
		{"two ceilings", &SpawnAuthority{Ceiling: ceilingA}, &SpawnAuthority{Ceiling: ceilingB}, &SpawnAuthority{Ceiling: Intersect(ceilingA, ceilingB, "", "")}},

		{"IPC of one", &SpawnAuthority{}, &SpawnAuthority{IPC: &Grants{Call: []string{"events.publish"}}}, &SpawnAuthority{IPC: &Grants{Call: []string{"events.publish"}}}},
		{"IPC of both", &SpawnAuthority{IPC: &Grants{Call: []string{"events.publish", "process.spawn"}, Publish: []string{"app.>"}, Subscribe: []string{"app.x"}}},
			&SpawnAuthority{IPC: &Grants{Call: []string{"events.publish"}, Publish: []string{"app.x", "other.y"}, Subscribe: []string{">"}}},
			&SpawnAuthority{IPC: &Grants{Call: []string{"events.publish"}, Publish: []string{"app.x"}, Subscribe: []string{"app.x"}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := IntersectAuthority(c.a, c.b)
			if !sameAuthority(got, c.want) {
				t.Fatalf("IntersectAuthority:\n got  %s\n want %s", describe(got), describe(c.want))
			}
			want := c.want
			if c.a != nil && c.b != nil && c.a.Ceiling != nil && c.b.Ceiling != nil {
				// Two ceilings meet as Intersect has them: the first's
				// grants cut to the second.
				w := *want
				w.Ceiling = Intersect(c.b.Ceiling, c.a.Ceiling, "", "")
				want = &w
			}
			if flipped := IntersectAuthority(c.b, c.a); !sameAuthority(flipped, want) {
				t.Fatalf("IntersectAuthority, the other way round:\n got  %s\n want %s", describe(flipped), describe(want))
			}
			if got != nil && (got == c.a || got == c.b) {
				t.Fatal("IntersectAuthority handed back one of its arguments, not a copy")
			}
		})
	}
}

// sameAuthority compares two authorities, an empty list the same as
// none, in any order.
func sameAuthority(a, b *SpawnAuthority) bool {
	if a == nil || b == nil {
		return a == b
	}
	same := func(x, y []string) bool {
		return slices.Equal(slices.Sorted(slices.Values(x)), slices.Sorted(slices.Values(y)))
	}
	return same(a.Skills, b.Skills) && a.Commands == b.Commands && same(a.Folders, b.Folders) && same(a.Hosts, b.Hosts) &&
		describe(&SpawnAuthority{Ceiling: a.Ceiling, IPC: a.IPC}) == describe(&SpawnAuthority{Ceiling: b.Ceiling, IPC: b.IPC})
}

func describe(a *SpawnAuthority) string {
	if a == nil {
		return "nil (the operator's)"
	}
	s := fmt.Sprintf("skills %q commands %v folders %q hosts %q", a.Skills, a.Commands, a.Folders, a.Hosts)
	if p := a.Ceiling; p != nil {
		s += fmt.Sprintf(" ceiling{read %q write %q exec %q hosts %q}", p.Read, p.Write, p.Exec, p.Hosts)
	}
	if g := a.IPC; g != nil {
		s += fmt.Sprintf(" ipc{call %q publish %q subscribe %q}", g.Call, g.Publish, g.Subscribe)
	}
	return s
}

// TestAgentCommandReachesItsHosts: an agent allowed commands and the host
// of a server on loopback runs curl in the default profile and gets the
// server's answer, through its tree's egress proxy; the same agent
// without hosts cannot reach it (no network, as the default profile has).
func TestAgentCommandReachesItsHosts(t *testing.T) {
	k, curl := sandboxedKernel(t)
	url, host := helloServer(t)
	agent := func(a *SpawnAuthority) Caller { return Caller{Kind: KindAgent, Name: "helper", Spawn: a} }

	out, ok := fetch(t, k, agent(&SpawnAuthority{Commands: true, Hosts: []string{host}}), curl, url)
	if !ok || out != "hello from "+host {
		t.Fatalf("an agent granted %s: curl %s gave %q (ok %v), want the server's answer", host, url, out, ok)
	}
	out, ok = fetch(t, k, agent(&SpawnAuthority{Commands: true}), curl, url)
	if ok || !strings.HasPrefix(out, "curl: (7) ") { // could not connect: the sandbox refused it
		t.Fatalf("an agent granted no hosts: curl %s gave %q (ok %v), want curl's (7), a refused connect", url, out, ok)
	}
}

// TestDelegatedCommandHoldsBothHosts: an agent that may reach a host,
// acting for one that may not, cannot reach it: the intersection of their
// authorities has no hosts. The control: acting for one that may reach it
// too, it does.
func TestDelegatedCommandHoldsBothHosts(t *testing.T) {
	k, curl := sandboxedKernel(t)
	url, host := helloServer(t)
	asked := &SpawnAuthority{Commands: true, Hosts: []string{host}}
	for _, c := range []struct {
		name  string
		asker *SpawnAuthority
		reach bool
	}{
		{"for an agent without hosts", &SpawnAuthority{Commands: true}, false},
		{"for an agent with the host too", &SpawnAuthority{Commands: true, Hosts: []string{"api.github.com:443", host}}, true},
	} {
		caller := Caller{Kind: KindAgent, Name: "asked", Spawn: IntersectAuthority(asked, c.asker)}
		out, ok := fetch(t, k, caller, curl, url)
		reached, refused := ok && out == "hello from "+host, !ok && strings.HasPrefix(out, "curl: (7) ")
		if reached != c.reach || refused == c.reach {
			t.Errorf("%s: curl %s gave %q (ok %v), want reached %v", c.name, url, out, ok, c.reach)
		}
	}
}

// sandboxedKernel is a kernel whose processes start under the real
// sandbox, as under kairo up, and the path of curl; it skips the test
// when the machine has no Landlock or no curl.
func sandboxedKernel(t *testing.T) (*Kernel, string) {
	t.Helper()
	if sandbox.LandlockABI() == 0 {
		t.Skip("this kernel has no Landlock")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl")
	}
	root, err := os.MkdirTemp("", "kairo-kernel-sandbox-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o711) // the sandboxes' uids pass through it to their folders
	b := bus.New(bus.NewMemoryStore(0), bus.Config{})
	k := New(b, Config{Launcher: &proc.Sandboxed{Helper: sandboxHelper(t), Root: root}})
	t.Cleanup(func() { k.Close(); b.Close() })
	return k, curl
}

var helperBin testkit.LazyKairo

func TestMain(m *testing.M) {
	code := m.Run()
	helperBin.Remove()
	os.Exit(code)
}

// sandboxHelper builds kairo, the sandbox helper, once, as make build
// does (testkit: linked once for every package of the run that asks),
// into a folder every uid may pass and read.
func sandboxHelper(t *testing.T) string {
	t.Helper()
	return helperBin.Path(t)
}

// helloServer is an HTTP server on loopback that answers "hello from
// HOST"; it returns its URL and its host as a [net] hosts entry
// ("127.0.0.1:PORT").
func helloServer(t *testing.T) (url, host string) {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from "+r.Host)
	}))
	t.Cleanup(s.Close)
	host = s.Listener.Addr().String()
	if _, _, err := net.SplitHostPort(host); err != nil {
		t.Fatal(err)
	}
	return s.URL + "/", host
}

// fetch runs curl url as caller and returns what it printed, stdout and
// stderr, and whether it exited 0.
func fetch(t *testing.T, k *Kernel, caller Caller, curl, url string) (string, bool) {
	t.Helper()
	s := &outputSession{testSession: testSession{ctx: t.Context(), caller: caller}}
	raw, err := msgpack.Marshal(abi.SpawnParams{Argv: []string{curl, "-sS", "--max-time", "10", url}})
	if err != nil {
		t.Fatal(err)
	}
	res, aerr := k.Invoke(t.Context(), abi.MethodProcessSpawn, &Call{Session: s, Params: raw})
	if aerr != nil {
		t.Fatalf("%s spawns curl: %s", caller, aerr.Message)
	}
	var info abi.ProcessInfo
	if err := msgpack.Unmarshal(res, &info); err != nil {
		t.Fatal(err)
	}
	p, ok := k.Proc.Get(info.ID)
	if !ok {
		t.Fatalf("no process %s", info.ID)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if info, err = p.Wait(ctx); err != nil {
		t.Fatalf("curl %s has not exited: %v", url, err)
	}
	return s.text(), info.ExitCode != nil && *info.ExitCode == 0
}

// outputSession is a testSession that keeps the output of its processes.
type outputSession struct {
	testSession
	mu  sync.Mutex
	out strings.Builder
}

func (s *outputSession) PushChunks(cs []abi.StreamChunk) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		s.out.Write(c.Chunk)
	}
	return nil
}

func (s *outputSession) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.TrimSpace(s.out.String())
}

// TestCommandUnderCeilingHoldsBothHosts: a command under a ceiling
// reaches the hosts both its authority and the ceiling hold; without
// hosts of its own, none, though the ceiling lists some.
func TestCommandUnderCeilingHoldsBothHosts(t *testing.T) {
	ceiling := &sandbox.Policy{Read: []string{"/usr"}, Hosts: []string{"*.github.com", "127.0.0.1:8080"}}
	for _, c := range []struct {
		hosts, want []string
	}{
		{[]string{"api.github.com:443", "127.0.0.1:8080", "pypi.org"}, []string{"api.github.com:443", "127.0.0.1:8080"}},
		{nil, nil},
	} {
		build := commandPolicy(&SpawnAuthority{Commands: true, Hosts: c.hosts, Ceiling: ceiling}, nil)
		p, err := build("/w", "/t")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(p.Hosts, c.want) {
			t.Errorf("hosts %q under a ceiling of %q: the command's policy lists %q, want %q", c.hosts, ceiling.Hosts, p.Hosts, c.want)
		}
		if !slices.Equal(p.Write, []string{"/w", "/t"}) || len(ceiling.Write) != 0 {
			t.Errorf("the command writes %q (the ceiling %q), want its own folders only, the ceiling untouched", p.Write, ceiling.Write)
		}
	}
	if commandPolicy(&SpawnAuthority{Commands: true, Hosts: []string{"x.org"}}, nil) != nil {
		t.Error("without a ceiling a command has a policy of its own, want the default profile (nil)")
	}
}
