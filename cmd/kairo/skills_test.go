package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// listed says whether the table of `kairo tools` lists progress-demo
// as a skill.
func listed(out string) bool { return regexpMatch(`(?m)^skill\.progress-demo +skill +fs\.`, out) }

// waitTools polls `kairo tools` until ok accepts its output, and returns
// it; the test fails after a deadline.
func waitTools(t *testing.T, home, what string, ok func(out string) bool) string {
	t.Helper()
	var r result
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if r = kairo(t, home, "tools"); r.code == 0 && ok(r.stdout) {
			return r.stdout
		}
	}
	t.Fatalf("kairo tools never showed %s:\n%s", what, r)
	return ""
}

// The README's way to install a skill, with the daemon running: its
// skills folder is there from the first start, so `cp -r` of a skill
// folder into it makes the right layout; the skill is picked up, runs by
// name through the agent, is picked up again when changed, and is gone
// once removed. A name that is neither a skill nor a program is answered
// as such, where a shell exited 127 before; a command line still runs.
func TestSkillsFolderFollowed(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	startUp(t, home)
	skills := filepath.Join(home, "skills")
	fi, err := os.Stat(skills)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("want the skills folder made at start, mode 0700: %v, %v", fi, err)
	}

	// Not installed yet: the agent says so; the control runs a command.
	r := kairo(t, home, "send", "run progress-demo steps=2")
	if !strings.Contains(r.stdout, "no program or skill named progress-demo") || !strings.Contains(r.stdout, "`kairo tools` lists the skills") || strings.Contains(r.stdout, "127") {
		t.Errorf("run of a skill not installed:\n%s", r)
	}
	if r := kairo(t, home, "send", "run true"); r.code != 0 || !strings.Contains(r.stdout, `{"command":"true"}`) || !strings.Contains(r.stdout, "`true` finished in") || !strings.Contains(r.stdout, "(exit code 0)") {
		t.Errorf("the control, a command on PATH:\n%s", r)
	}

	// A program by a bare name that is not there is refused at the spawn
	// the same way; one on PATH runs.
	if r := kairo(t, home, "spawn", "--", "nosuchprog", "-x"); r.code == 0 || !strings.Contains(r.stderr, "no program or skill named nosuchprog") {
		t.Errorf("spawn of a program not on PATH:\n%s", r)
	}
	if r := kairo(t, home, "spawn", "--", "true"); r.code != 0 {
		t.Errorf("the control, spawn of a program on PATH:\n%s", r)
	}

	// The README's line.
	if out, err := exec.Command("cp", "-r", "../../manifests/examples/progress-demo", skills+"/").CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	waitTools(t, home, "skill.progress-demo", func(out string) bool { return listed(out) })
	r = kairo(t, home, "send", "run progress-demo steps=2 delay=0")
	if r.code != 0 || !strings.Contains(r.stdout, `"skill":"progress-demo"`) || !strings.Contains(r.stdout, "`progress-demo steps=2 delay=0` finished in") || !strings.Contains(r.stdout, "(exit code 0)") {
		t.Fatalf("run progress-demo once installed:\n%s", r)
	}

	// Changed: its new description is what the agent is offered.
	manifest := filepath.Join(skills, "progress-demo", "skill.toml")
	text, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(text), `description = "Count to 100%`, `description = "Changed: count to 100%`, 1)
	if changed == string(text) {
		t.Fatal("the example's description moved; update the test")
	}
	if err := os.WriteFile(manifest, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := kairo(t, home, "tools", "skill.progress-demo")
		if strings.Contains(r.stdout, "Changed: count to 100%") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the changed description never showed:\n%s", r)
		}
	}

	// A broken one is listed with why, beside the good one; a skill.toml
	// dropped in the folder itself is told where it belongs.
	broken := filepath.Join(skills, "broken")
	if err := os.Mkdir(broken, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, "skill.toml"), []byte("[skill]\nname = \"broken\"\ncommand = []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(skills, "skill.toml"), text, 0o644); err != nil {
		t.Fatal(err)
	}
	out := waitTools(t, home, "the broken skill", func(out string) bool {
		return strings.Contains(out, "skill.broken: not loaded:") && strings.Contains(out, "a skill is a folder holding its skill.toml")
	})
	if !listed(out) {
		t.Errorf("the good skill went with the broken one:\n%s", out)
	}

	// Removed: gone from the tools, and run by name says so again.
	if err := os.RemoveAll(filepath.Join(skills, "progress-demo")); err != nil {
		t.Fatal(err)
	}
	waitTools(t, home, "no skill.progress-demo", func(out string) bool { return !listed(out) })
	r = kairo(t, home, "send", "run progress-demo steps=2")
	if !strings.Contains(r.stdout, "no program or skill named progress-demo") {
		t.Errorf("run of a skill removed:\n%s", r)
	}

	// kairo skills add checks the manifest and copies the folder in; the
	// daemon picks it up before the command returns.
	r = kairo(t, home, "skills", "add", "../../manifests/examples/checksum")
	if r.code != 0 || !strings.Contains(r.stdout, "installed skill checksum in "+filepath.Join(skills, "checksum")) || !strings.Contains(r.stdout, `the daemon runs it: "run checksum ARGS"`) {
		t.Fatalf("skills add:\n%s", r)
	}
	r = kairo(t, home, "skills")
	if r.code != 0 || !regexpMatch(`(?m)^checksum +`+regexp.QuoteMeta(filepath.Join(skills, "checksum"))+`$`, r.stdout) || !strings.Contains(r.stdout, filepath.Join(skills, "broken")+": not loaded:") {
		t.Errorf("kairo skills:\n%s", r)
	}
	// Once more: refused without --replace, done with it.
	if r := kairo(t, home, "skills", "add", "../../manifests/examples/checksum"); r.code == 0 || !strings.Contains(r.stderr, "installed already") {
		t.Errorf("skills add of a skill installed already:\n%s", r)
	}
	if r := kairo(t, home, "skills", "add", "--replace", "../../manifests/examples/checksum"); r.code != 0 || !strings.Contains(r.stdout, "the daemon runs it") {
		t.Errorf("skills add --replace:\n%s", r)
	}
	// A folder without a manifest is refused, and nothing is copied.
	empty := t.TempDir()
	if r := kairo(t, home, "skills", "add", empty); r.code == 0 || !strings.Contains(r.stderr, "skill.toml") {
		t.Errorf("skills add of a folder without a manifest:\n%s", r)
	}
	if entries, _ := os.ReadDir(skills); len(entries) != 3 { // broken, checksum, skill.toml
		t.Errorf("the skills folder holds %d entries, want 3: %v", len(entries), entries)
	}
}
