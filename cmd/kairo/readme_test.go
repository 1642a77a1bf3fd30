package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's command lines, run as written against a real daemon with
// its built-in plugins compiled in, as `make run` starts it, and echo
// dropped in: each
// `./bin/kairo …` line of its sh blocks, in order, through /bin/sh in the
// repository's folder, with the placeholders a reader fills in (a task's
// ID, a process, a remembered segment) filled from the daemon's answers. A
// line that no longer works — a command renamed, a flag dropped, an
// example path moved, an error — fails the test with the line. A line
// added to the README is run by default, expecting exit 0. The daemon's
// kairo.toml is the README's own agents example, so that the lines about
// several agents run against the agents it configures.
func TestREADME(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	lines := readmeLines(t, filepath.Join(root, "README.md"))
	if len(lines) < 20 {
		t.Fatalf("found %d command lines in the README; the test reads them from its ```sh blocks", len(lines))
	}

	// A kairo as bin/ holds it, with echo as `make plugins` builds it
	// and as a drop-in.
	bin := binCopy(t)
	binDir := filepath.Dir(bin)
	home := t.TempDir()
	agents := readmeBlock(t, filepath.Join(root, "README.md"), "toml", "[agents.ops]")
	if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte(agents), 0o600); err != nil {
		t.Fatal(err)
	}
	buildPlugin(t, filepath.Join(binDir, "wasm"), "echo")
	buildPlugin(t, filepath.Join(home, "plugins"), "echo")
	d := startUpBin(t, home, bin)

	// The placeholders a reader fills in, from what the daemon answers.
	fill := map[string]func() string{
		"ID#0.2": func() string { return anchorOf(t, bin, home) },
		"ID":     func() string { return lastRun(t, home) },
		"p3":     func() string { return aProcess(t, bin, home, root) },
		"NAME":   func() string { return "echo" },
	}
	for _, line := range lines {
		t.Run(line, func(t *testing.T) {
			t.Logf("README: %s", line)
			cmd := fillIn(line, fill)
			cmd = strings.Replace(cmd, "./bin/kairo", bin, 1)
			cmd = strings.ReplaceAll(cmd, "bin/wasm/", filepath.Join(binDir, "wasm")+"/")
			how := readmeHow(line)
			if how.skip == "" && strings.Contains(line, "kairo run ") && os.Geteuid() == 0 {
				// As root a skill runs as a uid of its own, which cannot
				// read the checkout's files through a folder closed to
				// others (a clone in `mktemp -d`).
				how.skip = closedFolder(root)
			}
			if how.skip != "" {
				t.Skip(how.skip)
			}
			before, _ := filepath.Glob(filepath.Join(root, "heap-*.pb.gz"))
			r := shell(t, root, home, cmd, how)
			if how.check != nil {
				how.check(t, r)
			}
			if strings.Contains(line, "debug heap") {
				// It writes its profile in the current folder, the
				// checkout: there, and taken away, so the tree stays
				// as it was.
				after, _ := filepath.Glob(filepath.Join(root, "heap-*.pb.gz"))
				if len(after) != len(before)+1 {
					t.Errorf("kairo debug heap left %d profiles in %s, want one", len(after)-len(before), root)
				}
				for _, f := range after {
					if !slices.Contains(before, f) {
						os.Remove(f)
					}
				}
			}
			if r.code != 0 && !(how.endless && r.code == -1) {
				t.Fatalf("the README line\n  %s\nran as\n  %s\nand %s\ndaemon: %s", line, cmd, r, d.stderr)
			}
		})
	}
}

// readmeHow is how a README line is run and judged beyond its exit code.
type readmeRun struct {
	endless bool // runs until stopped (a tail, a follow): killed after a while
	stdin   string
	check   func(t *testing.T, r result)
	skip    string // why the line is not run here
}

func readmeHow(line string) readmeRun {
	contains := func(want ...string) func(t *testing.T, r result) {
		return func(t *testing.T, r result) {
			t.Helper()
			for _, w := range want {
				if !strings.Contains(r.stdout+r.stderr, w) {
					t.Fatalf("the README line %q printed no %q:\n%s", line, w, r)
				}
			}
		}
	}
	switch {
	case strings.Contains(line, "send \"run sleep 3\""):
		return readmeRun{check: contains("sleep 3")}
	case strings.Contains(line, "kairo chat"):
		return readmeRun{stdin: "what is running\n"}
	case strings.Contains(line, `--agent viewer "ask ops:`):
		return readmeRun{check: contains("ops: I could not run it: permission denied")}
	case strings.Contains(line, `--agent ops "run make test"`):
		return readmeRun{check: contains(`process.spawn {"command":"make test"}`)}
	case strings.Contains(line, "secrets set deploy"):
		return readmeRun{stdin: "example-token-123\n", check: contains("deploy")}
	case strings.Contains(line, "secrets list"):
		return readmeRun{check: contains("deploy")}
	case strings.Contains(line, "kairo agents"):
		return readmeRun{check: contains("* default", "ops", "viewer")}
	case strings.Contains(line, "events tail"), strings.Contains(line, "kairo attach "):
		return readmeRun{endless: true}
	case strings.Contains(line, "events publish demo.hi"):
		return readmeRun{}
	case strings.Contains(line, "ffmpeg"):
		return readmeRun{skip: "an example of a binary a reader has (ffmpeg, in.mp4); `spawn -- ` runs in the lines around it"}
	case strings.Contains(line, "--pty -- python3"):
		if _, err := exec.LookPath("python3"); err != nil {
			return readmeRun{skip: "no python3 here"}
		}
		return readmeRun{stdin: "print(6*7)\nexit()\n", check: contains("42")}
	case strings.Contains(line, " status"):
		return readmeRun{check: contains("events")}
	case strings.Contains(line, "run --explain"):
		return readmeRun{check: contains("write")}
	case strings.Contains(line, "sandbox check"):
		return readmeRun{check: contains("Landlock")}
	}
	return readmeRun{}
}

// shell runs cmd with /bin/sh in dir against home, killing it after two
// minutes (a loaded machine), or after 2 s for an endless line (code -1
// then).
func shell(t *testing.T, dir, home, cmd string, how readmeRun) result {
	t.Helper()
	wait := 2 * time.Minute
	if how.endless {
		wait = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c := exec.CommandContext(ctx, "/bin/sh", "-c", cmd)
	c.Dir, c.Env = dir, childEnv(home)
	// The line's processes go with the shell when it is stopped.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = 5 * time.Second
	c.Stdin = strings.NewReader(how.stdin)
	var out, errOut syncBuffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		code = -1
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return result{out.String(), errOut.String(), code}
}

// readmeLines are the ./bin/kairo lines of the README's sh blocks, without
// their comments.
func readmeLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
		case strings.HasPrefix(line, "```"):
			in = false
		case in && strings.HasPrefix(line, "./bin/kairo "):
			out = append(out, strings.TrimSpace(stripComment(line)))
		}
	}
	return out
}

// readmeBlock is the first ```lang block of the README at path that holds
// marker.
func readmeBlock(t *testing.T, path, lang, marker string) string {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range strings.Split(string(text), "```"+lang+"\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		if strings.Contains(block, marker) {
			return block
		}
	}
	t.Fatalf("the README has no ```%s block with %s", lang, marker)
	return ""
}

// stripComment drops a shell comment: a # outside quotes after a blank.
func stripComment(line string) string {
	quote := byte(0)
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '\'' || c == '"'):
			quote = c
		case quote == 0 && c == '#' && i > 0 && line[i-1] == ' ':
			return line[:i]
		}
	}
	return line
}

// fillIn replaces the placeholders of line, each a word of its own.
// Each is filled once, when a line first needs it.
func fillIn(line string, fill map[string]func() string) string {
	for _, key := range []string{"ID#0.2", "ID", "p3", "NAME"} {
		re := regexp.MustCompile(`(^|\s)` + regexp.QuoteMeta(key) + `(\s|$)`)
		if re.MatchString(line) {
			v := fill[key]()
			fill[key] = func() string { return v }
			line = re.ReplaceAllStringFunc(line, func(m string) string { return strings.Replace(m, key, v, 1) })
		}
	}
	return line
}

// binCopy is the tests' kairo binary copied into a folder of its own that
// others may pass, as an installed kairo is: it carries its built-in
// plugins compiled in, and nothing beside it replaces them.
func binCopy(tb testing.TB) string {
	tb.Helper()
	binDir := tb.TempDir()
	os.Chmod(binDir, 0o755) // sandboxed skills may exec kairo itself
	bin := filepath.Join(binDir, "kairo")
	exe, err := os.ReadFile(kairoBin)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(bin, exe, 0o755); err != nil {
		tb.Fatal(err)
	}
	return bin
}

// lastRun is the id of the daemon's newest run loop.
func lastRun(t *testing.T, home string) string {
	t.Helper()
	r := kairo(t, home, "runs", "--json")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var o runObj
	if r.code != 0 || json.Unmarshal([]byte(lines[0]), &o) != nil || o.ID == "" {
		t.Fatalf("no run to fill ID with:\n%s", r)
	}
	return o.ID
}

// anchorOf is the anchor of a remembered segment, once a run is indexed.
func anchorOf(t *testing.T, bin, home string) string {
	t.Helper()
	var anchor string
	until(t, "a remembered segment", func() bool {
		r := kairo(t, home, "memory", "search", "--json", "sleep")
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var c struct {
				Anchor string `json:"anchor"`
			}
			if json.Unmarshal([]byte(line), &c) == nil && c.Anchor != "" {
				anchor = c.Anchor
				return true
			}
		}
		return false
	})
	return anchor
}

// aProcess is a running process of another client, for the lines that
// follow, attach and kill, to act on: a `kairo spawn -- sleep 60` left
// running beside the test.
func aProcess(t *testing.T, bin, home, root string) string {
	t.Helper()
	c := exec.Command(bin, "spawn", "--", "sleep", "60")
	c.Dir, c.Env = root, childEnv(home)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	var id string
	until(t, "the spawned process listed", func() bool {
		r := kairo(t, home, "ps", "--json")
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var p processJSON
			if json.Unmarshal([]byte(line), &p) == nil && p.Status == "running" && strings.Join(p.Argv, " ") == "sleep 60" {
				id = p.ID
				return true
			}
		}
		return false
	})
	return id
}

// closedFolder says which folder on the way to dir others may not pass,
// or "" when none is.
func closedFolder(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			return "the checkout lies under " + d + ", which other users may not pass: a sandboxed skill cannot read its files"
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}
