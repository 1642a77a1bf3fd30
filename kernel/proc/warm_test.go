package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/sandbox"
)

// TestSandboxedWarmHelpers: spawns handed to helpers started ahead of time
// behave as spawns that start their own — output on pipes and on a
// terminal the process controls, exit codes, stdin — the pool refills as
// it is used, and Close ends the helpers still waiting, leaving no process.
func TestSandboxedWarmHelpers(t *testing.T) {
	needRoot(t)
	e, l := newSandboxEnv(t)
	l.Warm = 2
	if l.takeWarm() != nil {
		t.Fatal("a helper was waiting before the pool had time to start one")
	}
	// The pool starts on first use; wait until it is full.
	deadline := time.Now().Add(10 * time.Second)
	for len(l.pool) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the pool did not fill in 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	warmPids := map[int]bool{}
	for i := range 6 {
		before := len(l.pool)
		_, info, out := e.run(Spec{Argv: []string{"sh", "-c", "echo $$; exit 3"}})
		if !exitedWith(info, 3) || out.text("stdout") != fmt.Sprintf("%d\n", info.PID) {
			t.Fatalf("spawn %d: %+v, output %q", i, info, out.text("stdout"))
		}
		if before > 0 {
			warmPids[info.PID] = true
		}
	}
	if len(warmPids) == 0 {
		t.Fatal("no spawn went to a waiting helper")
	}
	// Stdin and both streams through a warm helper.
	for len(l.pool) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	out := &collect{}
	s := e.spawn(Spec{Argv: []string{"sh", "-c", "read x; echo got $x; echo err >&2; exit 3"}}, out)
	if err := s.WriteStdin([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if info := wait(t, s); !exitedWith(info, 3) {
		t.Fatalf("%+v", info)
	}
	if got := out.text("stdout"); got != "got hello\n" || out.text("stderr") != "err\n" {
		t.Fatalf("stdout %q stderr %q", got, out.text("stderr"))
	}
	// A terminal, which the process controls.
	for len(l.pool) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	_, info, tty := e.run(Spec{Argv: []string{"sh", "-c", "test -t 0 && tty && ps -o tty= -p $$"}, PTY: true})
	if !exitedWith(info, 0) || !strings.Contains(tty.text("stdout"), "/dev/pts/") {
		t.Fatalf("on a terminal: %+v %q", info, tty.text("stdout"))
	}
	waiting := []int{}
	for len(l.pool) < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	for _, w := range []*warmHelper{<-l.pool, <-l.pool} {
		waiting = append(waiting, w.cmd.Process.Pid)
		l.pool <- w
	}
	l.Close()
	for _, pid := range waiting {
		if !gone(pid) {
			t.Errorf("waiting helper %d outlived Close", pid)
		}
	}
}

// A helper that died while it waited fails the spawn handed to it, with an
// error, and the kernel goes on: the spawn after it runs. (The failed
// handoff took the leaders' lock its Spawn already held, and every spawn
// and the orphan reaper waited on it forever.)
func TestWarmHelperDiedWhileWaiting(t *testing.T) {
	needRoot(t)
	e, l := newSandboxEnv(t)
	l.Warm = 1
	l.takeWarm() // starts the pool
	deadline := time.Now().Add(10 * time.Second)
	for len(l.pool) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the pool did not fill in 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	w := <-l.pool
	w.cmd.Process.Kill()
	w.cmd.Wait()
	l.pool <- w

	done := make(chan error, 1)
	go func() {
		s, err := e.m.Spawn(Spec{Argv: []string{"sh", "-c", "exit 0"}}, "owner")
		if err == nil {
			<-s.Done()
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Logf("the spawn handed to the dead helper: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the spawn handed to a dead helper has not returned in 30 s: the kernel is stuck")
	}
	// The control: the next spawn runs (through a fresh helper or its own).
	if _, info, _ := e.run(Spec{Argv: []string{"sh", "-c", "exit 4"}}); !exitedWith(info, 4) {
		t.Fatalf("the spawn after: %+v", info)
	}
	// The pool may be starting a helper: it must not outlive the test,
	// whose neighbours count the mount namespaces the process holds.
	l.Close()
}

// TestWarmHelperNamespacesAndFilter: the kernel holds the mount namespace
// of each waiting helper (sandboxed.go's mntns), so that the target's
// exit does not tear it down; the spawn's cleanup closes it, and Close
// those of the helpers still waiting, so none is left open. A spawn whose
// policy grants TCP, whose seccomp filter is not the one the waiting
// helpers installed, runs through a helper that installs its own.
func TestWarmHelperNamespacesAndFilter(t *testing.T) {
	needRoot(t)
	e, l := newSandboxEnv(t)
	l.Warm = 1
	base := heldNamespaces(t) // other tests' launchers may hold some
	l.takeWarm()              // starts the pool
	fill := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for len(l.pool) < 1 {
			if time.Now().After(deadline) {
				t.Fatal("the pool did not fill in 10 s")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	fill()
	if n := heldNamespaces(t) - base; n != 1 {
		t.Fatalf("%d mount namespaces held with one helper waiting, want 1", n)
	}
	if _, info, _ := e.run(Spec{Argv: []string{"sh", "-c", "exit 5"}}); !exitedWith(info, 5) {
		t.Fatalf("through a waiting helper: %+v", info)
	}
	fill()
	tcp := func(work, tmp string) (*sandbox.Policy, error) {
		p := sandbox.Default(work, tmp, nil)
		p.ConnectTCP = []uint16{9}
		return p, nil
	}
	if _, info, _ := e.run(Spec{Argv: []string{"sh", "-c", "exit 6"}, Policy: tcp}); !exitedWith(info, 6) {
		t.Fatalf("a policy that grants TCP, through a waiting helper with the default filter: %+v", info)
	}
	fill()
	deadline := time.Now().Add(10 * time.Second)
	for heldNamespaces(t)-base != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d mount namespaces held after the spawns ended, want 1 (the waiting helper's)", heldNamespaces(t)-base)
		}
		time.Sleep(5 * time.Millisecond)
	}
	l.Close()
	if n := heldNamespaces(t) - base; n != 0 {
		t.Fatalf("%d mount namespaces held after Close", n)
	}
}

// heldNamespaces counts this process's descriptors of mount namespaces.
func heldNamespaces(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if link, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && strings.HasPrefix(link, "mnt:") {
			n++
		}
	}
	return n
}

// TestWarmFilterLearning: after a spawn the waiting helper's filter did
// not fit, the helpers started next install none (any spawn fits them),
// so spawns that alternate kinds do not replace a helper each; after
// learnAfter spawns in a row with one filter, the helpers install it.
func TestWarmFilterLearning(t *testing.T) {
	needRoot(t)
	e, l := newSandboxEnv(t)
	l.Warm = 1
	l.takeWarm() // starts the pool
	filter := func() *sandbox.WarmFilter {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.filter
	}
	def := filter()
	if def == nil {
		t.Fatal("the pool starts with no filter, want the default profile's")
	}
	tcp := func(work, tmp string) (*sandbox.Policy, error) {
		p := sandbox.Default(work, tmp, nil)
		p.ConnectTCP = []uint16{9}
		return p, nil
	}
	run := func(code int, policy func(work, tmp string) (*sandbox.Policy, error)) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for len(l.pool) < 1 { // a spawn that finds no helper waiting learns nothing
			if time.Now().After(deadline) {
				t.Fatal("the pool did not fill in 10 s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if _, info, _ := e.run(Spec{Argv: []string{"sh", "-c", "exit " + strconv.Itoa(code)}, Policy: policy}); !exitedWith(info, code) {
			t.Fatalf("exit %d: %+v", code, info)
		}
	}
	run(3, nil)
	if f := filter(); !sameFilter(f, def) {
		t.Fatalf("after a default spawn the helpers install %+v, want the default %+v", f, def)
	}
	run(4, tcp)
	if f := filter(); f != nil {
		t.Fatalf("after a spawn the helper did not fit, the helpers install %+v, want none", f)
	}
	for i := range learnAfter - 2 {
		run(10+i, tcp)
		if f := filter(); f != nil {
			t.Fatalf("after %d spawns granting TCP the helpers install %+v, want none until %d", i+2, f, learnAfter)
		}
	}
	run(20, tcp)
	if f := filter(); f == nil || !f.Sockets.TCP {
		t.Fatalf("after %d spawns granting TCP the helpers install %+v, want TCP's filter", learnAfter, f)
	}
	run(21, nil) // a default spawn through a TCP helper: replaced, none learned
	if f := filter(); f != nil {
		t.Fatalf("after a default spawn through a TCP helper the helpers install %+v, want none", f)
	}
}

// The pool's refill starts a waiting helper while spawns run: the leaders'
// lock, which every spawn's start and every exit's reap take, is held
// across the helper's fork only, not while its runtime starts (half a
// second here, milliseconds on a loaded machine), and the helper is a
// leader from its fork on, so the orphan reaper leaves its exit to its
// exec.Cmd. A helper that never gets ready is reaped and forgotten.
func TestStartHelperHoldsLeadersForTheForkOnly(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	// The shell is the helper's process: it says ready on descriptor 3,
	// the control socket, as a helper's runtime would once started.
	slow := filepath.Join(dir, "slow-helper")
	script := "#!/bin/sh\necho $$ >" + pidFile + ".new && mv " + pidFile + ".new " + pidFile + "\nsleep 0.5\nprintf r >&3\nexec sleep 30\n"
	if err := os.WriteFile(slow, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	type started struct {
		cmd *exec.Cmd
		ctl *os.File
		err error
	}
	done := make(chan started, 1)
	l := &Sandboxed{Helper: slow}
	go func() {
		cmd, ctl, err := l.startHelper(nil)
		done <- started{cmd, ctl, err}
	}()
	pid, free := 0, false
	var s started
	for waiting := true; waiting; {
		select {
		case s = <-done:
			waiting = false
		case <-time.After(time.Millisecond):
			if pid == 0 {
				b, err := os.ReadFile(pidFile)
				if err != nil {
					continue // not forked yet: the lock may be held
				}
				pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			}
			if leaders.mu.TryLock() {
				free = free || leaders.pids[pid]
				leaders.mu.Unlock()
			}
		}
	}
	if s.err != nil {
		t.Fatalf("start the slow helper: %v", s.err)
	}
	defer func() {
		s.ctl.Close()
		s.cmd.Process.Kill()
		s.cmd.Wait()
		forgetLeader(s.cmd.Process.Pid)
	}()
	if s.cmd.Process.Pid != pid {
		t.Fatalf("the helper wrote pid %d, its exec.Cmd has %d", pid, s.cmd.Process.Pid)
	}
	if !free {
		t.Fatal("the leaders' lock was held, or the helper not yet a leader, all the while the helper started")
	}
	leaders.mu.Lock()
	leader := leaders.pids[pid]
	leaders.mu.Unlock()
	if !leader {
		t.Fatal("the started helper is not a leader: the orphan reaper could reap it")
	}

	// The control: a helper that exits before it is ready fails the start,
	// reaped and no longer a leader.
	dead := filepath.Join(dir, "dead-helper")
	os.Remove(pidFile)
	script = "#!/bin/sh\necho $$ >" + pidFile + "\nexit 1\n"
	if err := os.WriteFile(dead, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	l.Helper = dead
	if cmd, _, err := l.startHelper(nil); err == nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("a helper that exited before it was ready was started")
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	deadPid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	leaders.mu.Lock()
	leader = leaders.pids[deadPid]
	leaders.mu.Unlock()
	if leader {
		t.Fatalf("the helper that failed to start, pid %d, is still a leader", deadPid)
	}
}

// After a spawn that took a waiting helper ended, the pool starts the next
// helper refillEnd later, past a spawn that came right after it; with no
// helper left waiting and no end, refillAfter after the take (the
// control: the wait ends without an end).
func TestRefillWaitsPastTheNextSpawn(t *testing.T) {
	l := &Sandboxed{pool: make(chan *warmHelper, 2), ended: make(chan struct{}, 1), stop: make(chan struct{})}
	l.pool <- &warmHelper{} // one still waits: the pool waits for the end
	l.ended <- struct{}{}
	start := time.Now()
	if !l.refillWait() {
		t.Fatal("refillWait said the pool stops")
	}
	if d := time.Since(start); d < refillEnd {
		t.Fatalf("the refill started %v after the spawn's end, before %v: it would run beside a spawn that came right after", d, refillEnd)
	}
	<-l.pool
	start = time.Now()
	if !l.refillWait() {
		t.Fatal("refillWait said the pool stops")
	}
	if d := time.Since(start); d < refillAfter {
		t.Fatalf("with no helper waiting, the refill started %v after the take, before %v", d, refillAfter)
	}
}
