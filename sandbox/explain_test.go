package sandbox

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// TestCheckReportsProcGap: what only a root kernel gives (the sandbox's own
// /proc, a process limit of the tree's own) is said to be missing when the
// kernel is not root, by `kairo sandbox check` and by an explanation; and
// said to be there when it is.
func TestCheckReportsProcGap(t *testing.T) {
	for _, c := range []struct {
		root bool
		want []string
	}{
		{true, []string{"/proc                                  the sandbox's own (hidepid=invisible,subset=pid)", "no System V IPC", "processes 256"}},
		{false, []string{"/proc                                  NOT enforced", "the process limit counts every process of uid"}},
	} {
		var b bytes.Buffer
		WriteCheck(&b, Features{LandlockABI: 7, Seccomp: true, NoNewPrivs: true, Root: c.root, MemfdNoExecSeal: true})
		for _, want := range c.want {
			if !strings.Contains(b.String(), want) {
				t.Errorf("check (root %v) does not say %q:\n%s", c.root, want, b.String())
			}
		}
	}

	p := Default("/work", "/tmp", nil)
	if g := gaps(p, true); len(g) != 0 {
		t.Errorf("gaps of a root kernel: %q, want none", g)
	}
	g := strings.Join(gaps(p, false), "\n")
	for _, want := range []string{"/proc: the host's", "processes: the limit of 256 counts every process of uid"} {
		if !strings.Contains(g, want) {
			t.Errorf("gaps of a kernel that is not root do not say %q:\n%s", want, g)
		}
	}
	if hidesProc() {
		var b bytes.Buffer
		Explain(&b, p, "/bin/true")
		if !strings.Contains(b.String(), "/proc        the sandbox's own") || strings.Contains(b.String(), "NOT enforced") {
			t.Errorf("explain as root:\n%s", b.String())
		}
	}
}

// TestExplainHosts: an explanation lists the [net] hosts, says they are
// reached through the tree's egress proxy, its port and its environment;
// a policy without hosts (the control) says nothing of a proxy.
func TestExplainHosts(t *testing.T) {
	p := Default("/work", "/tmp", nil)
	p.Hosts = []string{"api.github.com:443", "*.pythonhosted.org", "[::1]:8080", "[::1]", "10.0.0.7"}
	var b bytes.Buffer
	Explain(&b, p, "")
	out := b.String()
	for _, want := range []string{
		"tcp connect  none; and the port of the tree's egress proxy, chosen at spawn",
		"sockets: tcp allowed, udp denied",
		"HTTPS_PROXY, HTTP_PROXY, ALL_PROXY (and in lower case) = the egress proxy's address; NO_PROXY and no_proxy empty",
		"8. egress proxy: the kernel's, on 127.0.0.1 on a port of the tree's own",
		"   host         api.github.com:443\n",
		"   host         *.pythonhosted.org (ports 80 and 443)\n",
		"   host         [::1]:8080\n",
		"   host         [::1] (ports 80 and 443)\n",
		"   host         10.0.0.7 (ports 80 and 443)\n",
		"the proxy resolves the names",
		"kairo.sandbox.denied",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explanation does not say %q:\n%s", want, out)
		}
	}

	b.Reset()
	Explain(&b, Default("/work", "/tmp", nil), "")
	if out := b.String(); strings.Contains(out, "proxy") || !strings.Contains(out, "tcp connect  none\n") || !strings.Contains(out, "sockets: tcp denied") {
		t.Errorf("explanation without hosts:\n%s", out)
	}

	if u := Unenforced(p, 3); !slices.ContainsFunc(u, func(s string) bool { return strings.HasPrefix(s, "network: TCP to every port") }) {
		t.Errorf("hosts on Landlock ABI 3: %q, want the TCP gap named", u)
	}
	if u := Unenforced(p, 4); slices.ContainsFunc(u, func(s string) bool { return strings.HasPrefix(s, "network:") }) {
		t.Errorf("hosts on Landlock ABI 4: %q, want no TCP gap", u)
	}
}
