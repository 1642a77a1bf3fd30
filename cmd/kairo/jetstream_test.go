package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kairo up on the embedded JetStream store: status names it, the agent
// answers, and what was stored is there after a restart.
func TestUpOnJetStream(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte("[store]\nkind = \"jetstream\"\n[store.jetstream]\nembedded = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startUp(t, home)
	if r := kairo(t, home, "status"); r.code != 0 || !strings.Contains(r.stdout, "jetstream embedded at "+filepath.Join(home, "jetstream")) {
		t.Fatalf("status:\n%s", r)
	}
	if r := kairo(t, home, "send", "help"); r.code != 0 || !strings.Contains(r.stdout, "I understand") {
		t.Fatalf("send help:\n%s\n%s", r, d.stderr)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d\n%s", code, d.stderr)
	}
	startUp(t, home)
	starts, helps := 0, 0
	for _, ev := range eventLog(t, home) {
		switch {
		case ev.Type == "kairo.system.started":
			starts++
		case ev.Type == "kairo.user.message" && ev.Data["text"] == "help":
			helps++
		}
	}
	if starts != 2 || helps != 1 {
		t.Fatalf("after a restart the log holds %d starts and %d messages \"help\", want 2 and 1", starts, helps)
	}
}
