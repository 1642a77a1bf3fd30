package sandbox

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Exit codes of a helper that could not run its target, as a shell has them.
const (
	exitSetup    = 126 // the sandbox could not be built: nothing ran
	exitNotFound = 127
)

// HelperMain confines this process to the policy on descriptor 3 and execs
// os.Args[2:]. It never returns: on any failure it reports on descriptor 4
// and exits 126 (127 when the target does not exist), having run nothing.
func HelperMain() {
	runtime.LockOSThread() // the thread that execs carries every per-thread setting
	var err error
	if len(os.Args) > 2 && os.Args[2] == WarmArg {
		var p *plan
		var argv []string
		procMade := true
		if hidesProc() {
			// Off the spawn's path, while the helper waits. On failure
			// confine tries again and reports why.
			procMade = privateProc() == nil
		}
		// The same for what only takes away and no later step needs, for
		// the Landlock rules most spawns share, and, last (it refuses the
		// private /proc's mount, which confine then tries again), for the
		// seccomp filter the kernel names.
		prepareDrop()
		prepareRuleset()
		if len(os.Args) > 3 && procMade {
			prepareFilter(os.Args[3])
		}
		if p, argv, err = receive(); err == nil {
			err = confine(p, argv)
		}
	} else {
		err = confineAndExec(os.Args[2:])
	}
	code := exitSetup
	if errno, ok := err.(*execError); ok && errno.err == syscall.ENOENT {
		code = exitNotFound
	}
	msg := "sandbox: " + err.Error()
	if _, werr := unix.Write(statusFD, []byte(msg)); werr != nil {
		fmt.Fprintln(os.Stderr, "kairo", msg)
	}
	os.Exit(code)
}

type execError struct {
	path string
	err  syscall.Errno
}

func (e *execError) Error() string { return fmt.Sprintf("exec %s: %v", e.path, e.err) }

func confineAndExec(argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("no target to run")
	}
	f := os.NewFile(policyFD, "policy")
	raw, err := io.ReadAll(io.LimitReader(f, maxPolicy+1))
	f.Close()
	if err != nil {
		return fmt.Errorf("read policy: %w", err)
	}
	p, err := decodePlan(raw)
	if err != nil {
		return err
	}
	return confine(p, argv)
}

// confine applies plan p to this thread and execs argv.
func confine(p *plan, argv []string) error {
	ppid := os.Getppid()

	// 1. Nothing inherited beyond stdio survives the exec; the status
	// descriptor closes with it too.
	// The status descriptor is closed by the exec, which tells the kernel
	// the target runs.
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("close inherited descriptors: %w", err)
	}
	if p.ipc {
		// The kernel connection, moved to where KAIRO_IPC_FD says, kept
		// open across the exec.
		if err := unix.Dup3(ipcFD, ipcTargetFD, 0); err != nil {
			return fmt.Errorf("hand over the kernel connection: %w", err)
		}
	}
	// A /proc that shows the sandbox's own processes only, before
	// Landlock (which forbids mounting) opens its "/proc" rule on it.
	if p.privateProc {
		if err := privateProc(); err != nil {
			return err
		}
	}
	// 2. no_new_privs: Landlock needs it from a process without
	// CAP_SYS_ADMIN, and nothing this process execs may gain privileges.
	if !dropPrepared { // else set while the warm helper waited
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("no_new_privs: %w", err)
		}
	}
	// 3. One Landlock ruleset: filesystem, TCP ports, scopes.
	if err := applyRuleset(p); err != nil {
		return err
	}
	// 4. An unprivileged uid, no groups, no capabilities.
	if err := dropPrivileges(p.uid, p.gid); err != nil {
		return err
	}
	// A change of credentials clears the parent-death signal: set it again,
	// and leave if the kernel died in the meantime.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("parent-death signal: %w", err)
	}
	if os.Getppid() != ppid {
		return fmt.Errorf("the kernel exited")
	}
	x, err := prepareExec(argv, p.env)
	if err != nil {
		return err
	}
	// Resource limits, as late as they can be: the helper is a Go program
	// too, and a tight memory or process limit must not catch the runtime
	// in the middle of the steps above.
	if err := setLimits(&p.limits); err != nil {
		return err
	}
	// The seccomp filter, last: after it, the calls the steps above
	// needed may be gone. (A warm helper may have installed it while it
	// waited, which refuses none of those calls: then it is checked to be
	// the plan's; see warmfilter.go.)
	if err := installPlanFilter(p); err != nil {
		return err
	}
	if errno := execve(x); errno != 0 {
		return &execError{argv[0], errno}
	}
	return nil
}

// execArgs are execve's arguments, made before the limits are set: under a
// tight memory limit the helper must not allocate any more.
type execArgs struct {
	path       *byte
	argv, envp []*byte
}

func prepareExec(argv, env []string) (execArgs, error) {
	var x execArgs
	var err error
	if x.path, err = syscall.BytePtrFromString(argv[0]); err != nil {
		return x, fmt.Errorf("target %q: %w", argv[0], err)
	}
	if x.argv, err = syscall.SlicePtrFromStrings(argv); err != nil {
		return x, fmt.Errorf("target arguments: %w", err)
	}
	if x.envp, err = syscall.SlicePtrFromStrings(env); err != nil {
		return x, fmt.Errorf("environment: %w", err)
	}
	return x, nil
}

// execve is the system call itself, with no allocation on the way.
func execve(x execArgs) syscall.Errno {
	_, _, errno := syscall.RawSyscall(syscall.SYS_EXECVE,
		uintptr(unsafe.Pointer(x.path)),
		uintptr(unsafe.Pointer(&x.argv[0])),
		uintptr(unsafe.Pointer(&x.envp[0])))
	return errno
}

// filterPolicy is what the seccomp filter must let p create.
func (p *Policy) filterPolicy() FilterPolicy {
	return FilterPolicy{
		TCP:  len(p.ConnectTCP) > 0 || len(p.BindTCP) > 0,
		UDP:  p.UDP,
		Unix: len(p.Unix) > 0,
	}
}

// defaultOpenFiles is the soft RLIMIT_NOFILE of a target without one.
const defaultOpenFiles = 1024

// setLimits applies l as hard and soft limits, so that the target cannot
// raise them. syscall.Setrlimit, not unix.Setrlimit: the Go runtime
// restores its saved RLIMIT_NOFILE at exec unless told through syscall.
func setLimits(l *Limits) error {
	set := func(name string, res int, v uint64) error {
		if err := syscall.Setrlimit(res, &syscall.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("limit %s to %d: %w", name, v, err)
		}
		return nil
	}
	if err := set("core", unix.RLIMIT_CORE, 0); err != nil {
		return err
	}
	if l.OpenFiles == 0 {
		// The Go runtime raised its soft limit to the hard one at start,
		// and execve (unlike syscall.Exec) does not put it back: give the
		// target the conventional soft limit.
		var cur syscall.Rlimit
		if err := syscall.Getrlimit(unix.RLIMIT_NOFILE, &cur); err == nil && cur.Cur > defaultOpenFiles {
			cur.Cur = defaultOpenFiles
			syscall.Setrlimit(unix.RLIMIT_NOFILE, &cur)
		}
	}
	if l.CPUSeconds > 0 {
		// SIGXCPU at the soft limit, SIGKILL a second later.
		if err := syscall.Setrlimit(unix.RLIMIT_CPU, &syscall.Rlimit{Cur: l.CPUSeconds, Max: l.CPUSeconds + 1}); err != nil {
			return fmt.Errorf("limit cpu to %ds: %w", l.CPUSeconds, err)
		}
	}
	for _, r := range []struct {
		name string
		res  int
		v    uint64
	}{
		{"memory", unix.RLIMIT_AS, l.Memory},
		{"processes", unix.RLIMIT_NPROC, l.Processes},
		{"file size", unix.RLIMIT_FSIZE, l.FileSize},
		{"open files", unix.RLIMIT_NOFILE, l.OpenFiles},
	} {
		if r.v == 0 {
			continue
		}
		if err := set(r.name, r.res, r.v); err != nil {
			return err
		}
	}
	return nil
}

// dropPrepared records that this helper set no_new_privs and, as root,
// emptied its capability bounding set: a warm helper does both before it
// waits.
var dropPrepared bool

// prepareDrop sets no_new_privs and, as root, empties the capability
// bounding set: the bounding set bounds only what an exec could gain, and
// no_new_privs only what an exec may do, so neither takes anything the
// steps of confine need. Emptying the set is one call per capability, a
// tenth of a millisecond. On failure confine does both again and says why.
func prepareDrop() {
	if unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != nil {
		return
	}
	if os.Geteuid() == 0 || os.Getuid() == 0 {
		if emptyBounding() != nil {
			return
		}
	}
	dropPrepared = true
}

// emptyBounding drops every capability from the bounding set; it needs
// CAP_SETPCAP, so it comes before the uid changes.
func emptyBounding() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	return nil
}

// dropPrivileges switches to uid and gid with no supplementary groups and
// checks that no capability is left in any set. Root must drop; any other
// caller keeps its own uid (uid -1 or its own).
func dropPrivileges(uid, gid int) error {
	if os.Geteuid() == 0 || os.Getuid() == 0 {
		if uid <= 0 || gid <= 0 {
			return fmt.Errorf("the kernel runs as root and the policy names no unprivileged uid/gid to run as")
		}
		// Empty the bounding set while CAP_SETPCAP is still held (a warm
		// helper did while it waited).
		if !dropPrepared {
			if err := emptyBounding(); err != nil {
				return err
			}
		}
		// The raw calls change this thread alone, the one that execs:
		// Go's own Setresuid signals every thread of the runtime.
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETGROUPS, 0, 0, 0); e != 0 {
			return fmt.Errorf("clear supplementary groups: %w", e)
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
			return fmt.Errorf("setresgid %d: %w", gid, e)
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			return fmt.Errorf("setresuid %d: %w", uid, e)
		}
	} else if uid >= 0 && uid != os.Getuid() {
		return fmt.Errorf("only root can run a sandbox as uid %d; this kernel runs as uid %d", uid, os.Getuid())
	}
	unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	// Inheritable capabilities survive a uid change: clear them, then
	// insist that every set is empty.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear capabilities: %w", err)
	}
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	for _, d := range data {
		if d.Effective|d.Permitted|d.Inheritable != 0 {
			return fmt.Errorf("capabilities remain after the drop (effective %#x, permitted %#x, inheritable %#x): refusing to run", d.Effective, d.Permitted, d.Inheritable)
		}
	}
	// This thread's ids, from the kernel: the process-wide ones Go
	// reports may be another thread's.
	if ruid, euid, suid := unix.Getresuid(); ruid == 0 || euid == 0 || suid == 0 {
		return fmt.Errorf("still root after the drop: refusing to run")
	}
	return nil
}
