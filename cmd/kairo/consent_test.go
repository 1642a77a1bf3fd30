package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/audit"
	"github.com/vmihailenco/msgpack/v5"
)

// pendingApproval is one line of `kairo approvals --json`.
type pendingApproval struct {
	ID     string `json:"id"`
	Mode   string `json:"mode"`
	State  string `json:"state"`
	Skill  string `json:"skill"`
	Grants struct {
		Read       []string `json:"read"`
		Write      []string `json:"write"`
		Exec       []string `json:"exec"`
		ConnectTCP []int    `json:"connectTcp"`
		Hosts      []string `json:"hosts"`
	} `json:"grants"`
}

func approvalsJSON(t *testing.T, home string) []pendingApproval {
	t.Helper()
	r := kairo(t, home, "approvals", "--json")
	if r.code != 0 {
		t.Fatalf("approvals --json:\n%s", r)
	}
	var out []pendingApproval
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var a pendingApproval
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("approvals --json line %q: %v", line, err)
		}
		out = append(out, a)
	}
	return out
}

// waitOrDump waits up to a minute for f, and past it fails with what the
// daemon logged and the log's events of processes, tools, refusals and
// approvals: what a loaded machine made of the test.
func waitOrDump(t *testing.T, d *upProc, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !f() {
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, ev := range eventLog(t, d.home) {
				if strings.HasPrefix(ev.Type, "kairo.process.") || strings.HasPrefix(ev.Type, "kairo.tool.") ||
					strings.HasPrefix(ev.Type, "kairo.sandbox.") || strings.HasPrefix(ev.Type, "kairo.approval.") || ev.Type == "kairo.agent.action" {
					fmt.Fprintf(&b, "  %d %s %v\n", ev.Seq, ev.Type, ev.Data)
				}
			}
			logged, _ := os.ReadFile(filepath.Join(d.home, "kairo.log"))
			t.Fatalf("no %s within a minute; events:\n%s\nkairo.log:\n%s\nstderr:\n%s", what, b.String(), logged, d.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// installSkill writes skill.toml text as the installed skill name of home.
func installSkill(t *testing.T, home, name, text string) {
	t.Helper()
	dir := filepath.Join(home, "skills", name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "skill.toml"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// sharedDir is a folder every sandbox uid may pass and write, outside any
// grant: where a skill's write is refused by Landlock alone.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "kairo-consent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

func lineCount(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

const writerSkill = `[skill]
name = "writer"
description = "appends a line to out in a folder"
command = ["/usr/bin/sh", "-c", "echo written >> {dir}/out"]
[params.dir]
description = "the folder"
[fs]
read = ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"]
exec = ["/usr/bin"]
[approval]
mode = "on-deny"
`

// An on-deny skill that writes outside its grants: the sandbox refuses the
// write (it did not happen) and kairo.sandbox.denied names the folder; the
// operator is asked to run it again with exactly that folder writable,
// approves from the CLI, and the re-run writes. Approved twice, it runs
// once.
func TestOnDenyApprovedFromCLI(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the sandbox's refusals are read from the audit subsystem by a root daemon")
	}
	if st, err := audit.GetStatus(); err != nil || st.Enabled == audit.Locked {
		t.Skipf("the audit subsystem cannot be used here (%v, %+v): no refusal would be reported", err, st)
	}
	home := t.TempDir()
	out := sharedDir(t)
	installSkill(t, home, "writer", writerSkill)
	d := startUp(t, home)
	if r := kairo(t, home, "send", "--no-follow", "run writer dir="+out); r.code != 0 {
		t.Fatalf("send:\n%s\n%s", r, d.stderr)
	}
	var ap pendingApproval
	waitOrDump(t, d, "the request to run writer again", func() bool {
		for _, a := range approvalsJSON(t, home) {
			if a.Mode == "on-deny" {
				ap = a
				return true
			}
		}
		return false
	})
	if lineCount(filepath.Join(out, "out")) != 0 {
		t.Fatal("the refused write happened")
	}
	g := ap.Grants
	if ap.Skill != "writer" || !slices.Equal(g.Write, []string{out}) || len(g.Read)+len(g.Exec)+len(g.ConnectTCP)+len(g.Hosts) != 0 {
		t.Fatalf("the re-run asks for %+v, want exactly write %s", ap, out)
	}
	var denied bool
	for _, ev := range eventLog(t, home) {
		if ev.Type == "kairo.sandbox.denied" && ev.Data["op"] == "fs.write" && ev.Data["object"] == out {
			denied = true
			if grant, _ := ev.Data["grant"].(string); grant != `[fs] write = ["`+out+`"]` {
				t.Errorf("denied event's grant: %q", grant)
			}
		}
	}
	if !denied {
		t.Fatalf("no kairo.sandbox.denied names %s", out)
	}

	if r := kairo(t, home, "approve", ap.ID); r.code != 0 {
		t.Fatalf("approve:\n%s", r)
	}
	waitOrDump(t, d, "the re-run's write", func() bool { return lineCount(filepath.Join(out, "out")) == 1 })
	r := kairo(t, home, "approve", ap.ID)
	if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "before") {
		t.Fatalf("the second approve:\n%s", r)
	}
	time.Sleep(500 * time.Millisecond) // a second run, if there were one, would be under way
	if n := lineCount(filepath.Join(out, "out")); n != 1 {
		t.Fatalf("the approved re-run ran %d times", n)
	}
	spawned := 0
	for _, ev := range eventLog(t, home) {
		if ev.Type == "kairo.process.spawned" && ev.Data["approval"] == ap.ID {
			spawned++
		}
	}
	if spawned != 1 {
		t.Fatalf("%d spawns hold approval %s, want 1", spawned, ap.ID)
	}
}

// stampSkill is a skill marked "always" that appends a line to out in
// the folder dir, which it may write.
func stampSkill(dir string) string {
	return `[skill]
name = "stamp"
description = "appends a line to out in a folder"
command = ["/usr/bin/sh", "-c", "echo stamped >> {dir}/out"]
[params.dir]
description = "the folder"
[fs]
read = ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"]
exec = ["/usr/bin"]
write = ["` + dir + `"]
[approval]
mode = "always"
`
}

// askStamp asks d's agent to run the stamp skill on dir and returns the
// approval it then waits for.
func askStamp(t *testing.T, d *upProc, dir string) pendingApproval {
	t.Helper()
	if r := kairo(t, d.home, "send", "--no-follow", "run stamp dir="+dir); r.code != 0 {
		t.Fatalf("send:\n%s\n%s", r, d.stderr)
	}
	var ap pendingApproval
	until(t, "the request to run stamp", func() bool {
		as := approvalsJSON(t, d.home)
		if len(as) == 1 {
			ap = as[0]
		}
		return len(as) == 1
	})
	return ap
}

// A skill marked "always" waits for the operator; the daemon is killed
// with SIGKILL meanwhile, and after the restart the approval is still
// pending, nothing ran, and approved it runs once.
func TestApprovalPendingAcrossKill(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	out := sharedDir(t)
	installSkill(t, home, "stamp", stampSkill(out))
	d := startUp(t, home)
	ap := askStamp(t, d, out)
	d.kill()
	d = startUp(t, home)
	as := approvalsJSON(t, home)
	if len(as) != 1 || as[0].ID != ap.ID || as[0].State != "pending" {
		t.Fatalf("after kill -9 and a restart: %+v\n%s", as, d.stderr)
	}
	if lineCount(filepath.Join(out, "out")) != 0 {
		t.Fatal("it ran before it was approved")
	}
	if r := kairo(t, home, "approve", ap.ID); r.code != 0 {
		t.Fatalf("approve:\n%s", r)
	}
	until(t, "the approved run", func() bool { return lineCount(filepath.Join(out, "out")) == 1 })
	time.Sleep(500 * time.Millisecond)
	if n := lineCount(filepath.Join(out, "out")); n != 1 {
		t.Fatalf("ran %d times", n)
	}
}

// The chat shows an approval's question, its decision and a refusal of a
// task, with what the agent or a skill wrote escaped for the terminal.
func TestChatShowsConsent(t *testing.T) {
	enc := func(v any) []byte {
		raw, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	req := chatLine(&abi.Event{Type: abi.SubjectApprovalRequested, CorrelationID: "loop-00000001", Data: enc(abi.ApprovalRequest{
		ID: "ap-a1", Tool: "skill.deploy", Args: `{"env":"prod"}`, Reason: "deploy needs approval\x1b[2J",
	})}, false)

	for _, want := range []string{"approve? [00000001]", "deploy needs approval^[[2J", `skill.deploy {"env":"prod"}`, "answer yes or no", "kairo approve ap-a1"} {
		if !strings.Contains(req, want) {
			t.Errorf("request line %q lacks %q", req, want)
		}
	}
	dec := chatLine(&abi.Event{Type: abi.SubjectApprovalDecided, CorrelationID: "loop-00000001", Data: enc(abi.ApprovalDecision{ID: "ap-a1", By: "operator/0", Reason: "not today"})}, false)
	if dec != "· [00000001] denied by operator/0: not today" {
		t.Errorf("decision line %q", dec)
	}
	den := chatLine(&abi.Event{Type: abi.SubjectSandboxDenied, CorrelationID: "loop-00000001", Data: enc(abi.SandboxDenied{Op: "fs.write", Object: "/etc", Count: 2, Grant: `[fs] write = ["/etc"]`})}, false)
	if den != `· [00000001] denied: fs.write /etc (2 times) — to allow it, add to the manifest: [fs] write = ["/etc"]` {
		t.Errorf("refusal line %q", den)
	}
	// The control: an event of no task shows nothing of a refusal.
	if l := chatLine(&abi.Event{Type: abi.SubjectSandboxDenied, Data: enc(abi.SandboxDenied{Op: "fs.write", Object: "/etc"})}, false); l != "" {
		t.Errorf("a refusal of no task: %q", l)
	}
}

// An on-deny skill refused a host by its egress proxy: the refusal is the
// proxy's own (no audit involved), the operator is asked to run it again
// with exactly that host, approves from the CLI, and the re-run reaches
// it — once, however often it is approved.
func TestOnDenyHostApprovedFromCLI(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hit" {
			hits.Add(1)
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	home := t.TempDir()
	installSkill(t, home, "fetcher", `[skill]
name = "fetcher"
description = "fetches a page"
command = ["/usr/bin/curl", "-fsS", "-k", "-o", "/dev/null", "https://127.0.0.1:`+port+`/hit"]
[fs]
read = ["/usr", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/ssl"]
exec = ["/usr/bin"]
[net]
hosts = ["localhost:`+port+`"]
[approval]
mode = "on-deny"
`)
	d := startUp(t, home)
	if r := kairo(t, home, "send", "--no-follow", "run fetcher"); r.code != 0 {
		t.Fatalf("send:\n%s\n%s", r, d.stderr)
	}
	want := "127.0.0.1:" + port
	var ap pendingApproval
	waitOrDump(t, d, "the request to run fetcher again", func() bool {
		for _, a := range approvalsJSON(t, home) {
			if a.Mode == "on-deny" && slices.Contains(a.Grants.Hosts, want) {
				ap = a
				return true
			}
		}
		return false
	})
	if hits.Load() != 0 {
		t.Fatal("the refused host was reached")
	}
	if !slices.Equal(ap.Grants.Hosts, []string{want}) {
		t.Fatalf("the re-run asks for hosts %q, want exactly %s", ap.Grants.Hosts, want)
	}
	if r := kairo(t, home, "approve", ap.ID); r.code != 0 {
		t.Fatalf("approve:\n%s", r)
	}
	waitOrDump(t, d, "the re-run's request", func() bool { return hits.Load() == 1 })
	if r := kairo(t, home, "approve", ap.ID); r.code != 0 || !strings.Contains(r.stdout+r.stderr, "before") {
		t.Fatalf("the second approve:\n%s", r)
	}
	time.Sleep(500 * time.Millisecond)
	if n := hits.Load(); n != 1 {
		t.Fatalf("the approved re-run reached the host %d times", n)
	}
}
