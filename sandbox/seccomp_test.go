package sandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel tests run probes, each one syscall, in a child: the test
// binary itself, re-executed to run only TestSeccompChild, with
// seccompChildEnv describing what to do. The child sets no_new_privs,
// installs the filter (or not, for the run the others are compared with)
// and prints one line per probe. A filter cannot be lifted, so it never goes
// into the test process itself.

const seccompChildEnv = "KAIRO_SECCOMP_TEST_CHILD"

// probeLine starts each result line a child prints.
const probeLine = "kairo-seccomp-probe"

type seccompChildSpec struct {
	Filter bool
	Policy FilterPolicy
	Probes []string
}

// A probe makes one syscall and returns its error; nil is success.
type seccompProbe func() error

// seccompProbes are the probes a child can run. Each one cleans up what
// it creates; the process is thrown away anyway.
var seccompProbes = map[string]seccompProbe{
	"getpid": func() error { return rawErr(unix.RawSyscall(unix.SYS_GETPID, 0, 0, 0)) },

	"socket/tcp4":       socketProbe(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0),
	"socket/tcp6":       socketProbe(unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_TCP),
	"socket/mptcp":      socketProbe(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP),
	"socket/udp4":       socketProbe(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0),
	"socket/udp6":       socketProbe(unix.AF_INET6, unix.SOCK_DGRAM, unix.IPPROTO_UDP),
	"socket/udplite":    socketProbe(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_UDPLITE),
	"socket/unix":       socketProbe(unix.AF_UNIX, unix.SOCK_STREAM, 0),
	"socket/unix-dgram": socketProbe(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0),
	"socket/netlink":    socketProbe(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE),
	"socket/packet":     socketProbe(unix.AF_PACKET, unix.SOCK_RAW, 0x0300), // htons(ETH_P_ALL)
	"socket/raw":        socketProbe(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP),
	"socket/vsock":      socketProbe(unix.AF_VSOCK, unix.SOCK_STREAM, 0),
	"socketpair/unix": func() error {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		closeFDs(fds[:]...)
		return err
	},
	"socketpair/inet": func() error {
		_, err := unix.Socketpair(unix.AF_INET, unix.SOCK_STREAM, 0)
		return err
	},

	// The kernel drops the high half of ioctl's command; so must the filter.
	"ioctl/tiocsti":   ioctlProbe(0xdead_0000_0000_0000 | unix.TIOCSTI),
	"ioctl/tioclinux": ioctlProbe(0xbeef_0000_0000_0000 | unix.TIOCLINUX),
	// On /dev/null, which is no terminal: ENOTTY, from the kernel.
	"ioctl/tiocgwinsz": ioctlProbe(unix.TIOCGWINSZ),
	"ioctl/fionread": func() error {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return err
		}
		defer closeFDs(p[:]...)
		_, err := unix.IoctlGetInt(p[0], unix.TIOCINQ)
		return err
	},

	"exec/plain":   func() error { return runTestBinary(nil) },
	"exec/newuser": func() error { return runTestBinary(&syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER}) },
	"clone3": func() error {
		return rawErr(unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)) // EINVAL from the kernel: size 0
	},
	"unshare": func() error { return unix.Unshare(0) }, // a no-op for the kernel
	"setns":   func() error { return unix.Setns(-1, 0) },
	"mount": func() error {
		return unix.Mount("none", "/nonexistent/kairo-seccomp", "tmpfs", 0, "")
	},
	"chroot": func() error { return unix.Chroot("/nonexistent/kairo-seccomp") },
	"ptrace": func() error {
		// Not our tracee: ESRCH from the kernel.
		_, err := unix.PtracePeekData(os.Getppid(), 0, make([]byte, 8))
		return err
	},
	"process_vm_readv": func() error {
		_, err := unix.ProcessVMReadv(os.Getpid(), nil, nil, 0)
		return err
	},
	"io_uring_setup": func() error {
		var params [120]byte // struct io_uring_params, zeroed
		fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
		if errno == 0 {
			unix.Close(int(fd))
		}
		return errnoErr(errno)
	},
	"userfaultfd": func() error {
		fd, _, errno := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC, 0, 0)
		if errno == 0 {
			unix.Close(int(fd))
		}
		return errnoErr(errno)
	},
	"bpf": func() error { return rawErr(unix.Syscall(unix.SYS_BPF, 0xffff, 0, 0)) },
	"perf_event_open": func() error {
		return rawErr(unix.Syscall6(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0, 0))
	},
	"keyctl": func() error {
		_, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_USER_KEYRING, false)
		return err
	},
	"open_by_handle_at": func() error {
		cwd := unix.AT_FDCWD
		return rawErr(unix.Syscall(unix.SYS_OPEN_BY_HANDLE_AT, uintptr(cwd), 0, unix.O_RDONLY)) // EFAULT: no handle
	},
	"clock_settime": func() error {
		return rawErr(unix.Syscall(unix.SYS_CLOCK_SETTIME, unix.CLOCK_REALTIME, 0, 0)) // EFAULT: no time given
	},
	"shmget": func() error {
		id, err := unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o600)
		if err == nil {
			unix.SysvShmCtl(id, unix.IPC_RMID, nil)
		}
		return err
	},
	"msgget": func() error {
		id, _, errno := unix.RawSyscall(unix.SYS_MSGGET, unix.IPC_PRIVATE, unix.IPC_CREAT|0o600, 0)
		if errno == 0 {
			unix.RawSyscall(unix.SYS_MSGCTL, id, unix.IPC_RMID, 0)
		}
		return errnoErr(errno)
	},
	"semop": func() error { return rawErr(unix.RawSyscall(unix.SYS_SEMOP, ^uintptr(0), 0, 0)) }, // EINVAL: no such set
	"mq_unlink": func() error {
		name := []byte("kairo-seccomp-none\x00")
		return rawErr(unix.RawSyscall(unix.SYS_MQ_UNLINK, uintptr(unsafe.Pointer(&name[0])), 0, 0)) // ENOENT
	},
	"memfd_create/plain": func() error {
		return closeAfterErr(unix.MemfdCreate("kairo-seccomp", unix.MFD_CLOEXEC))
	},
	"memfd_create/noexec-seal": func() error {
		return closeAfterErr(unix.MemfdCreate("kairo-seccomp", unix.MFD_CLOEXEC|unix.MFD_NOEXEC_SEAL))
	},
	"personality/query": func() error { return rawErr(unix.Syscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)) },
	"personality/set": func() error {
		old, _, errno := unix.Syscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
		if errno != 0 {
			return errno
		}
		_, _, errno = unix.Syscall(unix.SYS_PERSONALITY, old|0x0040000, 0, 0) // ADDR_NO_RANDOMIZE
		if errno == 0 {
			// Put it back, for the probes after this one.
			unix.Syscall(unix.SYS_PERSONALITY, old, 0, 0)
		}
		return errnoErr(errno)
	},
}

func rawErr(_, _ uintptr, errno unix.Errno) error { return errnoErr(errno) }

func errnoErr(errno unix.Errno) error {
	if errno == 0 {
		return nil
	}
	return errno
}

// closeAfterErr closes fd when the call that made it succeeded.
func closeAfterErr(fd int, err error) error {
	if err == nil {
		unix.Close(fd)
	}
	return err
}

func closeFDs(fds ...int) {
	for _, fd := range fds {
		if fd > 0 {
			unix.Close(fd)
		}
	}
}

func socketProbe(family, typ, protocol int) seccompProbe {
	return func() error {
		fd, err := unix.Socket(family, typ, protocol)
		closeFDs(fd)
		return err
	}
}

func ioctlProbe(cmd uintptr) seccompProbe {
	return func() error {
		fd, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open /dev/null: %w", err)
		}
		defer unix.Close(fd)
		var buf [64]byte
		return rawErr(unix.Syscall(unix.SYS_IOCTL, uintptr(fd), cmd, uintptr(unsafe.Pointer(&buf))))
	}
}

// runTestBinary runs the test binary with no test to run: a Go program that
// starts, under whatever filter its parent has, and exits 0.
func runTestBinary(attr *syscall.SysProcAttr) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.SysProcAttr = attr
	if out, err := cmd.CombinedOutput(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("%w: %s", err, out)
		}
		return err
	}
	return nil
}

// TestSeccompChild is the child side of the kernel tests; without
// seccompChildEnv it does nothing.
func TestSeccompChild(t *testing.T) {
	raw := os.Getenv(seccompChildEnv)
	if raw == "" {
		return
	}
	var spec seccompChildSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatalf("%s: %v", seccompChildEnv, err)
	}
	// no_new_privs is per thread: set it on the thread that installs the
	// filter, which TSYNC then spreads to the others.
	runtime.LockOSThread()
	// Probes that get the process killed must not leave core files behind.
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		t.Fatalf("no core dumps: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		t.Fatalf("set no_new_privs: %v", err)
	}
	// A thread that exists before the filter does, to show TSYNC covers it.
	other := startLockedThread()
	defer other.stop()
	if spec.Filter {
		prog, err := BuildFilter(spec.Policy)
		if err != nil {
			t.Fatal(err)
		}
		if err := InstallFilter(prog); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range spec.Probes {
		var err error
		switch {
		case name == "thread/unshare":
			err = other.run(func() error { return unix.Unshare(0) })
		case name == "tsync/conflict":
			err = tsyncConflict(other)
		case seccompProbes[name] != nil:
			err = seccompProbes[name]()
		default:
			t.Fatalf("no probe %q", name)
		}
		var errno unix.Errno
		switch {
		case err == nil:
		case errors.As(err, &errno):
		default:
			t.Fatalf("probe %s: %v", name, err)
		}
		fmt.Printf("%s %s %d\n", probeLine, name, int(errno))
	}
}

// lockedThread runs functions on one OS thread, started before the filter
// is installed.
type lockedThread struct {
	tid  int
	work chan func()
}

func startLockedThread() *lockedThread {
	lt := &lockedThread{work: make(chan func())}
	ready := make(chan int)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		ready <- unix.Gettid()
		for f := range lt.work {
			f()
		}
	}()
	lt.tid = <-ready
	return lt
}

func (lt *lockedThread) run(f func() error) error {
	if lt.tid == unix.Gettid() {
		return errors.New("the other thread is this one")
	}
	done := make(chan error)
	lt.work <- func() { done <- f() }
	return <-done
}

func (lt *lockedThread) stop() { close(lt.work) }

// tsyncConflict gives the other thread a filter of its own, then installs
// the sandbox filter, which TSYNC cannot spread to that thread. It returns
// nil when InstallFilter names the thread in its error.
func tsyncConflict(other *lockedThread) error {
	allowAll := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW}}
	err := other.run(func() error {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return err
		}
		fprog := unix.SockFprog{Len: 1, Filter: &allowAll[0]}
		return rawErr(unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))))
	})
	if err != nil {
		return fmt.Errorf("filter on the other thread: %w", err)
	}
	prog, err := BuildFilter(FilterPolicy{})
	if err != nil {
		return err
	}
	err = InstallFilter(prog)
	if err == nil {
		return errors.New("InstallFilter succeeded though another thread has its own filter")
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("thread %d ", other.tid)) {
		return fmt.Errorf("InstallFilter error does not name thread %d: %w", other.tid, err)
	}
	// The filter must be on no thread: unshare still works here.
	if err := unix.Unshare(0); err != nil {
		return fmt.Errorf("after the failed install, unshare: %w", err)
	}
	return nil
}

// seccompRun is what a child reported.
type seccompRun struct {
	results map[string]unix.Errno
	state   *os.ProcessState
	output  string
}

func runSeccompChild(t *testing.T, spec seccompChildSpec) seccompRun {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestSeccompChild$", "-test.count=1", "-test.timeout=2m")
	// Under -race a Go process sleeps a second before it exits, unless
	// told not to; the children and their children need no such grace.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), seccompChildEnv+"="+string(raw), "GORACE="+gorace)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	run := seccompRun{results: map[string]unix.Errno{}, state: cmd.ProcessState, output: out.String()}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run child: %v", err)
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != probeLine {
			continue
		}
		n, err := strconv.Atoi(f[2])
		if err != nil {
			t.Fatalf("child line %q: %v", sc.Text(), err)
		}
		run.results[f[1]] = unix.Errno(n)
	}
	return run
}

// probeWant is what the filter must do to a probe.
type probeWant struct {
	probe string
	// granted reports whether fp lets the call through; nil means never.
	granted func(fp FilterPolicy) bool
	// deny is the errno of a refusal; zero for a probe always allowed.
	deny unix.Errno
	// ok says an allowed call must succeed, not merely fail as it does
	// without the filter: the neighbours that prove the filter does not
	// break everything.
	ok bool
	// rootOnly says that without root the kernel itself refuses the call
	// with the filter's errno, so only a run as root tells them apart.
	rootOnly bool
}

func anyPolicy(FilterPolicy) bool   { return true }
func withTCP(fp FilterPolicy) bool  { return fp.TCP }
func withUDP(fp FilterPolicy) bool  { return fp.UDP }
func withUnix(fp FilterPolicy) bool { return fp.Unix }

var kernelWants = []probeWant{
	{probe: "getpid", granted: anyPolicy, ok: true},

	{probe: "socket/tcp4", granted: withTCP, deny: unix.EACCES, ok: true},
	{probe: "socket/tcp6", granted: withTCP, deny: unix.EACCES},
	{probe: "socket/mptcp", deny: unix.EACCES},
	{probe: "socket/udp4", granted: withUDP, deny: unix.EACCES, ok: true},
	{probe: "socket/udp6", granted: withUDP, deny: unix.EACCES},
	{probe: "socket/udplite", deny: unix.EACCES},
	{probe: "socket/unix", granted: withUnix, deny: unix.EACCES, ok: true},
	{probe: "socket/unix-dgram", granted: withUnix, deny: unix.EACCES, ok: true},
	{probe: "socket/netlink", deny: unix.EACCES},
	{probe: "socket/packet", deny: unix.EACCES},
	{probe: "socket/raw", deny: unix.EACCES},
	{probe: "socket/vsock", deny: unix.EACCES},
	{probe: "socketpair/unix", granted: anyPolicy, ok: true},
	{probe: "socketpair/inet", deny: unix.EACCES},

	{probe: "ioctl/tiocsti", deny: unix.EPERM},
	{probe: "ioctl/tioclinux", deny: unix.EPERM},
	{probe: "ioctl/tiocgwinsz", granted: anyPolicy},
	{probe: "ioctl/fionread", granted: anyPolicy, ok: true},

	{probe: "exec/plain", granted: anyPolicy, ok: true},
	{probe: "exec/newuser", deny: unix.EPERM},
	{probe: "clone3", deny: unix.ENOSYS},
	{probe: "unshare", deny: unix.EPERM},
	{probe: "thread/unshare", deny: unix.EPERM},
	{probe: "setns", deny: unix.EPERM},
	{probe: "mount", deny: unix.EPERM},
	{probe: "chroot", deny: unix.EPERM},
	{probe: "ptrace", deny: unix.EPERM},
	{probe: "process_vm_readv", deny: unix.EPERM},
	{probe: "io_uring_setup", deny: unix.EPERM},
	{probe: "userfaultfd", deny: unix.EPERM, rootOnly: true},
	{probe: "bpf", deny: unix.EPERM, rootOnly: true},
	{probe: "perf_event_open", deny: unix.EPERM},
	{probe: "keyctl", deny: unix.EPERM},
	{probe: "open_by_handle_at", deny: unix.EPERM, rootOnly: true},
	{probe: "clock_settime", deny: unix.EPERM},
	{probe: "shmget", deny: unix.EPERM},
	{probe: "msgget", deny: unix.EPERM},
	{probe: "semop", deny: unix.EPERM},
	{probe: "mq_unlink", deny: unix.EPERM},
	{probe: "memfd_create/plain", deny: unix.EPERM},
	{probe: "memfd_create/noexec-seal", granted: anyPolicy, ok: true},
	{probe: "personality/query", granted: anyPolicy, ok: true},
	{probe: "personality/set", deny: unix.EPERM},
}

// TestSeccompInKernel runs every probe in a child without the filter and
// in children with it under several policies. A call the filter refuses
// must fail with the filter's errno, and without the filter with another
// result, so the refusal is the filter's and not the kernel's; a call it
// allows must give what it gives without the filter. Every run holds both,
// so a filter that refuses everything fails too.
func TestSeccompInKernel(t *testing.T) {
	var probes []string
	for _, w := range kernelWants {
		probes = append(probes, w.probe)
	}
	base := runSeccompChild(t, seccompChildSpec{Probes: probes})
	if !base.state.Success() {
		t.Fatalf("child without the filter failed (%v):\n%s", base.state, base.output)
	}
	for _, w := range kernelWants {
		got, ok := base.results[w.probe]
		if !ok {
			t.Fatalf("%s: no result without the filter:\n%s", w.probe, base.output)
		}
		t.Logf("without the filter, %s: %s", w.probe, errnoText(got))
		if w.deny != 0 && got == w.deny {
			if w.rootOnly && os.Geteuid() != 0 {
				t.Logf("%s: not root, so the kernel refuses it with %v too; only the filtered runs check it", w.probe, got)
				continue
			}
			t.Errorf("%s: without the filter the kernel already fails it with %v; the probe cannot tell a filter denial", w.probe, got)
		}
		if w.ok && got != 0 {
			t.Errorf("%s: fails without the filter: %v", w.probe, got)
		}
	}

	for _, fp := range []FilterPolicy{{}, {TCP: true}, {UDP: true, Unix: true}, {TCP: true, UDP: true, Unix: true}} {
		t.Run(fmt.Sprintf("tcp=%v,udp=%v,unix=%v", fp.TCP, fp.UDP, fp.Unix), func(t *testing.T) {
			run := runSeccompChild(t, seccompChildSpec{Filter: true, Policy: fp, Probes: probes})
			if !run.state.Success() {
				t.Fatalf("child with the filter failed (%v):\n%s", run.state, run.output)
			}
			for _, w := range kernelWants {
				got, ok := run.results[w.probe]
				if !ok {
					t.Errorf("%s: no result", w.probe)
					continue
				}
				switch want := base.results[w.probe]; {
				case w.granted == nil || !w.granted(fp):
					if got != w.deny {
						t.Errorf("%s: %s; want the filter's %s (without it: %s)", w.probe, errnoText(got), errnoText(w.deny), errnoText(want))
					}
				case got != want:
					t.Errorf("%s: %s; allowed, so want %s as without the filter", w.probe, errnoText(got), errnoText(want))
				}
			}
		})
	}
}

// TestInstallFilterReportsTSYNCFailure gives one thread a filter of its
// own, so TSYNC cannot cover it: InstallFilter must say which thread, and
// install nothing.
func TestInstallFilterReportsTSYNCFailure(t *testing.T) {
	run := runSeccompChild(t, seccompChildSpec{Probes: []string{"tsync/conflict"}})
	if !run.state.Success() {
		t.Fatalf("child failed (%v):\n%s", run.state, run.output)
	}
	if got, ok := run.results["tsync/conflict"]; !ok || got != 0 {
		t.Fatalf("tsync/conflict: %s, reported %v\n%s", errnoText(got), ok, run.output)
	}
}

func TestInstallFilterRefusesEmptyProgram(t *testing.T) {
	if err := InstallFilter(nil); err == nil || !strings.Contains(err.Error(), "0 instructions") {
		t.Fatalf("InstallFilter(nil): %v; want an error saying 0 instructions", err)
	}
}

func errnoText(e unix.Errno) string {
	if e == 0 {
		return "success"
	}
	if name := unix.ErrnoName(e); name != "" {
		return name
	}
	return strconv.Itoa(int(e))
}
