package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHostNamed: kairo up with [host] name = "a" on an embedded JetStream
// store that listens, as a host of several sharing it runs. Its events
// carry the host a, its processes are "pN@a", kairo status (text and
// --json) and the log line of kairo up name it, and kairo kill of another
// host's process says which host runs it.
func TestHostNamed(t *testing.T) {
	home := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	toml := "[host]\nname = \"a\"\n[store]\nkind = \"jetstream\"\n[store.jetstream]\nembedded = true\nlisten = \"" + addr + "\"\npeers = [\"b\"]\n"
	if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startUp(t, home)

	if r := kairo(t, home, "status"); r.code != 0 || !regexp.MustCompile(`(?m)^host +a \(`).MatchString(r.stdout) {
		t.Fatalf("status names no host a:\n%s", r)
	}
	r := kairo(t, home, "status", "--json")
	var st struct {
		Host string `json:"host"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil || st.Host != "a" {
		t.Fatalf("status --json names no host a:\n%s", r)
	}

	r = kairo(t, home, "spawn", "--", "sh", "-c", "echo hi")
	m := regexp.MustCompile(`(?m)^kairo: spawned (p\d+@a) \(pid \d+\)$`).FindStringSubmatch(r.stderr)
	if r.code != 0 || r.stdout != "hi\n" || m == nil {
		t.Fatalf("spawn: want exit 0, \"hi\" and a process pN@a:\n%s", r)
	}
	id := m[1]

	r = kairo(t, home, "kill", "p3@b")
	if want := `process p3@b runs on host "b", not on this one ("a"): control it with the kairo of that host`; r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Fatalf("kill p3@b: want %q:\n%s", want, r)
	}
	if r := kairo(t, home, "kill", "p999999@a"); r.code == 0 || !strings.Contains(r.stderr, "no process p999999@a; `kairo ps` lists yours") {
		t.Fatalf("kill p999999@a: want no such process:\n%s", r)
	}

	r = kairo(t, home, "events", "replay", "--json", "kairo.>")
	if r.code != 0 {
		t.Fatalf("events replay:\n%s", r)
	}
	var spawned bool
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev struct {
			Type string         `json:"type"`
			Host string         `json:"host"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if ev.Host != "a" {
			t.Errorf("%s carries the host %q, want \"a\": %s", ev.Type, ev.Host, line)
		}
		if ev.Type == "kairo.process.spawned" && ev.Data["processId"] == id {
			spawned = true
		}
	}
	if !spawned {
		t.Errorf("the log holds no kairo.process.spawned of %s:\n%s", id, r.stdout)
	}

	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d\n%s", code, d.stderr)
	}
	if up := regexp.MustCompile(`msg="kairo is up".* store=.* host=a`).FindString(d.stderr.String()); up == "" {
		t.Errorf("the log line of kairo up names no host a:\n%s", d.stderr)
	}
}

// TestHostUnnamed: on a store of its own, the control, a daemon names no
// host: status says none, and ids stay "pN".
func TestHostUnnamed(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	startUp(t, home)
	if r := kairo(t, home, "status"); r.code != 0 || regexp.MustCompile(`(?m)^host `).MatchString(r.stdout) {
		t.Fatalf("status of a daemon without a host name shows one:\n%s", r)
	}
	r := kairo(t, home, "spawn", "--", "true")
	if r.code != 0 || !regexp.MustCompile(`(?m)^kairo: spawned p\d+ \(pid \d+\)$`).MatchString(r.stderr) {
		t.Fatalf("spawn: want a process pN:\n%s", r)
	}
}
