package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/kairo-os/kairo/abi"
	"golang.org/x/sys/unix"
)

// Keys typed at the terminal while kairo attach follows a process are not
// left for the shell when it exits. The control: while it follows, they
// are there, unread.
func TestAttachLeavesNoTypedKeys(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	d := startUp(t, home)
	defer d.stop()
	c := d.dial()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wd, _ := os.Getwd()
	var info abi.ProcessInfo
	if err := c.Call(ctx, abi.MethodProcessSpawn, abi.SpawnParams{Argv: []string{"sleep", "30"}, Cwd: wd}, &info); err != nil {
		t.Fatal(err)
	}
	// The process of another connection is the user's: ps lists it.
	if ps := kairoOK(t, home, "ps"); !regexpMatch(`(?m)^`+info.ID+`\s+\d+\s+running\s+.*sleep 30$`, ps) {
		t.Fatalf("kairo ps from a new connection lacks %s:\n%s", info.ID, ps)
	}

	term, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	defer tty.Close()
	var stderr bytes.Buffer
	attach := exec.Command(kairoBin, "attach", info.ID)
	attach.Env = childEnv(home)
	attach.Stdin, attach.Stdout, attach.Stderr = tty, tty, &stderr
	// The terminal is kairo's controlling one, and kairo in its foreground,
	// as in a shell.
	attach.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := attach.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := term.Write([]byte("echo leaked\n")); err != nil {
		t.Fatal(err)
	}
	pending := func() int {
		n, err := unix.IoctlGetInt(int(tty.Fd()), unix.TIOCINQ)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	until(t, "the typed keys pending", func() bool { return pending() == len("echo leaked\n") })
	if err := c.Call(ctx, abi.MethodProcessSignal, abi.SignalParams{ProcessID: info.ID, Signal: "KILL"}, nil); err != nil {
		t.Fatal(err)
	}
	err = attach.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+9 {
		t.Fatalf("kairo attach: %v; want exit 137, the kill's\n%s", err, stderr.String())
	}
	if n := pending(); n != 0 {
		t.Fatalf("%d typed bytes left for the shell after kairo attach exited", n)
	}
}

// kairo replay says what stopped a run loop the user stopped, by hand or by
// asking the agent, not that the daemon stopped; the control, a run loop
// that ended by itself, has nothing left out.
func TestReplayOfAStoppedRun(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	d := startUp(t, home)
	defer d.stop()
	if r := kairo(t, home, "send", "run echo hello"); r.code != 0 {
		t.Fatalf("send run echo hello:\n%s", r)
	}
	start := func(goal string) string {
		t.Helper()
		if r := kairo(t, home, "send", "--no-follow", goal); r.code != 0 {
			t.Fatalf("send %s:\n%s", goal, r)
		}
		until(t, goal+" running", func() bool { return runsJSON(t, home)[goal].InProgress == 1 })
		return runsJSON(t, home)[goal].ID
	}

	byHand := start("run sleep 30")
	c := d.dial()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Call(ctx, abi.MethodIntentCancel, abi.CancelParams{CorrelationID: byHand, Reason: "enough of it"}, nil); err != nil {
		t.Fatal(err)
	}
	until(t, "the task canceled", func() bool { return runsJSON(t, home)["run sleep 30"].Status == "canceled" })

	asked := start("run sleep 40")
	if r := kairo(t, home, "send", "stop"); r.code != 0 {
		t.Fatalf("send stop:\n%s", r)
	}
	until(t, "the second task canceled", func() bool { return runsJSON(t, home)["run sleep 40"].Status == "canceled" })

	for _, c := range []struct{ run, want string }{
		{byHand, "(the run loop was stopped by hand: a cancel from operator/"},
		{asked, `(the run loop was canceled by the policy at tick `},
	} {
		r := kairo(t, home, "replay", "--run", c.run)
		if r.code != 0 || strings.Contains(r.stdout, "the daemon stopped") || !strings.Contains(r.stdout, "the agent's runtime made itself") || !strings.Contains(r.stdout, c.want) {
			t.Errorf("replay of %s:\n%s", c.run, r)
		}
	}
	echo := runsJSON(t, home)["run echo hello"].ID
	if r := kairo(t, home, "replay", "--run", echo); r.code != 0 || strings.Contains(r.stdout, "not replayed") || !strings.Contains(r.stdout, "the policy decided as recorded") {
		t.Errorf("replay of the echo task:\n%s", r)
	}
}
