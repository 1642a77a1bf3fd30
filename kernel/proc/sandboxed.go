package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

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

	mu     sync.Mutex
	inUse  map[int]bool
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
	cleanup := func() {
		if c.Process != nil {
			syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		}
		if allocated {
			KillUID(uid)
			l.free(uid)
		}
		os.RemoveAll(tmp)
	}
	return &Launch{Cmd: c.Cmd, Started: c.Started, Cleanup: cleanup, Work: work}, nil
}

// mkdirReachable makes dir (mode 0700, for the sandbox uid it is given to)
// in a parent the sandbox uids may pass through but not list.
func mkdirReachable(dir string) error {
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
		l.inUse = map[int]bool{}
	}
	for range UIDCount {
		u := UIDBase + l.next
		l.next = (l.next + 1) % UIDCount
		if !l.inUse[u] {
			l.inUse[u] = true
			return u, true, nil
		}
	}
	return 0, false, fmt.Errorf("all %d sandbox uids are in use", UIDCount)
}

func (l *Sandboxed) free(uid int) {
	l.mu.Lock()
	delete(l.inUse, uid)
	l.mu.Unlock()
}

// KillUID kills every process running as uid, until none is left (a tree
// that forks while it is being killed needs more than one pass).
func KillUID(uid int) {
	killWhere(func(u int) bool { return u == uid })
}

// SweepSandboxUIDs kills every process running as a sandbox uid: what a
// kernel that died without cleaning up left behind.
func SweepSandboxUIDs() int {
	return killWhere(func(u int) bool { return u >= UIDBase && u < UIDBase+UIDCount })
}

func killWhere(match func(uid int) bool) int {
	killed := 0
	for range 100 {
		found := 0
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
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok || !match(int(st.Uid)) {
				continue
			}
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				found++
			}
		}
		killed += found
		if found == 0 {
			return killed
		}
	}
	return killed
}
