package main

import (
	"strings"
	"testing"

	"github.com/kairo-os/kairo/abi"
)

// fetchSkill asks its egress proxy three times for a host its [net] hosts
// list lacks: three refusals of one kind, coalesced by the kernel.
const fetchSkill = `[skill]
name = "fetcher"
command = ["/usr/bin/sh", "-c", 'for i in 1 2 3; do /usr/bin/curl -s -o /dev/null http://other.test:80/; done; echo fetched']

[net]
hosts = ["allowed.test:80"]
` + systemGrants

// TestRunDenials: kairo run says, after the run, what the sandbox refused
// it — once per kind, with the count and the manifest line that would
// allow it — in a running daemon and in a private kernel, each refusal
// once; a run refused nothing says nothing of the kind.
func TestRunDenials(t *testing.T) {
	t.Parallel()
	skill := writeSkill(t, fetchSkill)
	want := `kairo: denied: net.host other.test:80 (3 times) — to allow it, add to the manifest: [net] hosts = ["other.test:80"]`
	check := func(t *testing.T, home string) {
		t.Helper()
		r := kairoRun(t, userWorkspace(t), childEnv(home), nil, "run", skill)
		if r.code != 0 || !strings.Contains(r.stdout, "fetched") {
			t.Fatalf("kairo run:\n%s", r)
		}
		// Landlock's refusals of what curl reads may be said too; the
		// proxy's is said once, with its count.
		if n := strings.Count(r.stderr, "kairo: denied: net.host"); n != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("kairo run printed the host's denial %d times, want once:\n%s\nwant %s", n, r.stderr, want)
		}
		seen := map[string]bool{}
		for line := range strings.Lines(r.stderr) {
			what, ok := strings.CutPrefix(line, "kairo: denied: ")
			if !ok {
				continue
			}
			what, _, _ = strings.Cut(what, " (")
			what, _, _ = strings.Cut(what, " — ")
			if seen[what] {
				t.Errorf("kairo run said %q twice:\n%s", what, r.stderr)
			}
			seen[what] = true
		}
		quiet := writeSkill(t, echoSkill)
		r = kairoRun(t, userWorkspace(t), childEnv(home), nil, "run", quiet, "--", "greeting=hi")
		if r.code != 0 || strings.Contains(r.stderr, "denied") {
			t.Errorf("kairo run of a skill refused nothing:\n%s", r)
		}
	}
	t.Run("daemon", func(t *testing.T) {
		home := t.TempDir()
		startUp(t, home)
		check(t, home)
	})
	t.Run("private kernel", func(t *testing.T) { check(t, noKernel(t)) })
}

// TestDenialLine: the line kairo run prints for a refusal.
func TestDenialLine(t *testing.T) {
	for _, tc := range []struct {
		d    abi.SandboxDenied
		want string
	}{
		{abi.SandboxDenied{Op: abi.DeniedWrite, Object: "/etc", Count: 3, Grant: `[fs] write = ["/etc"]`},
			`denied: fs.write /etc (3 times) — to allow it, add to the manifest: [fs] write = ["/etc"]`},
		{abi.SandboxDenied{Op: abi.DeniedRead, Object: "/root/.ssh", Count: 1, Grant: `[fs] read = ["/root/.ssh"]`},
			`denied: fs.read /root/.ssh — to allow it, add to the manifest: [fs] read = ["/root/.ssh"]`},
		{abi.SandboxDenied{Op: abi.DeniedSyscall, Object: "ptrace", Count: 2, Detail: "seccomp"},
			`denied: syscall ptrace (2 times) — no manifest line allows it (seccomp)`},
		{abi.SandboxDenied{Op: abi.DeniedWrite, Object: "/tmp/\x1b[2Jx\nforged", Count: 1},
			`denied: fs.write /tmp/^[[2Jx^Jforged — no manifest line allows it`},
	} {
		if got := denialLine(tc.d); got != tc.want {
			t.Errorf("denialLine(%+v)\n = %q\nwant %q", tc.d, got, tc.want)
		}
	}
}

// TestRunDenialsKeepsTheLast: a later event of the same refusal carries
// the count so far; one line is kept per operation and object, in the
// order first seen.
func TestRunDenialsKeepsTheLast(t *testing.T) {
	d := &runDenials{byKey: map[[2]string]int{}}
	d.add(abi.SandboxDenied{Op: abi.DeniedWrite, Object: "/etc", Count: 1})
	d.add(abi.SandboxDenied{Op: abi.DeniedRead, Object: "/root", Count: 1})
	d.add(abi.SandboxDenied{Op: abi.DeniedWrite, Object: "/etc", Count: 4})
	d.add(abi.SandboxDenied{Op: abi.DeniedWrite, Object: "/etc", Count: 2}) // an older count, late
	if len(d.list) != 2 || d.list[0].Object != "/etc" || d.list[0].Count != 4 || d.list[1].Object != "/root" {
		t.Errorf("kept %+v", d.list)
	}
}
