//go:build amd64 || arm64

package sandbox

import "golang.org/x/sys/unix"

// deniedSyscalls are refused with EPERM whatever their arguments. The
// filter is a denylist: Landlock confines files and TCP ports and the uid
// drop takes privilege away, so the list holds only what those two leave
// open, grouped by the reason for refusing it. archDeniedSyscalls adds the
// calls one architecture alone has.
var deniedSyscalls = []uint32{
	// Reaching into another process. A sandboxed binary may share its uid
	// with other processes, and the same uid is no boundary for these.
	unix.SYS_PTRACE,
	unix.SYS_PROCESS_VM_READV,
	unix.SYS_PROCESS_VM_WRITEV,
	unix.SYS_PIDFD_GETFD, // copies a descriptor out of another process

	// The mount table. Landlock rules name paths; a binary that could
	// mount, bind or move would change what those paths are.
	unix.SYS_MOUNT,
	unix.SYS_UMOUNT2,
	unix.SYS_PIVOT_ROOT,
	unix.SYS_MOVE_MOUNT,
	unix.SYS_OPEN_TREE,
	unix.SYS_OPEN_TREE_ATTR,
	unix.SYS_FSOPEN,
	unix.SYS_FSCONFIG,
	unix.SYS_FSMOUNT,
	unix.SYS_FSPICK,
	unix.SYS_MOUNT_SETATTR,
	unix.SYS_CHROOT, // with a mount, the classic way out of a path jail

	// Namespaces. A new user namespace hands its creator every capability
	// inside it, which opens the kernel's largest attack surface (netfilter,
	// mounts, raw networking) to unprivileged code. clone and clone3 are
	// handled with their arguments in BuildFilter.
	unix.SYS_UNSHARE,
	unix.SYS_SETNS,

	// Kernel keyrings are not namespaced: keys of the uid and the session
	// are shared with processes outside the sandbox.
	unix.SYS_KEYCTL,
	unix.SYS_ADD_KEY,
	unix.SYS_REQUEST_KEY,

	// Kernel attack surface no tool needs. userfaultfd lets a caller stall
	// the kernel at a chosen page fault, the usual way to win a race in an
	// exploit. io_uring operations (openat, socket, connect, ...) run
	// inside the kernel without ever passing this filter.
	unix.SYS_BPF,
	unix.SYS_PERF_EVENT_OPEN,
	unix.SYS_USERFAULTFD,
	unix.SYS_IO_URING_SETUP,
	unix.SYS_IO_URING_ENTER,
	unix.SYS_IO_URING_REGISTER,

	// Opening a file by handle skips path resolution, and with it every
	// Landlock rule (the "shocker" container escape).
	unix.SYS_OPEN_BY_HANDLE_AT,
	unix.SYS_NAME_TO_HANDLE_AT,

	// Running the host: kernel code, power, swap, accounting, quotas, the
	// clock. All need capabilities the binary should never hold; refusing
	// them here keeps a sandbox whose uid drop went wrong from touching the
	// host. syslog also leaks kernel addresses where dmesg_restrict is off.
	// adjtimex goes too though a zero mode only reads: no tool needs it.
	unix.SYS_KEXEC_LOAD,
	unix.SYS_KEXEC_FILE_LOAD,
	unix.SYS_INIT_MODULE,
	unix.SYS_FINIT_MODULE,
	unix.SYS_DELETE_MODULE,
	unix.SYS_REBOOT,
	unix.SYS_SWAPON,
	unix.SYS_SWAPOFF,
	unix.SYS_ACCT,
	unix.SYS_QUOTACTL,
	unix.SYS_QUOTACTL_FD,
	unix.SYS_SYSLOG,
	unix.SYS_SETTIMEOFDAY,
	unix.SYS_CLOCK_SETTIME,
	unix.SYS_ADJTIMEX,
	unix.SYS_CLOCK_ADJTIME,
	unix.SYS_LOOKUP_DCOOKIE, // profiling relic, gone since Linux 6.8

	// System V IPC and POSIX message queues. Their objects belong to the
	// IPC namespace, not to the process: a segment or a queue made in the
	// sandbox outlives its tree (a 512 MiB shm segment, a 0666 queue any
	// uid can read), and no path names them for Landlock to check. POSIX
	// shared memory (shm_open) is a file under /dev/shm, which Landlock
	// does check. (The ipc(2) multiplexer exists only for i386 here, whose
	// ABI the filter kills.)
	unix.SYS_SHMGET,
	unix.SYS_SHMAT,
	unix.SYS_SHMCTL,
	unix.SYS_SHMDT,
	unix.SYS_MSGGET,
	unix.SYS_MSGSND,
	unix.SYS_MSGRCV,
	unix.SYS_MSGCTL,
	unix.SYS_SEMGET,
	unix.SYS_SEMOP,
	unix.SYS_SEMTIMEDOP,
	unix.SYS_SEMCTL,
	unix.SYS_MQ_OPEN,
	unix.SYS_MQ_UNLINK,
	unix.SYS_MQ_TIMEDSEND,
	unix.SYS_MQ_TIMEDRECEIVE,
	unix.SYS_MQ_NOTIFY,
	unix.SYS_MQ_GETSETATTR,
}

// argSyscalls are the calls the filter decides on their arguments, and the
// two terminal ioctls it refuses.
var argSyscalls = struct {
	clone, clone3, ioctl, personality, socket, socketpair, memfdCreate uint32
	tiocsti, tioclinux                                                 uint32
}{
	clone:       unix.SYS_CLONE,
	clone3:      unix.SYS_CLONE3,
	ioctl:       unix.SYS_IOCTL,
	personality: unix.SYS_PERSONALITY,
	socket:      unix.SYS_SOCKET,
	socketpair:  unix.SYS_SOCKETPAIR,
	memfdCreate: unix.SYS_MEMFD_CREATE,
	tiocsti:     unix.TIOCSTI,
	tioclinux:   unix.TIOCLINUX,
}
