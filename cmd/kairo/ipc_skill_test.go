package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSkillIPCScopes: a skill whose manifest grants [ipc] scopes reaches
// the kernel on the descriptor it was handed — the socket itself is out of
// its sandbox — and only within those scopes: the granted subject is
// published, the neighbouring subject and an ungranted method are refused
// by name.
func TestSkillIPCScopes(t *testing.T) {
	home := t.TempDir()
	startUp(t, home)
	dir, err := os.MkdirTemp("", "kairo-skill-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	manifest := filepath.Join(dir, "skill.toml")
	script := `K=` + kairoBin + `
$K events publish kairo.skill.demo.done '{"ok":true}' || exit 10
$K events publish kairo.other '{}' 2>&1 && exit 11
$K ps 2>&1 && exit 12
ls ` + home + ` 2>&1 && exit 13
exit 0`
	text := `[skill]
name = "ipc-demo"
command = ["/usr/bin/sh", "-c", '''` + script + `''']

[fs]
read = ["/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache", "` + filepath.Dir(kairoBin) + `"]
exec = ["/usr/bin", "` + kairoBin + `"]

[ipc]
call = ["events.publish"]
publish = ["kairo.skill.demo.>"]
`
	if err := os.WriteFile(manifest, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	r := kairo(t, home, "run", manifest)
	if r.code != 0 {
		t.Fatalf("the skill failed: %s", r)
	}
	for _, want := range []string{
		`not granted: events.publish of "kairo.other"`,
		"not granted: process.status",
		"Permission denied", // the kernel's home, socket and all
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the skill's output lacks %q:\n%s", want, r)
		}
	}
	replay := kairo(t, home, "events", "replay", "kairo.>")
	if !strings.Contains(replay.stdout, "Z kairo.skill.demo.done skill/ipc-demo") || strings.Contains(replay.stdout, "Z kairo.other") {
		t.Errorf("the bus should hold the granted event and not the other:\n%s", replay.stdout)
	}
}
