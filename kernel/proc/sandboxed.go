package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sandbox"
	"golang.org/x/sys/unix"
)

// The uids the kernel gives sandboxes when it runs as root: one of its own
// per process tree, so that RLIMIT_NPROC counts that tree alone and every
// process of the tree — even one that left its session — can be found and
// killed by uid. No account on the machine has them.
const (
	UIDBase  = 0x7fe00000
	UIDCount = 1 << 16
)

// Sandboxed is the launcher of `kairo up`: every binary runs under the
// sandbox helper with the spec's policy, or the default profile when the
// spec has none.
type Sandboxed struct {
	// Helper is a binary that calls sandbox.HelperMain (kairo itself).
	Helper string
	// Root is where workspaces and temp folders are made; it must be
	// reachable (mode 0711 up the path) by the sandboxes' uids.
	Root string
	// BestEffort runs what this kernel cannot confine exactly, saying so.
	BestEffort bool
	// ServeIPC serves conn, the kernel's end of a socket pair, to a
	// process running as uid with grants g. Without it, a spec that asks
	// for IPC is refused.
	ServeIPC func(conn *os.File, uid int, g manifests.IPCGrants) error
	// Warm is how many helpers wait, started ahead of time, for the next
	// spawns: the start of a helper's Go runtime is then off the spawn's
	// path. 0 starts a helper for each spawn.
	Warm int

	poolOnce sync.Once
	pool     chan *warmHelper
	taken    chan struct{}
	stop     chan struct{}
	poolDone chan struct{}

	mu     sync.Mutex
	inUse  map[int]*os.File // the uids given out, and their locks
	next   int
	launch atomic.Uint64
}

// Launch builds the policy, the folders and the uid of one spawn.
func (l *Sandboxed) Launch(spec *Spec) (*Launch, error) {
	n := strconv.FormatUint(l.launch.Add(1), 10) + "-" + strconv.Itoa(os.Getpid())
	tmp := filepath.Join(l.Root, "tmp", n)
	if err := mkdirReachable(tmp); err != nil {
		return nil, fmt.Errorf("sandbox temp folder: %w", err)
	}
	work, made := spec.Cwd, false
	if work == "" {
		work, made = filepath.Join(l.Root, "work", n), true
		if err := mkdirReachable(work); err != nil {
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("sandbox workspace: %w", err)
		}
	}
	var p *sandbox.Policy
	var err error
	if spec.Policy != nil {
		p, err = spec.Policy(work, tmp)
	} else {
		p = sandbox.Default(work, tmp, spec.Env)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	p.Dir = work
	p.BestEffort = p.BestEffort || l.BestEffort
	uid, allocated := -1, false
	if os.Geteuid() == 0 {
		uid, allocated, err = l.uidFor(work, made)
		if err != nil {
			os.RemoveAll(tmp)
			return nil, err
		}
		p.UID, p.GID = uid, uid
		os.Chown(tmp, uid, uid)
		if made {
			os.Chown(work, uid, uid)
		}
	} else {
		p.UID, p.GID = -1, -1
	}
	p.IPC = spec.IPC != nil
	c, err := sandbox.Command(l.Helper, p, spec.Argv)
	if err == nil && uid > 0 {
		// The exec is the sandbox uid's: a folder on the way to the
		// program that it may not pass makes a bare "permission denied".
		if dir := unpassable(c.Target, uid); dir != "" {
			c.Started() // closes what Command opened
			err = fmt.Errorf("the sandbox runs %s as uid %d, which may not pass through %s (mode %v, owner %d): make the folders on the way passable (chmod o+x) or put the program elsewhere",
				c.Target, uid, dir, modeOf(dir), ownerOf(dir))
		}
	}
	if err == nil && spec.IPC != nil {
		if err = l.connect(c, uid, *spec.IPC); err != nil {
			c.Started() // closes what Command opened
		}
	}
	if err != nil {
		os.RemoveAll(tmp)
		if allocated {
			l.free(uid)
		}
		return nil, err
	}
	launch := &Launch{Cmd: c.Cmd, Started: c.Started, Work: work}
	if w := l.takeWarm(); w != nil {
		launch.Cmd = w.cmd
		launch.Handoff = func(stdin, stdout, stderr *os.File, ctty bool) error {
			err := c.Handoff(w.ctl, stdin, stdout, stderr, ctty)
			w.ctl.Close()
			if err != nil {
				w.cmd.Process.Kill()
				w.cmd.Wait()
				forgetLeader(w.cmd.Process.Pid)
			}
			return err
		}
	}
	launch.Cleanup = func() {
		if launch.Cmd.Process != nil {
			syscall.Kill(-launch.Cmd.Process.Pid, syscall.SIGKILL)
		}
		if allocated {
			KillUID(uid)
			l.free(uid)
		}
		os.RemoveAll(tmp)
	}
	return launch, nil
}

// refillDelay is how long the pool waits after a helper was taken before
// it starts the next.
const refillDelay = 5 * time.Millisecond

// warmHelper is a helper started ahead of time, waiting on ctl.
type warmHelper struct {
	cmd *exec.Cmd
	ctl *os.File
}

// takeWarm returns a waiting helper, or nil when none waits (the spawn
// then starts its own).
func (l *Sandboxed) takeWarm() *warmHelper {
	if l.Warm <= 0 {
		return nil
	}
	l.poolOnce.Do(l.startPool)
	select {
	case w := <-l.pool:
		select {
		case l.taken <- struct{}{}:
		default:
		}
		return w
	default:
		return nil
	}
}

// startPool starts the goroutine that keeps Warm helpers waiting; Close
// stops it.
func (l *Sandboxed) startPool() {
	l.pool = make(chan *warmHelper, l.Warm)
	l.taken = make(chan struct{}, 1)
	l.stop = make(chan struct{})
	l.poolDone = make(chan struct{})
	go func() {
		defer close(l.poolDone)
		for {
			for len(l.pool) < cap(l.pool) {
				w, err := l.startWarm()
				if err != nil {
					break // spawns start their own until the next try
				}
				l.pool <- w
			}
			select {
			case <-l.taken:
				// Not at once: a helper being started holds copies of the
				// kernel's descriptors until its exec, the output pipes
				// of the spawn just handed off among them, whose end of
				// output would wait for it.
				select {
				case <-time.After(refillDelay):
				case <-l.stop:
					return
				}
			case <-time.After(time.Second):
			case <-l.stop:
				return
			}
		}
	}()
}

// startWarm starts one waiting helper, registered as a leader so that the
// orphan reaper leaves its exit to its exec.Cmd.
func (l *Sandboxed) startWarm() (*warmHelper, error) {
	leaders.mu.Lock()
	defer leaders.mu.Unlock()
	cmd, ctl, err := sandbox.StartWarm(l.Helper)
	if err != nil {
		return nil, err
	}
	leaders.pids[cmd.Process.Pid] = true
	return &warmHelper{cmd, ctl}, nil
}

// Close ends the waiting helpers. Spawns after Close start their own.
func (l *Sandboxed) Close() {
	l.poolOnce.Do(func() {}) // no pool starts after this
	if l.stop == nil {
		return
	}
	close(l.stop)
	<-l.poolDone
	for {
		select {
		case w := <-l.pool:
			w.ctl.Close() // the helper exits when its control socket closes
			w.cmd.Wait()
			forgetLeader(w.cmd.Process.Pid)
		default:
			return
		}
	}
}

// unpassable is the first folder on the way to path that uid (with gid uid
// and no groups) may not search, by its mode; "" when there is none.
func unpassable(path string, uid int) string {
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			return ""
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return ""
		}
		var bit os.FileMode = 0o001
		switch {
		case int(st.Uid) == uid:
			bit = 0o100
		case int(st.Gid) == uid:
			bit = 0o010
		}
		if fi.Mode().Perm()&bit == 0 {
			return dir
		}
		if dir == "/" {
			return ""
		}
	}
}

func modeOf(path string) os.FileMode {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Mode().Perm()
}

func ownerOf(path string) int {
	fi, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// mkdirReachable makes dir (mode 0700, for the sandbox uid it is given to)
// in a parent the sandbox uids may pass through but not list.
func mkdirReachable(dir string) error {
	err := os.Mkdir(dir, 0o700)
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// The first in its parent: make the parent, passable but not listable.
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o711); err != nil {
		return err
	}
	if err := os.Chmod(parent, 0o711); err != nil {
		return err
	}
	return os.Mkdir(dir, 0o700)
}

// connect makes the socket pair of a process's kernel connection: one end
// served with grants g, the other handed to the process.
func (l *Sandboxed) connect(c *sandbox.Cmd, uid int, g manifests.IPCGrants) error {
	if l.ServeIPC == nil {
		return fmt.Errorf("the skill asks for [ipc] scopes, and this kernel serves no connections to skills")
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("kernel connection for the skill: %w", err)
	}
	kernelEnd, skillEnd := os.NewFile(uintptr(fds[0]), "kernel-end"), os.NewFile(uintptr(fds[1]), "skill-end")
	defer kernelEnd.Close() // the server keeps its own duplicate
	if uid < 0 {
		uid = os.Getuid()
	}
	if err := l.ServeIPC(kernelEnd, uid, g); err != nil {
		skillEnd.Close()
		return err
	}
	c.SetIPC(skillEnd)
	return nil
}

// uidFor picks the uid a spawn runs as: the owner of a workspace the caller
// gave, when that is an ordinary user, so that the process can write what
// its user can; else a uid of its own.
func (l *Sandboxed) uidFor(work string, made bool) (uid int, allocated bool, err error) {
	if !made {
		if fi, err := os.Stat(work); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && (st.Uid < UIDBase || st.Uid >= UIDBase+UIDCount) {
				return int(st.Uid), false, nil
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inUse == nil {
		l.inUse = map[int]*os.File{}
	}
	for range UIDCount {
		u := UIDBase + l.next
		l.next = (l.next + 1) % UIDCount
		if l.inUse[u] != nil {
			continue
		}
		lock, err := lockUID(u)
		if err != nil {
			return 0, false, err
		}
		if lock != nil {
			// A kernel that died holding u may have left processes of it
			// behind; they must not share the uid with a new tree. A uid
			// released cleanly has none, and needs no scan of /proc.
			if !released(lock) {
				KillUID(u)
			}
			lock.WriteAt([]byte{uidBusy}, 0)
			l.inUse[u] = lock
			return u, true, nil
		}
	}
	return 0, false, fmt.Errorf("all %d sandbox uids are in use", UIDCount)
}

// free releases uid, whose processes are all gone.
func (l *Sandboxed) free(uid int) {
	l.mu.Lock()
	if lock := l.inUse[uid]; lock != nil {
		lock.WriteAt([]byte{uidReleased}, 0)
		lock.Close()
	}
	delete(l.inUse, uid)
	l.mu.Unlock()
}

// Every kernel on the machine gives out uids of the same range. A kernel
// holds each uid it gave out by an flock on a file named after it, so that
// another kernel skips that uid — else the cleanup of one tree would kill
// another kernel's tree of the same uid — and a starting kernel's sweep
// leaves it alone. The locks go with the process: the uids of a kernel that
// died are free again.
var uidLockDir = "/run/kairo/sandbox-uids"

// A uid's lock file says whether the uid was released cleanly — every
// process of it killed — or is (or was, by a kernel that died) in use.
const (
	uidBusy     = 'b'
	uidReleased = 'r'
)

// released reports whether the uid of lock was released cleanly.
func released(lock *os.File) bool {
	var b [1]byte
	n, _ := lock.ReadAt(b[:], 0)
	return n == 1 && b[0] == uidReleased
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

// SweepSandboxUIDs kills every process running as a sandbox uid that no
// live kernel holds: what a kernel that died without cleaning up left
// behind. It returns how many it killed.
func SweepSandboxUIDs() int {
	left := map[int]bool{}
	eachProcess(func(pid, uid int) {
		if uid >= UIDBase && uid < UIDBase+UIDCount {
			left[uid] = true
		}
	})
	killed := 0
	for u := range left {
		if lock, err := lockUID(u); err == nil && lock != nil {
			killed += KillUID(u)
			lock.WriteAt([]byte{uidReleased}, 0)
			lock.Close()
		}
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

// ScratchRoot makes (afresh) the folder a Sandboxed launcher keeps its temp
// folders and scratch workspaces in: name, under a folder of this user's in
// /dev/shm when that is a tmpfs — making a folder on a disk filesystem costs
// a quarter of a millisecond per spawn on a virtual disk, on tmpfs a few
// microseconds — else in the system's temp folder. The path up to it may be
// passed through by the sandboxes' uids, not listed.
func ScratchRoot(name string) (string, error) {
	base := os.TempDir()
	var st unix.Statfs_t
	if unix.Statfs("/dev/shm", &st) == nil && st.Type == unix.TMPFS_MAGIC {
		base = "/dev/shm"
	}
	mine := filepath.Join(base, "kairo-"+strconv.Itoa(os.Geteuid()))
	if err := os.Mkdir(mine, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("sandbox scratch folder: %w", err)
	}
	// base is open to every user: the folder must be ours, not a link or a
	// folder someone else made there first.
	fi, err := os.Lstat(mine)
	if err != nil {
		return "", fmt.Errorf("sandbox scratch folder: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || !fi.IsDir() || int(st.Uid) != os.Geteuid() {
		return "", fmt.Errorf("sandbox scratch folder %s is not a folder of this user's: remove it", mine)
	}
	if err := os.Chmod(mine, 0o711); err != nil {
		return "", err
	}
	root := filepath.Join(mine, name)
	if err := os.RemoveAll(root); err != nil {
		return "", fmt.Errorf("sandbox scratch folder: %w", err)
	}
	if err := os.Mkdir(root, 0o711); err != nil {
		return "", fmt.Errorf("sandbox scratch folder: %w", err)
	}
	return root, nil
}
