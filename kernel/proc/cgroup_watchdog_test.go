package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// kernelStart is what a kernel makes as it starts on a home with cgroups,
// as host's startCgroups does: the home's cgroup, swept, a tree with a
// process in it, a temp folder, and the watchdog of all that.
type kernelStart struct {
	wd     *Watchdog
	waited time.Duration // at the watchdog lock
	tree   *cgroup
	pid    int
	folder string
}

// startKernel does what a kernel does as it starts on home, in that order:
// it takes the watchdog lock at lockPath before it makes anything.
func startKernel(ctx context.Context, home *CgroupHome, lockPath string, scratch []string) (*kernelStart, error) {
	lock, err := LockWatchdog(ctx, lockPath)
	if err != nil {
		return nil, err
	}
	k := &kernelStart{waited: lock.Waited}
	h, err := home.Cgroups.Home(home.Name)
	if err != nil {
		lock.Close()
		return nil, err
	}
	h.Sweep()
	if k.tree, err = h.newTree(); err != nil {
		lock.Close()
		return nil, err
	}
	sleeper := exec.Command("sleep", "300")
	if err := sleeper.Start(); err != nil {
		lock.Close()
		return nil, err
	}
	go sleeper.Wait() // reaps it once a watchdog or the test's cleanup kills it
	k.pid = sleeper.Process.Pid
	if err := k.tree.add(k.pid); err != nil {
		sleeper.Process.Kill()
		lock.Close()
		return nil, err
	}
	k.folder = filepath.Join(scratch[0], strconv.Itoa(k.pid))
	if err := os.MkdirAll(k.folder, 0o700); err != nil {
		lock.Close()
		return nil, err
	}
	exe, err := os.Executable() // this test binary links the package: it can be the watchdog
	if err != nil {
		lock.Close()
		return nil, err
	}
	k.wd, err = h.StartWatchdog(exe, lock, scratch...)
	return k, err
}

// TestWatchdogRestart: a kernel started again at once on the home of one
// killed with SIGKILL waits until the dead kernel's watchdog has cleaned
// up and exited; its own cgroups, processes and folders, made after that,
// outlive that cleanup. A watchdog that does not end fails the wait, with
// its pid. The control: with no watchdog left — on the first start, and
// after a clean stop, which waits for the watchdog — nothing waits.
func TestWatchdogRestart(t *testing.T) {
	home := testCgroupHome(t)
	lockPath := filepath.Join(t.TempDir(), "watchdog.lock")
	root := t.TempDir()
	scratch := []string{filepath.Join(root, "tmp"), filepath.Join(root, "work")}

	first, err := startKernel(context.Background(), home, lockPath, scratch)
	if err != nil {
		t.Fatal(err)
	}
	if first.waited != 0 {
		t.Errorf("the first start waited %v at the watchdog lock, with no watchdog before it", first.waited)
	}
	// The watchdog stopped holds its cleanup back — as a loaded machine
	// does for some 100 ms — while the kernel "dies": its end of the pipe
	// closes, nothing else, as under SIGKILL.
	if err := syscall.Kill(first.wd.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(first.wd.PID(), syscall.SIGCONT) })
	first.wd.pipe.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	lock, err := LockWatchdog(ctx, lockPath)
	cancel()
	if err == nil {
		lock.Close()
	}
	pid := strconv.Itoa(first.wd.PID())
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "pid "+pid) || !strings.Contains(err.Error(), "lock "+lockPath) || !strings.Contains(err.Error(), "kill -KILL "+pid) {
		t.Errorf("a wait for a watchdog that does not end: %v; want the deadline, its pid and the lock it holds, and what to do", err)
	}

	type started struct {
		k   *kernelStart
		err error
	}
	second := make(chan started, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		k, err := startKernel(ctx, home, lockPath, scratch)
		second <- started{k, err}
	}()
	select {
	case s := <-second:
		t.Fatalf("the second start did not wait for the first kernel's watchdog (err %v)", s.err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := syscall.Kill(first.wd.PID(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var s started
	select {
	case s = <-second:
	case <-time.After(60 * time.Second):
		t.Fatal("the second start did not end")
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	t.Cleanup(s.k.wd.Stop) // before the home's cleanup
	select {
	case <-first.wd.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the first watchdog runs on after the second start took its lock")
	}
	if s.k.waited < 300*time.Millisecond {
		t.Errorf("the second start waited %v at the watchdog lock, want the 300 ms the first watchdog was held", s.k.waited)
	}
	if !gone(first.pid) {
		t.Errorf("pid %d of the dead kernel outlived its watchdog", first.pid)
	}
	if _, err := os.Stat(first.folder); !os.IsNotExist(err) {
		t.Errorf("the dead kernel's folder %s outlived its watchdog: %v", first.folder, err)
	}
	// What the second kernel made outlives the first watchdog's cleanup.
	if !running(s.k.pid) {
		t.Errorf("pid %d of the second kernel was killed", s.k.pid)
	}
	for _, d := range append(s.k.tree.dirs, s.k.folder) {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("the second kernel's %s: %v", d, err)
		}
	}

	// A clean stop waits for its watchdog to end: the next start does not.
	s.k.wd.Stop()
	if !gone(s.k.pid) {
		t.Errorf("pid %d outlived the watchdog's stop", s.k.pid)
	}
	start := time.Now()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lock, err = LockWatchdog(ctx, lockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if lock.Waited != 0 {
		t.Errorf("the start after a clean stop waited %v at the watchdog lock (%v in all)", lock.Waited, time.Since(start))
	}
}
