package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/kairo-os/kairo/sandbox"
)

// The tests of kairo run use skills written here, in folders the sandbox
// uids can reach (t.TempDir's parent is 0700).

// systemGrants gives a skill the system's programs and libraries.
const systemGrants = `
[fs]
read = ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"]
write = ["$WORK"]
exec = ["/usr/bin"]
`

// openDir is a fresh folder every user may enter, removed after the test.
func openDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kairo-run-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeSkill writes a skill.toml of text in a folder of its own and
// returns its path.
func writeSkill(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(openDir(t), "skill.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// userWorkspace is a workspace whose mode lets every uid write it: the
// skill runs as a uid of its own, never as the folder's owner, so only
// the folder's mode lets it write there.
func userWorkspace(t *testing.T) string {
	t.Helper()
	work := openDir(t)
	if err := os.Chmod(work, 0o777); err != nil {
		t.Fatal(err)
	}
	return work
}

// noKernel is a KAIRO_HOME where no kernel runs: kairo run starts a
// private one.
func noKernel(t *testing.T) string { return t.TempDir() }

// echoSkill prints its param, the first extra argument and exits with its
// code param.
const echoSkill = `[skill]
name = "echo"
command = ["/usr/bin/sh", "-c", 'echo "greeting=$1 extra=$3"; echo "to stderr" >&2; exit "$2"', "sh", "{greeting}", "{code}"]

[params.greeting]
description = "what to print"

[params.code]
type = "integer"
default = 0
` + systemGrants

func TestRunStandalone(t *testing.T) {
	t.Parallel()
	skill := writeSkill(t, echoSkill)
	home := noKernel(t)
	for _, code := range []int{3, 0} {
		r := kairo(t, home, "run", skill, "--", "greeting=hello", fmt.Sprintf("code=%d", code), "more")
		if r.code != code || r.stdout != "greeting=hello extra=more\n" || !strings.Contains(r.stderr, "to stderr\n") {
			t.Errorf("want exit %d, the param and the extra argument on stdout:\n%s", code, r)
		}
	}
	r := kairo(t, home, "run", skill, "--", "code=1")
	if r.code == 0 || !strings.Contains(r.stderr, `needs param "greeting"`) {
		t.Errorf("a required param left out: %s", r)
	}
	if _, err := os.Stat(filepath.Join(home, "kernel.sock")); !os.IsNotExist(err) {
		t.Errorf("the private kernel left a socket in KAIRO_HOME: %v", err)
	}
}

func TestRunThroughDaemon(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	startUp(t, home)
	skill := writeSkill(t, echoSkill)
	r := kairo(t, home, "run", skill, "--", "greeting=daemon", "code=4")
	m := regexp.MustCompile(`kairo: spawned (p\d+) `).FindStringSubmatch(r.stderr)
	if r.code != 4 || r.stdout != "greeting=daemon extra=\n" || m == nil {
		t.Fatalf("want exit 4 and the skill's output:\n%s", r)
	}
	replay := kairo(t, home, "events", "replay", "--json", "kairo.process.>")
	for _, subject := range []string{"kairo.process.spawned", "kairo.process.exited"} {
		if !regexp.MustCompile(`"type":"` + regexp.QuoteMeta(subject) + `".*"processId":"` + m[1] + `"`).MatchString(replay.stdout) {
			t.Errorf("the daemon's bus has no %s for %s:\n%s", subject, m[1], replay.stdout)
		}
	}
}

func TestRunSeccompKill(t *testing.T) {
	t.Parallel()
	home := noKernel(t)
	// SIGSYS is what the seccomp filter kills with; kairo says so.
	skill := writeSkill(t, `[skill]
name = "sigsys"
command = ["/usr/bin/sh", "-c", 'kill -SYS $$']
`+systemGrants)
	r := kairo(t, home, "run", skill)
	if r.code != 128+int(syscall.SIGSYS) || !strings.Contains(r.stderr, "killed by SIGSYS") || !strings.Contains(r.stderr, "seccomp") {
		t.Errorf("want exit %d and a message naming seccomp:\n%s", 128+int(syscall.SIGSYS), r)
	}

	// A real kill by the filter: an x32 system call (getpid, 39, with the
	// x32 bit) from perl; the same call without the bit runs.
	perl, err := exec.LookPath("perl")
	if err != nil {
		t.Skip("no perl to make an x32 system call")
	}
	for _, tc := range []struct {
		nr     string
		killed bool
	}{{"0x40000027", true}, {"39", false}} {
		skill := writeSkill(t, `[skill]
name = "x32"
command = ["`+perl+`", "-e", 'syscall(`+tc.nr+`); print "alive\n"']
`+systemGrants)
		r := kairo(t, home, "run", skill)
		if tc.killed && (r.code != 128+int(syscall.SIGSYS) || !strings.Contains(r.stderr, "seccomp") || r.stdout != "") {
			t.Errorf("syscall(%s): want killed by the filter, exit 159:\n%s", tc.nr, r)
		}
		if !tc.killed && (r.code != 0 || r.stdout != "alive\n") {
			t.Errorf("syscall(%s): want exit 0:\n%s", tc.nr, r)
		}
	}
}

func TestRunExplain(t *testing.T) {
	t.Parallel()
	home := noKernel(t)
	work := userWorkspace(t)
	skill := writeSkill(t, `[skill]
name = "maker"
command = ["/usr/bin/touch", "made"]

[fs]
read = ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"]
write = ["$WORK"]
exec = ["/usr/bin/touch"]

[limits]
cpu_seconds = 5
`)
	r := kairo(t, home, "run", "--explain", "--work", work, skill)
	if r.code != 0 {
		t.Fatalf("explain: %s", r)
	}
	for _, want := range []string{
		"command    /usr/bin/touch made",
		"Landlock (ABI",
		"write   " + work,
		"exec    /usr/bin/touch",
		"seccomp filter",
		"credentials",
		"cpu          5s",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("explain does not say %q:\n%s", want, r.stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(work, "made")); !os.IsNotExist(err) {
		t.Errorf("explain ran the command: %v", err)
	}

	// The same without --explain runs it.
	if r := kairo(t, home, "run", "--work", work, skill); r.code != 0 {
		t.Fatalf("run: %s", r)
	}
	if _, err := os.Stat(filepath.Join(work, "made")); err != nil {
		t.Errorf("the skill did not run: %v", err)
	}
}

func TestSandboxCheck(t *testing.T) {
	r := kairo(t, t.TempDir(), "sandbox", "check")
	want := fmt.Sprintf("Landlock ABI %d\n", sandbox.LandlockABI())
	if r.code != 0 || !strings.HasPrefix(r.stdout, want) || !strings.Contains(r.stdout, "seccomp filter") {
		t.Errorf("want exit 0 and %q first:\n%s", want, r)
	}
}

func TestRunBadManifest(t *testing.T) {
	t.Parallel()
	home := noKernel(t)
	for _, tc := range []struct {
		name, text string
		want       []string // in the error, besides the file's path
	}{
		{"an unknown key", `[skill]
name = "bad"
command = ["/usr/bin/true"]
comand = ["/usr/bin/false"]
[fs]
exec = ["/usr/bin/true"]
`, []string{"skill.toml:4", "comand"}},
		{"a relative path", `[skill]
name = "bad"
command = ["/usr/bin/true"]
[fs]
read = ["data"]
exec = ["/usr/bin/true"]
`, []string{"skill.toml:5", "fs.read", `"data" is relative`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			skill := writeSkill(t, tc.text)
			r := kairo(t, home, "run", skill)
			if r.code == 0 || !strings.Contains(r.stderr, skill) {
				t.Fatalf("want an error naming %s:\n%s", skill, r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("the error does not say %q:\n%s", w, r.stderr)
				}
			}
		})
	}

	// Their neighbour: the same manifest, right, runs.
	skill := writeSkill(t, `[skill]
name = "good"
command = ["/usr/bin/true"]
[fs]
read = ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"]
exec = ["/usr/bin/true"]
`)
	if r := kairo(t, home, "run", skill); r.code != 0 {
		t.Errorf("a good manifest: %s", r)
	}
}

// TestRunExamples runs each example skill of manifests/examples as its
// README shows, in a workspace of an ordinary user.
func TestRunExamples(t *testing.T) {
	t.Parallel()
	// A copy in a folder the sandbox uids may pass through: the clone may
	// be anywhere, under a 0700 folder of root's too.
	examples, err := os.MkdirTemp("", "kairo-examples-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(examples) })
	if err := os.Chmod(examples, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(examples, os.DirFS("../../manifests/examples")); err != nil {
		t.Fatal(err)
	}
	home := noKernel(t)
	work := userWorkspace(t)
	files := map[string]string{
		"notes.txt":    "hello\n",
		"more.txt":     "two words\nand three more\n",
		"src/todo.txt": "done\nTODO: write tests\nFIXME later\n",
	}
	if err := os.Mkdir(filepath.Join(work, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(work, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		skill string
		args  []string
		want  []string // lines of stdout, in order
		noisy bool     // the sandbox refuses it something (search: grep's locale and /proc/self/maps; archive: bash)
	}{
		{"checksum", []string{"file=notes.txt", "more.txt"}, []string{
			"5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03  notes.txt",
			"20204cea28c5a9ea28137eb500455e7363c163d97910a7f77ae6421c360e4ed6  more.txt",
		}, false},
		{"wordcount", []string{"file=more.txt"}, []string{" 2  5 25 more.txt"}, false},
		{"wordcount", []string{"file=more.txt", "count=words"}, []string{"5 more.txt"}, false},
		{"search", []string{"pattern=TODO|FIXME", "path=src"}, []string{"src/todo.txt:2:TODO: write tests", "src/todo.txt:3:FIXME later"}, true},
		{"archive", []string{"path=src", "name=src-backup"}, []string{"out/src-backup.tar.gz"}, true},
		{"progress-demo", []string{"steps=4", "delay=0"}, []string{"progress=25%", "progress=50%", "progress=75%", "progress=100%", "done in 4 steps"}, false},
	} {
		t.Run(tc.skill+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			args := append([]string{"run", "--work", work, filepath.Join(examples, tc.skill, "skill.toml"), "--"}, tc.args...)
			r := kairo(t, home, args...)
			if r.code != 0 || r.stdout != strings.Join(tc.want, "\n")+"\n" {
				t.Errorf("want exit 0 and stdout\n%s\ngot %s", strings.Join(tc.want, "\n"), r)
			}
			// An example asks for what it uses: the sandbox refuses it
			// nothing (TestRunDenials shows a refusal would print here).
			if !tc.noisy && strings.Contains(r.stderr, "kairo: denied") {
				t.Errorf("the example was refused what it does:\n%s", r.stderr)
			}
		})
	}
	out, err := exec.Command("tar", "-tzf", filepath.Join(work, "out", "src-backup.tar.gz")).Output()
	if err != nil || !strings.Contains(string(out), "src/todo.txt") {
		t.Errorf("the archive does not hold src/todo.txt: %q, %v", out, err)
	}
}
