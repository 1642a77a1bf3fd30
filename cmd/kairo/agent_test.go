package main

import (
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/internal/wasmbuild"
)

// buildPlugin builds plugins/NAME into dir with its manifest beside it.
func buildPlugin(t *testing.T, dir, name string) {
	t.Helper()
	if err := wasmbuild.Plugin(name, dir); err != nil {
		t.Fatal(err)
	}
}

// A person talks to the agent of a running daemon: a task runs to its end;
// a long one is asked about; the daemon is killed with SIGKILL mid-task and
// started again; the agent then knows the task was interrupted and says so,
// and the run loop's timeline shows it.
func TestAgentSurvivesAKill(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	d := startUp(t, home)

	r := kairo(t, home, "send", "run echo hello")
	if r.code != 0 || !strings.Contains(r.stdout, `· process.spawn {"command":"echo hello"}`) || !strings.Contains(r.stdout, "`echo hello` finished in") {
		t.Fatalf("send run echo hello:\n%s", r)
	}
	if r := kairo(t, home, "send", "--no-follow", "run sleep 30"); r.code != 0 || !strings.Contains(r.stdout, `{"command":"sleep 30"}`) {
		t.Fatalf("send run sleep 30:\n%s", r)
	}
	// --no-follow returns with the first reply, which may come before the
	// process has started: ask until it runs.
	for deadline := time.Now().Add(30 * time.Second); ; {
		r := kairo(t, home, "send", "how far along is it?")
		if r.code == 0 && strings.Contains(r.stdout, "`sleep 30` is running (") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("progress:\n%s", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.kill()

	d = startUp(t, home)
	r = kairo(t, home, "send", "how far along is it?")
	if r.code != 0 || !strings.Contains(r.stdout, "`sleep 30`: interrupted (the daemon stopped while it ran)") {
		t.Fatalf("progress after the restart:\n%s", r)
	}
	r = kairo(t, home, "runs")
	if r.code != 0 || !regexpMatch(`(?m)^\S+\s+.*\s+interrupted\s+\d+\s+0\s+run sleep 30$`, r.stdout) || !regexpMatch(`(?m)\sdone\s+\d+\s+0\s+run echo hello$`, r.stdout) {
		t.Fatalf("kairo runs:\n%s", r)
	}
	var id, echo string
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasSuffix(line, "run sleep 30") {
			id = strings.Fields(line)[0]
		}
		if strings.HasSuffix(line, "run echo hello") {
			echo = strings.Fields(line)[0]
		}
	}
	r = kairo(t, home, "runs", "show", id)
	for _, want := range []string{`task opened: "run sleep 30"`, `calls process.spawn {"command":"sleep 30"}`, "kairo.process.spawned", "kairo.process.interrupted", "the daemon stopped while it ran"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("runs show lacks %q:\n%s", want, r)
		}
	}

	// Each run loop replays as it ran — the second across the restart —
	// through the daemon, and from the data folder once it has stopped.
	for _, run := range []string{echo, id} {
		r = kairo(t, home, "replay", "--run", run)
		if r.code != 0 || !strings.Contains(r.stdout, "the policy decided as recorded") || !regexpMatch(`replayed [1-9]\d* decisions`, r.stdout) {
			t.Fatalf("replay %s:\n%s", run, r)
		}
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d", code)
	}
	r = kairo(t, home, "replay", "--run", echo)
	if r.code != 0 || !strings.Contains(r.stdout, "the policy decided as recorded") || !strings.Contains(r.stdout, `"run echo hello"`) {
		t.Fatalf("replay with no daemon:\n%s", r)
	}
	if r := kairo(t, home, "replay", "--run", "nosuchrun"); r.code != 1 || !strings.Contains(r.stderr, "no run loop") {
		t.Fatalf("replay of an unknown run:\n%s", r)
	}
}
