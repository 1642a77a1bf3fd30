package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

func writeKairoTOML(t *testing.T, home, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// kairo store permissions HOST prints the nats-server block of that host:
// its own subject, none of the calls that change the stream. A name no
// subject can carry is a usage error.
func TestStorePermissions(t *testing.T) {
	home := t.TempDir()
	writeKairoTOML(t, home, "[store]\nkind = \"jetstream\"\n[store.jetstream]\nurl = \"nats://n1:4222\"\nstream = \"OPS\"\n")
	r := kairo(t, home, "store", "permissions", "build-2")
	if r.code != 0 {
		t.Fatalf("store permissions:\n%s", r)
	}
	for _, want := range []string{"authorization {", `user: "build-2"`, `password: "PASSWORD"`, `"OPS.log.build-2"`, `"$JS.API.STREAM.MSG.DELETE.>"`, `"_INBOX_build-2.>"`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the block lacks %s:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, `"OPS.log.>"`) || strings.Contains(r.stdout, `"OPS.log"`) {
		t.Errorf("the block lets build-2 publish beyond its own subject:\n%s", r.stdout)
	}
	if r := kairo(t, home, "store", "permissions", "a*"); r.code != 2 || !strings.Contains(r.stderr, "not a host name") {
		t.Errorf("store permissions a*: want a usage error:\n%s", r)
	}
}

// kairo up leaves a stream that differs from kairo.toml as it is and
// warns, naming kairo store apply; kairo store apply applies it and says
// what changed; it refuses while kairo up runs the embedded server.
func TestStoreApply(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	config := func(maxBytes string) {
		writeKairoTOML(t, home, "[store]\nkind = \"jetstream\"\n[store.jetstream]\nembedded = true\nmax_bytes = \""+maxBytes+"\"\n")
	}
	config("1MiB")
	if r := kairo(t, home, "store", "apply"); r.code != 0 || !strings.Contains(r.stdout, "created stream KAIRO") || !strings.Contains(r.stdout, "max_bytes 1MiB") {
		t.Fatalf("store apply on no stream:\n%s", r)
	}
	config("2MiB")
	d := startUp(t, home)
	if !waitFor(func() bool { return strings.Contains(d.stderr.String(), "max_bytes 1MiB, kairo.toml says 2MiB") }) || !strings.Contains(d.stderr.String(), "kairo store apply") {
		t.Fatalf("kairo up did not warn of the stream's max_bytes:\n%s", d.stderr)
	}
	if r := kairo(t, home, "store", "apply"); r.code == 0 || !strings.Contains(r.stderr, "stop it, then run kairo store apply") {
		t.Fatalf("store apply while kairo up runs the embedded server:\n%s", r)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d\n%s", code, d.stderr)
	}
	if r := kairo(t, home, "store", "apply"); r.code != 0 || !strings.Contains(r.stdout, "max_bytes: 1MiB → 2MiB") {
		t.Fatalf("store apply:\n%s", r)
	}
	if r := kairo(t, home, "store", "apply"); r.code != 0 || !strings.Contains(r.stdout, "nothing changed") {
		t.Fatalf("store apply again:\n%s", r)
	}
	d = startUp(t, home)
	time.Sleep(200 * time.Millisecond)
	if strings.Contains(d.stderr.String(), "kairo.toml says") {
		t.Fatalf("kairo up warns after apply:\n%s", d.stderr)
	}
}

func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

// The password of a url never shows: not in kairo status, its JSON, the
// daemon's log or kairo.log; the user and the host do.
func TestStatusRedactsURL(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
		Users: []*server.User{{Username: "ops", Password: "hunter2-secret"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("the nats-server was not ready")
	}
	home := t.TempDir()
	writeKairoTOML(t, home, fmt.Sprintf("[host]\nname = \"a\"\n[store]\nkind = \"jetstream\"\n[store.jetstream]\nurl = \"nats://ops:hunter2-secret@127.0.0.1:%d\"\n", port))
	d := startUp(t, home)
	shown := fmt.Sprintf("nats://ops:xxxxx@127.0.0.1:%d", port)
	r := kairo(t, home, "status")
	if r.code != 0 || strings.Contains(r.stdout, "hunter2") || !strings.Contains(r.stdout, shown) {
		t.Errorf("status:\n%s", r)
	}
	r = kairo(t, home, "status", "--json")
	var st map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil || strings.Contains(r.stdout, "hunter2") || !strings.Contains(r.stdout, shown) {
		t.Errorf("status --json:\n%s", r)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d\n%s", code, d.stderr)
	}
	if log := d.stderr.String(); strings.Contains(log, "hunter2") || !strings.Contains(log, shown) {
		t.Errorf("kairo up's log:\n%s", log)
	}
	if b, err := os.ReadFile(filepath.Join(home, "kairo.log")); err == nil && strings.Contains(string(b), "hunter2") {
		t.Errorf("kairo.log shows the password:\n%s", b)
	}

	// A failed start: the error names the URL without its password.
	writeKairoTOML(t, home, fmt.Sprintf("[host]\nname = \"a\"\n[store]\nkind = \"jetstream\"\n[store.jetstream]\nurl = \"nats://ops:wrong-secret@127.0.0.1:%d\"\n", port))
	r = kairo(t, home, "up")
	if r.code == 0 || strings.Contains(r.stderr, "wrong-secret") || !strings.Contains(r.stderr, "ops:xxxxx@") || !strings.Contains(strings.ToLower(r.stderr), "authorization violation") {
		t.Errorf("kairo up with a wrong password:\n%s", r)
	}
	if b, err := os.ReadFile(filepath.Join(home, "kairo.log")); err == nil && strings.Contains(string(b), "secret") {
		t.Errorf("kairo.log shows a password:\n%s", b)
	}
}

// An embedded server that listens on every address, as allow_remote lets
// it, is started with a warning; one on loopback without it (the control)
// is not warned of. Each peer's password file is named in the log.
func TestUpListenRemoteWarns(t *testing.T) {
	for _, remote := range []bool{true, false} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		home := t.TempDir()
		listen := fmt.Sprintf("listen = \"127.0.0.1:%d\"\n", port)
		if remote {
			listen = fmt.Sprintf("listen = \"0.0.0.0:%d\"\nallow_remote = true\n", port)
		}
		writeKairoTOML(t, home, "[host]\nname = \"a\"\n[store]\nkind = \"jetstream\"\n[store.jetstream]\nembedded = true\npeers = [\"b\"]\n"+listen)
		d := startUp(t, home)
		if !waitFor(func() bool { return strings.Contains(d.stderr.String(), "b.password") }) {
			t.Fatalf("kairo up names no password file of peer b:\n%s", d.stderr)
		}
		if warned := strings.Contains(d.stderr.String(), "other machines reach"); warned != remote {
			t.Errorf("allow_remote %v: warned %v:\n%s", remote, warned, d.stderr)
		}
		if fi, err := os.Stat(filepath.Join(home, "jetstream", "peers", "b.password")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("b's password file: %v", err)
		}
		if code := d.stop(); code != 0 {
			t.Fatalf("kairo up exited %d\n%s", code, d.stderr)
		}
	}
}
