package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProcessCommands runs real processes in a real daemon through kairo
// spawn, attach, kill and ps.
func TestProcessCommands(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	startUp(t, home)

	t.Run("spawn passes streams and exit code", func(t *testing.T) {
		r := kairo(t, home, "spawn", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
		if r.code != 7 || r.stdout != "out\n" || !strings.Contains(r.stderr, "err\n") ||
			!regexp.MustCompile(`(?m)^kairo: spawned p\d+ \(pid \d+\)$`).MatchString(r.stderr) {
			t.Errorf("want exit 7, stdout \"out\", stderr \"err\" and the spawned line:\n%s", r)
		}
	})

	// What the process writes at once comes after the spawned line, though
	// it may reach kairo before the spawn's reply: both on stderr, where
	// their order shows.
	t.Run("spawned comes first", func(t *testing.T) {
		for i := range 8 {
			r := kairo(t, home, "spawn", "--", "sh", "-c", "echo first-words >&2")
			spawned, words := strings.Index(r.stderr, "kairo: spawned p"), strings.Index(r.stderr, "first-words")
			if r.code != 0 || spawned < 0 || words < 0 || words < spawned {
				t.Fatalf("run %d: want the spawned line, then the process's words:\n%s", i, r)
			}
		}
	})

	t.Run("spawn forwards stdin", func(t *testing.T) {
		// Flags end at the command: -u is cat's.
		r := kairoStdin(t, home, strings.NewReader("hello\n"), "spawn", "cat", "-u")
		if r.code != 0 || r.stdout != "hello\n" {
			t.Errorf("want exit 0 and stdout \"hello\":\n%s", r)
		}
	})

	t.Run("spawn of a missing binary", func(t *testing.T) {
		r := kairo(t, home, "spawn", "--", "/no/such/binary")
		if r.code != 1 || !strings.Contains(r.stderr, "kairo: start the process: ") || !strings.Contains(r.stderr, "/no/such/binary") {
			t.Errorf("want exit 1 with the kernel's message naming the binary:\n%s", r)
		}
	})

	t.Run("spawn on a PTY", func(t *testing.T) {
		// stdin is not a terminal here: no raw mode, but the child has one.
		r := kairo(t, home, "spawn", "--pty", "--", "sh", "-c", "test -t 0 && test -t 1 && echo tty")
		if r.code != 0 || r.stdout != "tty\r\n" {
			t.Errorf("want exit 0 and \"tty\" through the terminal:\n%s", r)
		}
	})

	t.Run("spawn passes SIGINT on", func(t *testing.T) {
		s := startSpawn(t, home, "sleep", "300")
		s.cmd.Process.Signal(syscall.SIGINT)
		if code := s.wait(); code != 128+int(syscall.SIGINT) {
			t.Errorf("spawn exited %d after SIGINT, want 130\n%s", code, s.stderr)
		}
	})

	t.Run("kill and attach from other clients", func(t *testing.T) {
		s := startSpawn(t, home, "sleep", "300")

		// A new connection owns no process, and the kernel lists only those.
		r := kairo(t, home, "ps")
		if r.code != 0 || !regexp.MustCompile(`^ID +PID +STATUS +EXIT +STARTED +ARGV\n`).MatchString(r.stdout) {
			t.Errorf("ps: %s", r)
		}

		r = kairo(t, home, "kill", s.id)
		if r.code != 0 || r.stdout != s.id+" (pid "+strconv.Itoa(s.pid)+") was killed by SIGKILL\n" {
			t.Errorf("kill %s: %s", s.id, r)
		}
		if code := s.wait(); code != 137 || !strings.Contains(s.stderr.String(), "kairo: "+s.id+" (pid "+strconv.Itoa(s.pid)+") was killed by SIGKILL\n") {
			t.Errorf("spawn exited %d, want 137 and a message:\n%s", code, s.stderr)
		}
		if err := syscall.Kill(s.pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d is still there: %v", s.pid, err)
		}

		// An ended process still answers with how it ended.
		if r := kairo(t, home, "attach", s.id); r.code != 137 || r.stdout != "" {
			t.Errorf("attach to the killed %s: %s", s.id, r)
		}
		r = kairo(t, home, "attach", "--json", s.id)
		var end processJSON
		if err := json.Unmarshal([]byte(r.stdout), &end); err != nil || r.code != 137 || end.ID != s.id ||
			end.Status != "killed" || end.Signal != "SIGKILL" || end.ExitCode != nil || end.ExitedAt == nil || !strings.Contains(r.stdout, `"type":"exit"`) {
			t.Errorf("attach --json to the killed %s: %+v %v\n%s", s.id, end, err, r)
		}
		if r := kairo(t, home, "kill", s.id); r.code != 1 || !strings.Contains(r.stderr, "kairo: nothing to signal: "+s.id) {
			t.Errorf("kill of an ended process: %s", r)
		}
		for _, cmd := range []string{"kill", "attach"} {
			if r := kairo(t, home, cmd, "p999999"); r.code != 1 || !strings.Contains(r.stderr, "kairo: no process p999999; `kairo ps` lists yours") {
				t.Errorf("%s of no process: %s", cmd, r)
			}
		}
	})

	t.Run("attach follows output and steers stdin", func(t *testing.T) {
		// The owner's stdin stays open, so only the attached client's
		// input reaches the process.
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pr.Close()
		defer pw.Close()
		s := startSpawnStdin(t, home, pr, "sh", "-c", "read x; echo got $x; exit 3")
		r := kairoStdin(t, home, strings.NewReader("hi\n"), "attach", "--stdin", s.id)
		if r.code != 3 || r.stdout != "got hi\n" {
			t.Errorf("attach --stdin %s: %s", s.id, r)
		}
		if code := s.wait(); code != 3 || s.stdout.String() != "got hi\n" {
			t.Errorf("the owner exited %d with stdout %q, want 3 and \"got hi\"\n%s", code, s.stdout, s.stderr)
		}
	})
}

// spawnProc is a `kairo spawn` child.
type spawnProc struct {
	t              *testing.T
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	exited         chan struct{}
	err            error // Wait's result, once exited
	id             string
	pid            int
}

// startSpawn starts `kairo spawn -- argv...` with stdin from /dev/null and
// returns once it has said which process it spawned.
func startSpawn(t *testing.T, home string, argv ...string) *spawnProc {
	t.Helper()
	return startSpawnStdin(t, home, nil, argv...)
}

func startSpawnStdin(t *testing.T, home string, in io.Reader, argv ...string) *spawnProc {
	t.Helper()
	s := &spawnProc{t: t, stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	s.cmd = exec.Command(kairoBin, append([]string{"spawn", "--"}, argv...)...)
	s.cmd.Env = childEnv(home)
	s.cmd.Stdin, s.cmd.Stdout, s.cmd.Stderr = in, s.stdout, s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.exited
	})
	spawned := regexp.MustCompile(`kairo: spawned (p\d+) \(pid (\d+)\)\n`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := spawned.FindStringSubmatch(s.stderr.String()); m != nil {
			s.id = m[1]
			s.pid, _ = strconv.Atoi(m[2])
			return s
		}
		select {
		case <-s.exited:
			t.Fatalf("kairo spawn exited before it spawned: %v\n%s", s.err, s.stderr)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("kairo spawn did not spawn within 30s:\n%s", s.stderr)
		}
	}
}

// wait returns the exit code.
func (s *spawnProc) wait() int {
	s.t.Helper()
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		s.t.Fatalf("kairo spawn did not exit within 15s\n%s", s.stderr)
	}
	var ee *exec.ExitError
	if errors.As(s.err, &ee) {
		return ee.ExitCode()
	}
	if s.err != nil {
		s.t.Fatal(s.err)
	}
	return 0
}
