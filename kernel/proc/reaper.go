package proc

import (
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// When a process tree is killed, its members that outlive their parent are
// handed to the nearest subreaper, else to PID 1 — and a container's PID 1
// often never reaps, so they stay zombies. The daemon makes itself their
// subreaper and reaps them. Its own children, the session leaders, are
// reaped by their exec.Cmd: the registry below keeps the reaper off them.

// leaders are the pids whose exit an exec.Cmd is waiting for. A spawn
// holds mu from Start until its pid is in the set, and the reaper holds it
// while it sweeps, so a leader is never reaped by mistake.
var leaders = struct {
	mu   sync.Mutex
	pids map[int]bool
}{pids: map[int]bool{}}

func forgetLeader(pid int) {
	leaders.mu.Lock()
	delete(leaders.pids, pid)
	leaders.mu.Unlock()
}

// Subreaper makes this process the reaper of orphaned descendants and reaps
// them as they exit, until stop is called. Once it is on, every child of the
// process must be started through a [Manager].
func Subreaper() (stop func(), err error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, os.NewSyscallError("prctl(PR_SET_CHILD_SUBREAPER)", err)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() { // owned by the caller through stop
		defer close(stopped)
		t := time.NewTicker(5 * time.Second) // in case a SIGCHLD was merged away
		defer t.Stop()
		// A sweep reads every thread's children: after a SIGCHLD it waits
		// a little, so that a burst of exits — most of them leaders, whose
		// exec.Cmd reaps them — costs one sweep, not one each.
		var soon <-chan time.Time
		for {
			select {
			case <-sigs:
				if soon == nil {
					soon = time.After(orphanDelay)
				}
				continue
			case <-soon:
				soon = nil
			case <-t.C:
			case <-done:
				return
			}
			reapOrphans()
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
		<-stopped
	}, nil
}

// orphanDelay is how long an orphan may stay a zombie after its SIGCHLD.
const orphanDelay = 50 * time.Millisecond

// reapOrphans reaps the exited children that are not session leaders. The
// children are listed without the lock, which spawns take: one started
// since is not in the list, and one registered as a leader since is
// skipped under the lock.
func reapOrphans() {
	pids := children()
	leaders.mu.Lock()
	defer leaders.mu.Unlock()
	for _, pid := range pids {
		if leaders.pids[pid] {
			continue
		}
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, unix.WNOHANG, nil) // a no-op while it still runs
	}
}

// children lists this process's children, from every thread's list.
func children() []int {
	tasks, _ := os.ReadDir("/proc/self/task")
	var pids []int
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(field); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
