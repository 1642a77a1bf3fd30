package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A kernel killed with SIGKILL cleans nothing up, and the parent-death
// signal reaches only the sessions' leaders: their descendants would run
// on. The watchdog is a small process the kernel starts, holding the only
// write end of the pipe that is the watchdog's stdin: when it reads end of
// file, the kernel is gone — however it died — and it kills the home's
// cgroups, every tree of this home and of no other, removes them, then
// exits. A clean stop closes the pipe too, once the trees have ended.
//
// That cleanup takes a while after the kernel died, and a kernel started
// again at once on the same home (systemd's Restart=always) would have
// its new cgroups and folders removed under it. So the watchdog holds the
// home's watchdog lock, handed over by the kernel that started it, until
// it exits; the next kernel takes that lock before it makes anything
// ([LockWatchdog]).

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

// WatchdogLock is a home's watchdog lock: an flock on a file of the
// home's, taken by [LockWatchdog] and handed to the watchdog by
// [CgroupHome.StartWatchdog]. The flock is on the open file, which the
// watchdog inherits: it holds the lock after its kernel died, until it
// has cleaned up and exited.
type WatchdogLock struct {
	f *os.File
	// Waited is how long the watchdog of an earlier kernel held the lock
	// before this one got it: 0 when it was free.
	Waited time.Duration
}

// LockWatchdog takes the watchdog lock in the file path (made if missing),
// before the kernel makes its home's cgroups or folders. While the
// watchdog of an earlier kernel of the home holds it — cleaning up after
// that kernel died or stopped — it waits until that watchdog exits, or
// until ctx is done: then the error names the watchdog and what to do.
// When the lock is free it returns at once.
func LockWatchdog(ctx context.Context, path string) (*WatchdogLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the cgroup watchdog's lock: %w", err)
	}
	start := time.Now()
	var tick *time.Ticker
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if tick == nil {
			// A poll, not a blocking flock: a blocking one would not
			// end with ctx. The cleanup takes about 100 ms.
			tick = time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
		}
		select {
		case <-ctx.Done():
			pid := watchdogPID(f)
			f.Close()
			return nil, lockWaitError(path, pid, time.Since(start), ctx.Err())
		case <-tick.C:
		}
	}
	l := &WatchdogLock{f: f}
	if tick != nil {
		l.Waited = time.Since(start)
	}
	_ = f.Truncate(0) // the pid of the watchdog before; StartWatchdog writes the next
	return l, nil
}

// Close gives the lock up, when no watchdog is started with it.
func (l *WatchdogLock) Close() error { return l.f.Close() }

// lockWaitError is why a start that waited for the watchdog at path
// (pid, when known) gives up, and what to do.
func lockWaitError(path string, pid int, waited time.Duration, err error) error {
	who, holds, end := "", "; fuser -v "+path+" names it", "end it first"
	if pid > 0 {
		who, end = ", pid "+strconv.Itoa(pid)+",", "end it first with kill -KILL "+strconv.Itoa(pid)
	}
	return fmt.Errorf("the cgroup watchdog of an earlier run of this home%s still cleans up after %v (it holds the lock %s%s): "+
		"start again once it has exited, or %s (this start then ends what it left): %w",
		who, waited.Round(10*time.Millisecond), path, holds, end, err)
}

// watchdogPID is the pid written in the lock file f, when that process
// is still a watchdog (pids are reused); else 0.
func watchdogPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if argv := strings.Split(string(cmdline), "\x00"); len(argv) < 2 || argv[1] != WatchdogArg {
		return 0
	}
	return pid
}

// StartWatchdog starts binary (one that links this package) as the
// watchdog of h, which also removes the folders scratch. Only this
// process holds the write end of its pipe. The watchdog takes lock over,
// which this process no longer holds once StartWatchdog returns: it is
// the watchdog's until it exits (on failure, it is given up).
func (h *CgroupHome) StartWatchdog(binary string, lock *WatchdogLock, scratch ...string) (*Watchdog, error) {
	defer lock.f.Close()   // the watchdog's copy keeps the lock
	r, w, err := os.Pipe() // close-on-exec: no other child inherits w
	if err != nil {
		return nil, err
	}
	defer r.Close()
	args := append([]string{WatchdogArg, h.Layout, strconv.Itoa(len(h.dirs))}, h.dirs...)
	cmd := exec.Command(binary, append(args, scratch...)...)
	cmd.Stdin = r
	cmd.ExtraFiles = []*os.File{lock.f} // fd 3, held until it exits
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
	// Best effort: the pid only names the watchdog to a kernel that waits.
	_, _ = lock.f.WriteAt([]byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0)
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
