package sandbox

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FilterPolicy says which sockets the seccomp filter lets a binary create;
// everything else the filter decides is fixed (see [BuildFilter]).
type FilterPolicy struct {
	TCP  bool // AF_INET/AF_INET6 SOCK_STREAM with protocol 0 or IPPROTO_TCP
	UDP  bool // AF_INET/AF_INET6 SOCK_DGRAM with protocol 0 or IPPROTO_UDP
	Unix bool // AF_UNIX sockets of any type
}

// The errno a refused call returns. Syscalls the sandbox takes away fail
// with EPERM, as they would for an unprivileged caller. A refused socket
// fails with EACCES, which socket(2) documents as "permission to create a
// socket of this type is denied": programs handle it, and it tells a
// filter denial apart from the EPERM an unprivileged raw socket gets from
// the kernel itself. clone3 fails with ENOSYS, which makes glibc and others
// fall back to clone, whose flags the filter can read.
const (
	denyErrno   = unix.EPERM
	socketErrno = unix.EACCES
	clone3Errno = unix.ENOSYS
)

// cloneNamespaceFlags are the namespace flags clone(2) takes. CLONE_NEWTIME
// (0x80) is missing on purpose: in clone(2) that bit belongs to the exit
// signal in the low byte, and only clone3 and unshare create a time
// namespace.
const cloneNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// memfdNoExecSeal is MFD_NOEXEC_SEAL (Linux 6.3): the memfd is created
// without execute permission and sealed so that it never gets it. A memfd
// is on no path, so Landlock's execute rights do not reach it: without the
// seal, bytes written to it run through /proc/self/fd/N or execveat. On a
// kernel before 6.3 the flag is unknown and every memfd_create fails.
const memfdNoExecSeal = unix.MFD_NOEXEC_SEAL

// personality(2) values a binary may pass: PER_LINUX, which every Linux
// process already runs with, and 0xffffffff, which only reads the
// persona. Others can turn off address randomisation for the binary's
// children (ADDR_NO_RANDOMIZE) or make readable memory executable
// (READ_IMPLIES_EXEC).
const (
	personaLinux = 0
	personaQuery = 0xffffffff
)

// Offsets in struct seccomp_data (include/uapi/linux/seccomp.h): the
// syscall number, the audit arch, then six 64-bit arguments.
const (
	seccompDataNr   = 0
	seccompDataArch = 4
	seccompDataArgs = 16
)

// argLow is the offset of the low 32 bits of argument i on a
// little-endian machine. The filter reads only low halves: the kernel
// reads every argument the filter checks as 32 bits (an int, an unsigned
// int, or clone's flags, of which it keeps the low half), so high bits
// neither slip a call past a check nor change what the kernel does.
func argLow(i uint32) uint32 { return seccompDataArgs + 8*i }

// bpfLeafSize is how many syscall numbers the dispatch compares one by one
// at the leaves of its binary search; it keeps the tree shallow without a
// split instruction for every number.
const bpfLeafSize = 4

// BuildFilter returns the seccomp program for fp. The program
//
//   - kills the process (SECCOMP_RET_KILL_PROCESS) for a syscall made
//     through any ABI but the native one: i386 through int 0x80, x32;
//   - fails with EPERM the calls that reach other processes, the mount
//     table, namespaces, keyrings, io_uring, bpf, perf, userfaultfd, file
//     handles, System V IPC and POSIX message queues or the running of the
//     host (seccomp_syscalls.go lists them with the reason for each group);
//     clone with a namespace flag; memfd_create without MFD_NOEXEC_SEAL;
//     personality with anything but PER_LINUX or a query; and the terminal
//     ioctls TIOCSTI (types into the terminal as if the user did) and
//     TIOCLINUX;
//   - fails clone3 with ENOSYS, since its flags sit in memory the filter
//     cannot read;
//   - lets socket create only what fp grants, and socketpair only AF_UNIX
//     pairs (they reach nothing outside), failing the rest with EACCES;
//   - allows everything else: Landlock and the uid drop confine it.
//
// It dispatches on the syscall number with a binary search that compares
// nothing but the number, so the kernel's seccomp cache (Linux 5.11+) can
// prove every other syscall allowed and skip the filter for it.
func BuildFilter(fp FilterPolicy) ([]unix.SockFilter, error) {
	if auditArch == 0 {
		return nil, fmt.Errorf("sandbox: no seccomp syscall table for %s; the sandbox cannot run binaries here", runtime.GOARCH)
	}
	var a bpfAsm
	var (
		allow      = a.newLabel()
		kill       = a.newLabel()
		deny       = a.newLabel()
		denySocket = a.newLabel()
		noClone3   = a.newLabel()

		clone       = a.newLabel()
		ioctl       = a.newLabel()
		memfd       = a.newLabel()
		personality = a.newLabel()
		socketpair  = a.newLabel()
		socket      = denySocket
	)
	if fp.TCP || fp.UDP || fp.Unix {
		socket = a.newLabel()
	}

	sc := argSyscalls
	routes := []bpfRoute{
		{sc.clone, clone},
		{sc.clone3, noClone3},
		{sc.ioctl, ioctl},
		{sc.memfdCreate, memfd},
		{sc.personality, personality},
		{sc.socket, socket},
		{sc.socketpair, socketpair},
	}
	for _, nr := range slices.Concat(deniedSyscalls, archDeniedSyscalls) {
		routes = append(routes, bpfRoute{nr, deny})
	}
	slices.SortFunc(routes, func(x, y bpfRoute) int { return cmp.Compare(x.nr, y.nr) })
	for i := 1; i < len(routes); i++ {
		if routes[i].nr == routes[i-1].nr {
			return nil, fmt.Errorf("sandbox: seccomp table lists syscall %d twice", routes[i].nr)
		}
	}

	a.load(seccompDataArch)
	a.jeq(auditArch, bpfNext, kill)
	a.load(seccompDataNr)
	if x32Bit != 0 {
		a.jset(x32Bit, kill, bpfNext)
	}
	dispatch(&a, routes, allow)

	a.bind(clone)
	a.load(argLow(0))
	a.jset(cloneNamespaceFlags, deny, allow)

	a.bind(ioctl)
	a.load(argLow(1))
	a.jeq(sc.tiocsti, deny, bpfNext)
	a.jeq(sc.tioclinux, deny, allow)

	a.bind(memfd)
	a.load(argLow(1))
	a.jset(memfdNoExecSeal, allow, deny)

	a.bind(personality)
	a.load(argLow(0))
	a.jeq(personaLinux, allow, bpfNext)
	a.jeq(personaQuery, allow, deny)

	a.bind(socketpair)
	a.load(argLow(0))
	a.jeq(unix.AF_UNIX, allow, denySocket)

	if socket != denySocket {
		a.bind(socket)
		socketRules(&a, fp, allow, denySocket)
	}

	a.bind(allow)
	a.ret(unix.SECCOMP_RET_ALLOW)
	a.bind(deny)
	a.ret(retErrno(denyErrno))
	a.bind(denySocket)
	a.ret(retErrno(socketErrno))
	a.bind(noClone3)
	a.ret(retErrno(clone3Errno))
	a.bind(kill)
	a.ret(unix.SECCOMP_RET_KILL_PROCESS)

	prog, err := a.assemble()
	if err != nil {
		return nil, fmt.Errorf("sandbox: build seccomp filter: %w", err)
	}
	return prog, nil
}

// bpfRoute sends one syscall number to the code that decides it.
type bpfRoute struct {
	nr uint32
	to bpfLabel
}

// dispatch emits a binary search over routes (sorted by number) with the
// syscall number in the accumulator; a number not in routes goes to
// otherwise.
func dispatch(a *bpfAsm, routes []bpfRoute, otherwise bpfLabel) {
	if len(routes) <= bpfLeafSize {
		for i, r := range routes {
			miss := bpfNext
			if i == len(routes)-1 {
				miss = otherwise
			}
			a.jeq(r.nr, r.to, miss)
		}
		if len(routes) == 0 {
			a.goTo(otherwise)
		}
		return
	}
	mid := len(routes) / 2
	upper := a.newLabel()
	a.jge(routes[mid].nr, upper, bpfNext)
	dispatch(a, routes[:mid], otherwise)
	a.bind(upper)
	dispatch(a, routes[mid:], otherwise)
}

// socketRules emits the socket(domain, type, protocol) allowlist. The
// type's SOCK_NONBLOCK and SOCK_CLOEXEC flags are masked off; any other
// flag bit makes the type match nothing, and the call is refused.
func socketRules(a *bpfAsm, fp FilterPolicy, allow, refuse bpfLabel) {
	unixTo, inet, tcp, udp := refuse, refuse, refuse, refuse
	if fp.Unix {
		unixTo = allow
	}
	if fp.TCP {
		tcp = a.newLabel()
	}
	if fp.UDP {
		udp = a.newLabel()
	}
	if fp.TCP || fp.UDP {
		inet = a.newLabel()
	}

	a.load(argLow(0))
	a.jeq(unix.AF_UNIX, unixTo, bpfNext)
	a.jeq(unix.AF_INET, inet, bpfNext)
	a.jeq(unix.AF_INET6, inet, refuse)
	if inet == refuse {
		return
	}

	a.bind(inet)
	a.load(argLow(1))
	a.and(^uint32(unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC))
	a.jeq(unix.SOCK_STREAM, tcp, bpfNext)
	a.jeq(unix.SOCK_DGRAM, udp, refuse)
	// Protocol 0 picks TCP or UDP for these types; naming it is the same.
	// Anything else (MPTCP, UDP-Lite, SCTP, ICMP) is refused.
	if fp.TCP {
		a.bind(tcp)
		a.load(argLow(2))
		a.jeq(0, allow, bpfNext)
		a.jeq(unix.IPPROTO_TCP, allow, refuse)
	}
	if fp.UDP {
		a.bind(udp)
		a.load(argLow(2))
		a.jeq(0, allow, bpfNext)
		a.jeq(unix.IPPROTO_UDP, allow, refuse)
	}
}

// retErrno is the verdict that fails a syscall with e.
func retErrno(e unix.Errno) uint32 {
	return unix.SECCOMP_RET_ERRNO | uint32(e)&unix.SECCOMP_RET_DATA
}

// InstallFilter loads prog for every thread of the process (TSYNC). The
// caller has set no_new_privs on the calling thread (it is per thread:
// lock the goroutine to its OS thread for both calls); TSYNC copies it to
// the other threads. The filter is inherited across fork and execve and
// cannot be removed.
//
// prog is loaded with SECCOMP_FILTER_FLAG_LOG, so that its refusals reach
// the audit subsystem (where kairo reports them as the tree's denials)
// when kernel.seccomp.actions_logged holds "errno", as it does by
// default. clone3's ENOSYS is no refusal but the way to clone, which the C
// library tries first for every thread and posix_spawn: a second filter,
// without the flag, returns the same ENOSYS, and the kernel takes the
// verdict of the newest filter among equals, so it is never logged. That
// filter allows every other call, which leaves prog's verdict standing.
func InstallFilter(prog []unix.SockFilter) error {
	if len(prog) == 0 || len(prog) > bpfMaxInsns {
		return fmt.Errorf("sandbox: install seccomp filter: %d instructions; the kernel takes 1 to %d", len(prog), bpfMaxInsns)
	}
	if err := installFilter(prog, unix.SECCOMP_FILTER_FLAG_TSYNC|unix.SECCOMP_FILTER_FLAG_LOG); err != nil {
		return err
	}
	return installFilter(quietClone3, unix.SECCOMP_FILTER_FLAG_TSYNC)
}

// installQuiet installs prog as InstallFilter does, without logging its
// refusals.
func installQuiet(prog []unix.SockFilter) error {
	if len(prog) == 0 || len(prog) > bpfMaxInsns {
		return fmt.Errorf("sandbox: install seccomp filter: %d instructions; the kernel takes 1 to %d", len(prog), bpfMaxInsns)
	}
	return installFilter(prog, unix.SECCOMP_FILTER_FLAG_TSYNC)
}

// quietClone3 fails clone3 with ENOSYS as BuildFilter's program does,
// without logging it, and allows the rest. It compares the number alone,
// so the kernel's seccomp cache skips it for every other call.
var quietClone3 = []unix.SockFilter{
	{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: seccompDataNr},
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: argSyscalls.clone3},
	{Code: unix.BPF_RET | unix.BPF_K, K: retErrno(clone3Errno)},
	{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
}

func installFilter(prog []unix.SockFilter, flags uintptr) error {
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// Raw: the call never blocks, and the runtime must not take it as a
	// chance to start a thread — the helper's limits are set by now, and
	// under a tight RLIMIT_AS a new thread's stack may not fit.
	tid, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		flags, uintptr(unsafe.Pointer(&fprog)))
	switch {
	case errno == unix.EACCES:
		return fmt.Errorf("sandbox: install seccomp filter: %w; set no_new_privs first", errno)
	case errno != 0:
		return fmt.Errorf("sandbox: install seccomp filter: seccomp(SECCOMP_SET_MODE_FILTER, TSYNC): %w", errno)
	case tid != 0:
		// TSYNC reports, as a positive return, a thread that already
		// runs a filter the caller's thread does not share.
		return fmt.Errorf("sandbox: install seccomp filter: thread %d runs a seccomp filter of its own, so the filter cannot cover every thread; nothing was installed", tid)
	}
	return nil
}
