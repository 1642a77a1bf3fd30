package proc

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
)

// A kernel killed with SIGKILL cleans nothing up, and the parent-death
// signal reaches only the sessions' leaders: their descendants would run
// on. The watchdog is a small process the kernel starts, holding the only
// write end of the pipe that is the watchdog's stdin: when it reads end of
// file, the kernel is gone — however it died — and it kills the home's
// cgroups, every tree of this home and of no other, then exits.

// WatchdogArg is the watchdog's argv[1]. Any binary that links this
// package runs as the watchdog when started with it (an init function
// below), as kairo and the tests do.
const WatchdogArg = "__kairo_cgroup_watchdog"

func init() {
	if len(os.Args) > 2 && os.Args[1] == WatchdogArg {
		os.Exit(watchdogMain(os.Args[2], os.Args[3:]))
	}
}

// watchdogMain waits for end of file on stdin, then kills what is in
// dirs (the home's cgroups; the first a v2 one when layout has v2).
func watchdogMain(layout string, dirs []string) int {
	io.Copy(io.Discard, os.Stdin)
	if len(dirs) == 0 {
		return 0
	}
	killHome(dirs, layout != CgroupV1)
	for _, d := range dirs {
		removeChildren(d)
	}
	return 0
}

// Watchdog is a started watchdog; Stop ends it.
type Watchdog struct {
	cmd  *exec.Cmd
	pipe *os.File
	done chan struct{}
}

// StartWatchdog starts binary (one that links this package) as the
// watchdog of h. Only this process holds the write end of its pipe.
func (h *CgroupHome) StartWatchdog(binary string) (*Watchdog, error) {
	r, w, err := os.Pipe() // close-on-exec: no other child inherits w
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command(binary, append([]string{WatchdogArg, h.Layout}, h.dirs...)...)
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

// Stop closes the pipe — the watchdog kills what is left in the home's
// cgroups, nothing after a clean stop — and waits for it to exit.
func (wd *Watchdog) Stop() {
	wd.pipe.Close()
	<-wd.done
}
