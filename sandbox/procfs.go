package sandbox

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// The host's /proc shows every process: other trees' command lines, the
// daemon's, and through /proc/net/unix every listening socket. Landlock
// cannot narrow it, since a rule covers everything beneath a folder and
// each process's entries are at /proc/PID. So a helper that runs as root
// gives the sandbox a /proc of its own: a mount namespace of the thread
// that execs, and in it a new procfs instance over /proc mounted with
//
//   - hidepid=invisible: a process that the sandbox may not ptrace is not
//     there at all. Landlock lets a sandbox ptrace only its own domain, so
//     that is every process outside the tree, even one of the same uid;
//   - subset=pid: nothing but the process folders and self: no /proc/net,
//     /proc/sys, /proc/kcore, /proc/sysrq-trigger.
//
// Both options need Linux 5.8, older than any Landlock the sandbox runs on.
// Landlock rules name inodes, so the "/proc" rule must be opened after the
// mount: it then grants the new instance and nothing of the host's.
// Without root there is no mount namespace to make (not without a user
// namespace and a pid namespace, which a sandbox does not have), and the
// host's /proc stays as it is; [Gaps], [WriteCheck] and [Explain] say so.

// procOptions are the mount options of the sandbox's procfs.
const procOptions = "hidepid=invisible,subset=pid"

// procPrivate records that this helper has its own /proc: a warm helper
// makes it before it waits for a spawn.
var procPrivate bool

// privateProc gives the calling thread its own mount namespace with a new
// procfs on /proc. The thread must stay locked: the namespace is the
// thread's, and passes to the target when this thread execs.
func privateProc() error {
	if procPrivate {
		return nil
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("private /proc: unshare the mount namespace: %w", err)
	}
	// Slave, not shared: no mount made here reaches the host, while the
	// host's mounts and unmounts still reach this copy (a drive unmounted
	// outside is not held busy by a sandbox).
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("private /proc: make the mount namespace a slave of the host's: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, procOptions); err != nil {
		return fmt.Errorf("private /proc: mount procfs with %s: %w", procOptions, err)
	}
	procPrivate = true
	return nil
}

// hidesProc reports whether a sandbox started now gets its own /proc: only
// a kernel that runs as root can give it one.
func hidesProc() bool { return os.Geteuid() == 0 }
