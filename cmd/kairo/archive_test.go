package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// examplesCopy is a copy of manifests/examples in a folder the sandboxes'
// uids may pass through: the clone may be anywhere, under a 0700 folder
// of root's too.
func examplesCopy(t *testing.T) string {
	t.Helper()
	dir := openDir(t)
	if err := os.CopyFS(dir, os.DirFS("../../manifests/examples")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The archive example with a daemon up, as without one (issue 18): it
// writes the archive in its temp folder, then moves it to the workspace.
// The daemon's temp folder must be the sandbox uid's to write.
func TestArchiveThroughDaemon(t *testing.T) {
	t.Parallel()
	skill := filepath.Join(examplesCopy(t), "archive", "skill.toml")
	for _, tc := range []struct {
		name string
		home func(t *testing.T) string
	}{
		{"daemon", func(t *testing.T) string { home := t.TempDir(); startUp(t, home); return home }},
		{"no daemon", noKernel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := tc.home(t)
			work := userWorkspace(t)
			if err := os.Mkdir(filepath.Join(work, "src"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(work, "src", "todo.txt"), []byte("done\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := kairo(t, home, "run", "--work", work, skill, "--", "path=src", "name=backup")
			if r.code != 0 || r.stdout != "out/backup.tar.gz\n" || strings.Contains(r.stderr, "Permission denied") {
				t.Fatalf("want exit 0 and the archive's path:\n%s", r)
			}
			if tc.name == "daemon" && !strings.Contains(r.stderr, "kairo: spawned p") {
				t.Errorf("the run did not go through the daemon's kernel:\n%s", r)
			}
			out, err := exec.Command("tar", "-tzf", filepath.Join(work, "out", "backup.tar.gz")).Output()
			if err != nil || !strings.Contains(string(out), "src/todo.txt") {
				t.Errorf("the archive does not hold src/todo.txt: %q, %v", out, err)
			}
		})
	}
}

// --explain explains a manifest without its params, their placeholders
// shown as such, each grant once; with the params, their values are put
// in. Run without --explain, a param left out is still an error.
func TestExplainWithoutParams(t *testing.T) {
	home := noKernel(t)
	skill := filepath.Join(examplesCopy(t), "archive", "skill.toml")
	r := kairo(t, home, "run", "--explain", skill)
	if r.code != 0 || strings.Contains(r.stderr, "needs param") {
		t.Fatalf("explain without params:\n%s", r)
	}
	if !regexpMatch(`(?m)^command    \S+/archive/run\.sh archive \{path\}$`, r.stdout) || !strings.Contains(r.stdout, "not given, shown as {NAME}: path") {
		t.Errorf("want the command with {path} as its placeholder:\n%s", r.stdout)
	}
	if n := strings.Count(r.stdout, "write   $TMP\n"); n != 1 {
		t.Errorf("explain lists write $TMP %d times, want once:\n%s", n, r.stdout)
	}

	// The control: params given are put in, and none is said missing.
	r = kairo(t, home, "run", "--explain", skill, "--", "path=src", "name=backup")
	if r.code != 0 || !regexpMatch(`(?m)^command    \S+/archive/run\.sh backup src$`, r.stdout) || strings.Contains(r.stdout, "not given") || strings.Contains(r.stdout, "{path}") {
		t.Errorf("explain with params:\n%s", r)
	}
	// A value given is still checked: steps is an integer.
	demo := filepath.Join(filepath.Dir(filepath.Dir(skill)), "progress-demo", "skill.toml")
	if r := kairo(t, home, "run", "--explain", demo, "--", "steps=many"); r.code == 0 || !strings.Contains(r.stderr, `param "steps"`) {
		t.Errorf("explain with a bad value:\n%s", r)
	}
	if r := kairo(t, home, "run", "--explain", demo, "--", "steps=3"); r.code != 0 || !regexpMatch(`(?m)^command    \S+/run\.sh 3 0\.1$`, r.stdout) {
		t.Errorf("explain with a good value:\n%s", r)
	}
	// And a run without the param is refused, naming it.
	r = kairo(t, home, "run", "--work", userWorkspace(t), skill)
	if r.code == 0 || !strings.Contains(r.stderr, `needs param "path"`) {
		t.Errorf("a run without its required param:\n%s", r)
	}
}
