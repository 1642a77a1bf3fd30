package proc

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
)

// A kernel killed with SIGKILL cleans nothing up, and the parent-death
// signal reaches only the sessions' leaders: their descendants would run
// on. The watchdog is a small process the kernel starts, holding the only
// write end of the pipe that is the watchdog's stdin: when it reads end of
// file, the kernel is gone — however it died — and it kills the home's
// cgroups, every tree of this home and of no other, removes them, then
// exits. A clean stop closes the pipe too, once the trees have ended.

// WatchdogArg is the watchdog's argv[1]. Any binary that links this
// package runs as the watchdog when started with it (an init function
// below), as kairo and the tests do.
const WatchdogArg = "__kairo_cgroup_watchdog"

func init() {
	if len(os.Args) > 3 && os.Args[1] == WatchdogArg {
		n, _ := strconv.Atoi(os.Args[3])
		if n < 0 || n > len(os.Args)-4 {
			os.Exit(2)
		}
		os.Exit(watchdogMain(os.Args[2], os.Args[4:4+n], os.Args[4+n:]))
	}
}

// watchdogMain waits for end of file on stdin, then kills what is in
// dirs (the home's cgroups; the first a v2 one when layout has v2) and
// removes them, and the folders scratch (the home's temp folders and
// workspaces).
func watchdogMain(layout string, dirs, scratch []string) int {
	io.Copy(io.Discard, os.Stdin)
	if len(dirs) > 0 {
		killHome(dirs, layout != CgroupV1)
	}
	for _, d := range dirs {
		removeChildren(d)
		rmdirCgroup(d) // the next start of the home makes it again
	}
	for _, d := range scratch {
		os.RemoveAll(d)
	}
	return 0
}

// Watchdog is a started watchdog; Stop ends it.
type Watchdog struct {
	cmd      *exec.Cmd
	pipe     *os.File
	done     chan struct{}
	stopping atomic.Bool
}

// StartWatchdog starts binary (one that links this package) as the
// watchdog of h, which also removes the folders scratch. Only this
// process holds the write end of its pipe.
func (h *CgroupHome) StartWatchdog(binary string, scratch ...string) (*Watchdog, error) {
	r, w, err := os.Pipe() // close-on-exec: no other child inherits w
	if err != nil {
		return nil, err
	}
	defer r.Close()
	args := append([]string{WatchdogArg, h.Layout, strconv.Itoa(len(h.dirs))}, h.dirs...)
	cmd := exec.Command(binary, append(args, scratch...)...)
	cmd.Stdin = r
	cmd.Env = []string{}
	// A session of its own: a terminal's ^C that stops the kernel must
	// not take the watchdog first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	leaders.mu.Lock()
	err = cmd.Start()
	if err == nil {
		leaders.pids[cmd.Process.Pid] = true
	}
	leaders.mu.Unlock()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("start the cgroup watchdog: %w", err)
	}
	wd := &Watchdog{cmd: cmd, pipe: w, done: make(chan struct{})}
	go func() { // owned by Stop, which waits for it
		cmd.Wait()
		forgetLeader(cmd.Process.Pid)
		close(wd.done)
	}()
	return wd, nil
}

// PID is the watchdog's process id.
func (wd *Watchdog) PID() int { return wd.cmd.Process.Pid }

// Done is closed once the watchdog has exited.
func (wd *Watchdog) Done() <-chan struct{} { return wd.done }

// Stopping reports whether Stop was called: an exit before it means the
// watchdog was killed, and the trees are unguarded.
func (wd *Watchdog) Stopping() bool { return wd.stopping.Load() }

// Stop closes the pipe — the watchdog kills what is left in the home's
// cgroups, nothing after a clean stop — and waits for it to exit.
func (wd *Watchdog) Stop() {
	wd.stopping.Store(true)
	wd.pipe.Close()
	<-wd.done
}
