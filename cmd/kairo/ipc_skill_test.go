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
	t.Parallel()
	home := t.TempDir()
	startUp(t, home)
	dir := skillFolder(t, "kairo-skill-")
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

// TestSkillSpawnAttenuated is row 1 of the authority issue, as an attacker
// tried it: a skill granted only process.spawn names a manifest of its own
// making, and a folder of another account to run in. Both are refused by
// name. The controls: it runs an installed skill by name, and a command in
// its own workspace — and that command runs as the skill's own sandbox
// uid, in its tree, never as the folder's owner.
func TestSkillSpawnAttenuated(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	victim := skillFolder(t, "kairo-victim-")
	os.Chmod(victim, 0o777)
	os.Chown(victim, 4242, 4242) // an account's folder

	// An installed skill, which a skill may run by name.
	hello := filepath.Join(home, "skills", "hello")
	os.MkdirAll(hello, 0o755)
	os.WriteFile(filepath.Join(hello, "skill.toml"), []byte(`[skill]
name = "hello"
command = ["/usr/bin/echo", "hello from an installed skill"]
[fs]
read = ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"]
exec = ["/usr/bin/echo"]
`), 0o644)
	startUp(t, home)

	dir := skillFolder(t, "kairo-skill-")
	evil := filepath.Join(dir, "evil.toml")
	os.WriteFile(evil, []byte("[skill]\nname = \"evil\"\ncommand = [\"/usr/bin/id\"]\n[fs]\nread = [\"/\"]\nwrite = [\"/\"]\nexec = [\"/\"]\n"), 0o644)
	script := `K=` + kairoBin + `
echo "me=$(id -u)"
$K run ` + evil + ` 2>&1; echo "manifest=$?"
$K spawn --cwd ` + victim + ` -- /usr/bin/id -u 2>&1; echo "victim=$?"
$K spawn --skill hello 2>&1; echo "byname=$?"
$K spawn -- /usr/bin/id -u 2>/dev/null | sed 's/^/child=/'
exit 0`
	manifest := filepath.Join(dir, "skill.toml")
	text := `[skill]
name = "spawner"
command = ["/usr/bin/sh", "-c", '''` + script + `''']

[fs]
read = ["/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache", "/etc/passwd", "/etc/group", "` + filepath.Dir(kairoBin) + `", "` + dir + `"]
exec = ["/usr/bin", "` + kairoBin + `"]

[ipc]
call = ["process.spawn", "process.wait", "process.stdin.write"]
`
	if err := os.WriteFile(manifest, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	r := kairo(t, home, "run", manifest)
	if r.code != 0 {
		t.Fatalf("the skill failed: %s", r)
	}
	for _, want := range []string{
		"may not name a manifest file",
		"is outside what skill spawner may write",
		"hello from an installed skill", "byname=0",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the skill's output lacks %q:\n%s", want, r)
		}
	}
	if strings.Contains(r.stdout, "manifest=0") || strings.Contains(r.stdout, "victim=0") {
		t.Errorf("a refused spawn ran:\n%s", r)
	}
	me, child := field(r.stdout, "me="), field(r.stdout, "child=")
	if me == "" || me == "0" || child != me {
		t.Errorf("the skill runs as uid %q and its child as %q: want one sandbox uid for the tree\n%s", me, child, r)
	}
}

// field is the rest of the first line of out that starts with prefix.
func field(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// skillFolder makes a folder outside the test's temp folder, which the
// sandbox uids may not pass, that they may read: where a test's skill
// manifests and scripts live.
func skillFolder(t *testing.T, pattern string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	return dir
}
