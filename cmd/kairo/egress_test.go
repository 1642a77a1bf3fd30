package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// egressSkill fetches through its proxy with curl: a listed host, an
// unlisted one (the server's IP literal), and the same server past the
// proxy (--noproxy); each line ends with curl's exit code.
func egressSkill(t *testing.T, port string) string {
	t.Helper()
	return writeSkill(t, `[skill]
name = "fetch"
command = ["/usr/bin/sh", "-c", '''
r=$(curl -sS -k https://localhost:`+port+`/listed 2>&1); echo "$r exit=$?"
r=$(curl -sS -k https://127.0.0.1:`+port+`/unlisted 2>&1); echo "$r exit=$?"
r=$(curl -sS -k --noproxy "*" https://127.0.0.1:`+port+`/direct 2>&1); echo "$r exit=$?"
echo "proxy=$HTTPS_PROXY no_proxy=$no_proxy."
''']
`+systemGrants+`
[net]
hosts = ["localhost:`+port+`"]
`)
}

// tlsServer is an HTTPS server on loopback that answers "hello PATH".
func tlsServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello "+r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return port
}

// checkFetch checks the output of egressSkill: the listed host answers,
// the unlisted one is a 403 from the proxy, and a connect past the proxy
// is refused (curl's 7: could not connect). kairo run says what was
// denied, and the grant that would allow it.
func checkFetch(t *testing.T, r result, port string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 4 {
		t.Fatalf("want exit 0 and four lines:\n%s", r)
	}
	for i, want := range []string{
		`^hello /listed exit=0$`,
		`^curl: \(56\) CONNECT tunnel failed, response 403 exit=56$`,
		`exit=7$`,
		`^proxy=http://kairo:[0-9a-f]{32}@127\.0\.0\.1:\d+ no_proxy=\.$`,
	} {
		if !regexp.MustCompile(want).MatchString(lines[i]) {
			t.Errorf("line %d: %q, want %s\n%s", i+1, lines[i], want, r)
		}
	}
	if want := `denied: net.host 127.0.0.1:` + port + ` — to allow it, add to the manifest: [net] hosts = ["127.0.0.1:` + port + `"]`; !strings.Contains(r.stderr, want) {
		t.Errorf("kairo run does not say %q:\n%s", want, r)
	}
	if strings.Contains(r.stderr, "localhost:"+port) {
		t.Errorf("kairo run reports the listed host denied:\n%s", r)
	}
}

// TestRunEgress: kairo run of a skill with [net] hosts, standalone, with
// curl in the sandbox: through the run's proxy the listed host answers,
// an unlisted one is refused, and past the proxy nothing connects.
func TestRunEgress(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	port := tlsServer(t)
	checkFetch(t, kairo(t, noKernel(t), "run", "--work", userWorkspace(t), egressSkill(t, port)), port)
}

// TestRunEgressThroughDaemon: the same through kairo up, whose bus then
// holds a kairo.sandbox.denied naming the refused host and none for the
// listed one.
func TestRunEgressThroughDaemon(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	home := t.TempDir()
	startUp(t, home)
	port := tlsServer(t)
	checkFetch(t, kairo(t, home, "run", "--work", userWorkspace(t), egressSkill(t, port)), port)
	replay := kairo(t, home, "events", "replay", "--json", "kairo.sandbox.>")
	denied := regexp.MustCompile(`"type":"kairo\.sandbox\.denied".*"op":"net\.host".*"object":"127\.0\.0\.1:` + port + `".*"reporter":"egress"`)
	if !denied.MatchString(replay.stdout) {
		t.Errorf("no kairo.sandbox.denied of 127.0.0.1:%s from the egress proxy:\n%s", port, replay)
	}
	if strings.Contains(replay.stdout, `"object":"localhost:`+port+`"`) {
		t.Errorf("the listed host was reported denied:\n%s", replay)
	}
}

// TestRunExplainHosts: kairo run --explain lists the hosts and the proxy.
func TestRunExplainHosts(t *testing.T) {
	r := kairo(t, noKernel(t), "run", "--explain", egressSkill(t, "8443"))
	if r.code != 0 {
		t.Fatalf("explain: %s", r)
	}
	for _, want := range []string{
		"tcp connect  none; and the port of the tree's egress proxy, chosen at spawn",
		"egress proxy: the kernel's, on 127.0.0.1",
		"host         localhost:8443\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("explain does not say %q:\n%s", want, r.stdout)
		}
	}
}
