package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/internal/smalldisk"
)

// A home on a disk that fills up, on a real tmpfs. The daemon starts on
// the full disk (it used to exit: "publish kairo.system.started: disk is
// full"), compiles a drop-in plugin in memory when its compilation cache
// cannot be written (it used to refuse every plugin for good), serves
// reads, refuses publishes with an error that says why, shows it in
// kairo status, records kairo.system.store.writable once space is freed,
// and stops cleanly on a full disk; nothing acknowledged is lost. The
// control is the first run, on a disk with room.
func TestFullDiskUp(t *testing.T) {
	t.Parallel()
	disk := smalldisk.Mount(t, 48<<20)
	home := filepath.Join(disk, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	staged := t.TempDir()
	buildPlugin(t, staged, "echo")

	// The home's own compilation cache, on the small disk (ownCacheEnv).
	d := startUpEnv(t, home, kairoBin, ownCacheEnv(home)) // the control
	var acked []string
	publish := func() result {
		r := kairo(t, home, "events", "publish", "test.disk", `{"n":1}`)
		if m := regexp.MustCompile(`published seq=(\d+)`).FindStringSubmatch(r.stdout); m != nil {
			acked = append(acked, "["+m[1]+"]")
		}
		return r
	}
	for range 5 {
		if r := publish(); r.code != 0 {
			t.Fatalf("publish on a disk with room:\n%s", r)
		}
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d:\n%s", code, d.stderr)
	}

	// A plugin to compile, then no space left.
	for _, f := range []string{"echo.wasm", "echo.toml"} {
		b, err := os.ReadFile(filepath.Join(staged, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, "plugins", f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	free := smalldisk.Fill(t, disk)
	d = startUpEnv(t, home, kairoBin, ownCacheEnv(home))
	if !strings.Contains(d.stderr.String(), "disk of the event store is full") {
		t.Fatalf("the daemon did not say its disk is full:\n%s", d.stderr)
	}
	if !strings.Contains(d.stderr.String(), "compilation cache could not be written") || !strings.Contains(d.stderr.String(), filepath.Join(home, "cache")) {
		t.Fatalf("the daemon did not say which cache folder failed:\n%s", d.stderr)
	}
	if r := kairo(t, home, "plugins"); !regexp.MustCompile(`(?m)^echo\s.*running`).MatchString(r.stdout) {
		t.Fatalf("the drop-in is not running on a full disk:\n%s\n%s", r, d.stderr)
	}
	r := kairo(t, home, "status")
	if !strings.Contains(r.stdout, "REFUSING WRITES") {
		t.Fatalf("kairo status on a full disk:\n%s", r)
	}
	r = publish()
	if r.code == 0 || !strings.Contains(r.stderr, "is full") || !strings.Contains(r.stderr, "free space") {
		t.Fatalf("publish on a full disk:\n%s", r)
	}
	r = kairo(t, home, "events", "replay", "test.disk")
	for _, seq := range acked {
		if !strings.Contains(r.stdout, seq) {
			t.Fatalf("replay on a full disk lacks %s:\n%s", seq, r)
		}
	}

	free()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r = kairo(t, home, "events", "replay", "kairo.system.store.writable", "--json")
		if strings.Contains(r.stdout, `"refused"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no kairo.system.store.writable within 20 s of freeing space:\n%s\n%s", r, d.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := publish(); r.code != 0 {
		t.Fatalf("publish once space is back:\n%s", r)
	}
	if r := kairo(t, home, "status"); strings.Contains(r.stdout, "REFUSING WRITES") {
		t.Fatalf("kairo status once space is back:\n%s", r)
	}

	free = smalldisk.Fill(t, disk)
	if code := d.stop(); code != 0 {
		t.Fatalf("a stop on a full disk exited %d:\n%s", code, d.stderr)
	}
	free()
	d = startUpEnv(t, home, kairoBin, ownCacheEnv(home))
	r = kairo(t, home, "events", "replay", "test.disk")
	for _, seq := range acked {
		if !strings.Contains(r.stdout, seq) {
			t.Fatalf("after the full disk, the log lacks acknowledged event %s:\n%s", seq, r)
		}
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d:\n%s", code, d.stderr)
	}
}
