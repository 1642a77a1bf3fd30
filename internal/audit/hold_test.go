package audit

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// needAuditControl skips a test that switches the real audit subsystem
// when this process may not (not root, or outside the initial pid
// namespace) or when audit is locked.
func needAuditControl(t *testing.T) Status {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("switching the audit subsystem needs root")
	}
	st, err := GetStatus()
	if err != nil {
		t.Skipf("the audit subsystem cannot be asked here: %v", err)
	}
	if st.Enabled == Locked {
		t.Skip("the audit configuration is locked until the next boot")
	}
	return st
}

// holder is a Hold in a process of its own: the test binary run with
// holderEnv.
type holder struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	turnedOn bool
}

func startHolder(t *testing.T, dir string) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), holderEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{cmd: cmd, stdin: stdin}
	t.Cleanup(func() { h.stdin.Close(); h.cmd.Wait() })
	line, err := readLine(bufio.NewReader(stdout))
	if !strings.HasPrefix(line, "held ") {
		t.Fatalf("the holder process said %q (%v)", line, err)
	}
	h.turnedOn = strings.Contains(line, "turnedOn=true")
	return h
}

// release makes the holder release its Hold and exit.
func (h *holder) release(t *testing.T) {
	t.Helper()
	h.stdin.Close()
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("the holder process: %v", err)
	}
}

// enabled is whether audit is on now.
func enabled(t *testing.T) bool {
	t.Helper()
	st, err := GetStatus()
	if err != nil {
		t.Fatal(err)
	}
	return st.Enabled != Off
}

// othersHold reports whether a Hold of another test or daemon of this
// machine holds dir's lock now; the restore is checked only when none
// does.
func othersHold(t *testing.T, dir string) bool {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		return false
	}
	if !errors.Is(err, unix.EWOULDBLOCK) {
		t.Fatal(err)
	}
	return true
}

// checkRestored checks that audit is back as it was before the test: off
// when a Hold of the test turned it on, and without a marker. The folder
// is the machine's, shared with the daemons other tests may run at the
// same time: while one of them holds it, audit stays on, rightly.
func checkRestored(t *testing.T, turnedOn bool) {
	t.Helper()
	if othersHold(t, DefaultDir) {
		t.Log("another kairo holds audit now: its state is left to it")
		return
	}
	if _, err := os.Stat(filepath.Join(DefaultDir, markerName)); err == nil {
		t.Errorf("the marker %s is still there after the last Hold was released", markerName)
	}
	if turnedOn && enabled(t) {
		t.Error("audit is still on after the last Hold that turned it on was released")
	}
}

// TestHoldLastRestores holds audit in two processes: the first to release
// leaves it on for the other, the last restores what the first found.
func TestHoldLastRestores(t *testing.T) {
	needAuditControl(t)
	first := startHolder(t, DefaultDir)
	if !enabled(t) {
		t.Fatal("audit is off while a Hold that turns it on is held")
	}
	second, err := Acquire(DefaultDir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release()
	if second.State.TurnedOn {
		t.Error("the second Hold turned audit on, though the first had")
	}
	if first.turnedOn && !second.State.ByKairo {
		t.Errorf("the second Hold does not know a kairo turned audit on: %+v", second.State)
	}
	first.release(t)
	if !enabled(t) {
		t.Fatal("the first Hold to be released turned audit off under the second")
	}
	if err := second.Release(); err != nil {
		t.Fatal(err)
	}
	checkRestored(t, first.turnedOn)
}

// TestHoldKilledHolder kills a process that holds audit: it cannot
// restore anything, its marker stays, and the next last Hold restores.
func TestHoldKilledHolder(t *testing.T) {
	needAuditControl(t)
	killed := startHolder(t, DefaultDir)
	if err := killed.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed.cmd.Wait()
	if killed.turnedOn {
		if !enabled(t) {
			t.Fatal("audit went off with the killed holder")
		}
		if _, err := os.Stat(filepath.Join(DefaultDir, markerName)); err != nil {
			t.Fatalf("the killed holder left no marker: %v", err)
		}
	}
	next, err := Acquire(DefaultDir, true)
	if err != nil {
		t.Fatal(err)
	}
	if killed.turnedOn && (next.State.TurnedOn || !next.State.ByKairo || next.State.Previous != "off") {
		t.Errorf("the next Hold after a killed one: %+v; want audit found on by a kairo, from off", next.State)
	}
	if err := next.Release(); err != nil {
		t.Fatal(err)
	}
	checkRestored(t, killed.turnedOn)
}
