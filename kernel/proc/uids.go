package proc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// allocUID gives a new tree a uid of its own from the range, never an
// existing account: its gid is the same number, which no group has. See
// docs/RATIONALE.md#a-uid-of-its-own-per-tree-never-an-account. The uid's
// lock file is taken and written outside l.mu, which every spawn takes:
// on a busy disk that I/O can take milliseconds, and the pool's refill
// allocates a uid while other spawns launch.
func (l *Sandboxed) allocUID() (int, error) {
	base, count := l.uidRange()
	for tried := 0; tried < count; {
		u, skipped, ok := l.reserveUID(base, count, count-tried)
		tried += skipped + 1
		if !ok {
			break
		}
		lock, err := l.lockFree(u)
		l.mu.Lock()
		delete(l.reserved, u)
		if lock != nil {
			l.inUse[u] = lock
		}
		l.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if lock != nil {
			return u, nil
		}
	}
	return 0, fmt.Errorf("all %d sandbox uids from %d are in use: widen sandbox.uid_count", count, base)
}

// reserveUID picks, among the next max uids of the range, the first this
// kernel has neither given out nor reserved, and reserves it; skipped is
// how many it passed over, ok false when it found none.
func (l *Sandboxed) reserveUID(base, count, max int) (u, skipped int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inUse == nil {
		l.inUse, l.reserved = map[int]*os.File{}, map[int]bool{}
		// Each run starts at a place of its own in the range: a tree
		// rarely gets the uid of a tree of an earlier run, whose files
		// in folders that outlive it (an operator's --cwd) are that
		// uid's. Files a sandbox leaves outside its workspace are the
		// operator's to mind; see
		// docs/RATIONALE.md#a-uid-of-its-own-per-tree-never-an-account.
		l.next = rand.IntN(count)
	}
	for skipped = range max {
		u = base + l.next%count
		l.next = (l.next + 1) % count
		if l.inUse[u] == nil && !l.reserved[u] {
			l.reserved[u] = true
			return u, skipped, true
		}
	}
	return 0, max, false
}

// lockFree takes u's lock for this kernel; nil when another kernel holds
// it, or when an earlier kernel of another home left it busy (its
// leftovers are that home's to end). Leftovers of this home's are killed.
func (l *Sandboxed) lockFree(u int) (*os.File, error) {
	lock, err := lockUID(u)
	if err != nil || lock == nil {
		return nil, err // nil, nil: another kernel's
	}
	// A kernel that died holding u may have left processes of it
	// behind; they must not share the uid with a new tree. A uid
	// released cleanly has none, and needs no scan of /proc.
	state, home, size := lockState(lock)
	if state == uidBusy && home != l.Home {
		lock.Close()
		return nil, nil
	}
	if state == uidBusy {
		KillUID(u)
	}
	writeState(lock, uidBusy, l.Home, size)
	return lock, nil
}

// free releases uid, whose processes are all gone. The lock file is
// written outside l.mu, which every spawn takes: the uid stays in inUse,
// so that no spawn of this kernel is given it, until its lock is closed.
func (l *Sandboxed) free(uid int) {
	l.mu.Lock()
	lock := l.inUse[uid]
	l.mu.Unlock()
	if lock != nil {
		// One byte overwritten: the home after it is read only with
		// uidBusy. A truncation on a disk filesystem (/run may be one)
		// is a journalled change of the file's size, a tenth of a
		// millisecond or more of each spawn's CPU.
		lock.WriteAt([]byte{uidReleased}, 0)
		lock.Close()
	}
	l.mu.Lock()
	delete(l.inUse, uid)
	l.mu.Unlock()
}

// writeState writes state and home to a uid's lock file, which holds size
// bytes: over them, cut only when it held more.
func writeState(lock *os.File, state byte, home string, size int) {
	b := append([]byte{state}, home...)
	lock.WriteAt(b, 0)
	if size > len(b) {
		lock.Truncate(int64(len(b)))
	}
}

// Every kernel on the machine may give out uids of the same range. A
// kernel holds each uid it gave out by an flock on a file named after it,
// so that another kernel skips that uid — else the cleanup of one tree
// would kill another kernel's tree of the same uid — and a starting
// kernel's sweep leaves it alone. The locks go with the process: the uids
// of a kernel that died are free again, and their files name the home
// whose kernel held them.
var uidLockDir = "/run/kairo/sandbox-uids"

// A uid's lock file says whether the uid was released cleanly — every
// process of it killed — or is (or was, by a kernel that died) in use,
// then by which home.
const (
	uidBusy     = 'b'
	uidReleased = 'r'
)

// lockState reads a uid's lock file: its state, the home that used it
// (with uidBusy), and the file's size in bytes.
func lockState(lock *os.File) (state byte, home string, size int) {
	b := make([]byte, 4096)
	n, _ := lock.ReadAt(b, 0)
	if n == 0 {
		return 0, "", 0
	}
	return b[0], string(b[1:n]), n
}

// lockUID takes the lock of uid; nil when another kernel holds it.
func lockUID(uid int) (*os.File, error) {
	if err := os.MkdirAll(uidLockDir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox uid locks: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(uidLockDir, strconv.Itoa(uid)), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sandbox uid lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, nil
		}
		return nil, fmt.Errorf("lock sandbox uid %d: %w", uid, os.NewSyscallError("flock", err))
	}
	return f, nil
}

// KillUID kills every process running as uid, until none is left (a tree
// that forks while it is being killed needs more than one pass), and
// returns how many it killed.
func KillUID(uid int) int {
	return killWhere(func(u int) bool { return u == uid })
}

// SweepSandboxUIDs kills every process running as a uid of [base,
// base+count) that an earlier kernel of home held and no live kernel
// holds: what a kernel of this home that died without cleaning up left
// behind. Other homes' uids are left alone. It returns how many it killed.
func SweepSandboxUIDs(home string, base, count int) int {
	left := map[int]bool{}
	eachProcess(func(pid, uid int) {
		if uid >= base && uid < base+count {
			left[uid] = true
		}
	})
	killed := 0
	for u := range left {
		lock, err := lockUID(u)
		if err != nil || lock == nil {
			continue
		}
		if state, owner, _ := lockState(lock); state == uidBusy && owner == home {
			killed += KillUID(u)
			lock.WriteAt([]byte{uidReleased}, 0)
		}
		lock.Close()
	}
	return killed
}

// killWhere kills the processes whose uid match accepts, pass after pass
// until none is left but zombies (dead already, waiting to be reaped), and
// returns how many it killed.
func killWhere(match func(uid int) bool) int {
	killed := map[int]bool{}
	for range 100 {
		found := 0
		eachProcess(func(pid, uid int) {
			if match(uid) && !zombie(pid) && syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed[pid] = true
				found++
			}
		})
		if found == 0 {
			break
		}
	}
	return len(killed)
}

// eachProcess calls fn with the pid and uid of every process.
func eachProcess(fn func(pid, uid int)) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fi, err := os.Stat("/proc/" + e.Name())
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			fn(pid, int(st.Uid))
		}
	}
}

// zombie reports whether pid has exited and waits to be reaped (or is
// gone).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}
