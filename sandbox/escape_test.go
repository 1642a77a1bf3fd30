package sandbox

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// Every escape names the errno or signal the kernel must answer, and a
// neighbour the policy grants that must work. The base policy is the
// default profile (read the system, write work and tmp, no network) with
// the probe's folders granted exec; rows add grants where the neighbour
// needs them.

func TestEscapeFilesystem(t *testing.T) {
	t.Parallel()
	e := newEscapeEnv(t)
	w, out, home := e.work, e.outside, e.home
	e.check(t, []escape{
		// Reading.
		{name: "ReadShadow", try: []string{"open-read", "/etc/shadow"}, want: "errno EACCES",
			near: []string{"open-read", "/etc/passwd"}},
		{name: "ReadOtherUsersHome", try: []string{"open-read", home + "/notes"}, want: "errno EACCES",
			near: []string{"open-read", w + "/mine"}},
		{name: "ListOtherUsersHome", try: []string{"readdir", home}, want: "errno EACCES",
			near: []string{"readdir", w}},
		{name: "ReadSys", try: []string{"readdir", "/sys/kernel"}, want: "errno EACCES",
			near: []string{"readdir", "/proc/self"}},
		{name: "OpenTerminal", try: []string{"open-read", "/dev/tty"}, want: "errno EACCES",
			near: []string{"open-write", "/dev/null"}},
		{name: "ReadKernelLogDevice", try: []string{"open-read", "/dev/kmsg"}, want: "errno EACCES",
			near: []string{"open-read", "/dev/urandom"}},

		// Writing, truncating, deleting, renaming outside fs.write.
		{name: "WriteOutside", try: []string{"open-write", out + "/rw"}, want: "errno EACCES",
			near: []string{"open-write", w + "/mine"}},
		{name: "CreateOutside", try: []string{"create", out + "/new"}, want: "errno EACCES",
			near: []string{"create", w + "/new"}},
		{name: "TruncateOutside", try: []string{"truncate", out + "/trunc"}, want: "errno EACCES",
			near: []string{"truncate", w + "/trunc-me"}},
		{name: "OpenTruncateOutside", try: []string{"open-trunc", out + "/otrunc"}, want: "errno EACCES",
			near: []string{"open-trunc", w + "/otrunc-me"}},
		{name: "UnlinkOutside", try: []string{"unlink", out + "/victim"}, want: "errno EACCES",
			near: []string{"unlink", w + "/unlink-me"}},
		{name: "RmdirOutside", try: []string{"rmdir", out + "/victim-dir"}, want: "errno EACCES",
			near: []string{"rmdir", w + "/rmdir-me"}},
		{name: "MkdirOutside", try: []string{"mkdir", out + "/newdir"}, want: "errno EACCES",
			near: []string{"mkdir", w + "/newdir"}},
		{name: "RenameOutside", try: []string{"rename", out + "/ren-a", out + "/ren-b"}, want: "errno EACCES",
			near: []string{"rename", w + "/ren-a", w + "/ren-b"}},
		{name: "RenameOutsideIntoWork", try: []string{"rename", out + "/steal", w + "/stolen"}, want: "errno EACCES",
			near: []string{"rename", w + "/move-a", e.tmp + "/move-a"}},
		{name: "RenameWorkToOutside", try: []string{"rename", w + "/plant", out + "/planted"}, want: "errno EACCES",
			near: []string{"mkdir", e.tmp + "/dir"}},
		// /proc/sys is not in the sandbox's /proc (subset=pid).
		{name: "WriteProcSys", try: []string{"open-write", "/proc/sys/kernel/hostname"}, want: "errno ENOENT",
			near: []string{"open-write", "/dev/null"}},
		{name: "MakeDeviceNode", try: []string{"mknod-char", w + "/mem"}, want: "errno EACCES",
			near: []string{"mkfifo", w + "/fifo"}},

		// Links, .., O_PATH and /proc magic links.
		{name: "SymlinkToOtherUsersHome", try: []string{"symlink-read", home + "/notes", w + "/sym-r"}, want: "errno EACCES",
			near: []string{"symlink-read", w + "/mine", w + "/sym-r-ok"}},
		{name: "SymlinkWriteOutside", try: []string{"symlink-write", out + "/rw", w + "/sym-w"}, want: "errno EACCES",
			near: []string{"symlink-write", w + "/mine", w + "/sym-w-ok"}},
		{name: "HardLinkOutsideIntoWork", try: []string{"link", out + "/link-src", w + "/hl"}, want: "errno EXDEV",
			near: []string{"link", w + "/link-a", w + "/link-b"}},
		{name: "DotDot", try: []string{"open-read", w + "/../home/alice/notes"}, want: "errno EACCES",
			near: []string{"open-read", w + "/../work/mine"}},
		{name: "OPathReopenThroughProc", try: []string{"opath-reopen", home + "/notes"}, want: "errno EACCES",
			near: []string{"opath-reopen", w + "/mine"}},
		{name: "OPathOpenat", try: []string{"opath-openat", home, "notes"}, want: "errno EACCES",
			near: []string{"opath-openat", w, "mine"}},
		{name: "ProcSelfRoot", try: []string{"open-read", "/proc/self/root" + home + "/notes"}, want: "errno EACCES",
			near: []string{"open-read", "/proc/self/root" + w + "/mine"}},

		// Executing outside fs.exec, and planting code where exec is granted.
		{name: "ExecOutside", try: []string{"exec", out + "/tool", "noop"}, want: "errno EACCES",
			near: []string{"exec", e.xbin + "/tool", "noop"}},
		{name: "WriteThenExec", try: []string{"write-exec", w + "/dropped", "noop"}, want: "errno EACCES",
			near: []string{"exec", e.probe, "noop"}},
		// A memfd is on no path, so Landlock's execute right does not reach
		// it: the filter refuses a memfd that could ever be executable.
		// (What ran would keep the uid, the domain and the filter, but it
		// would be code the grants never named.)
		{name: "MemfdExec", try: []string{"memfd-exec", "noop"}, want: "errno EPERM",
			near: []string{"memfd-create", "0x9"}}, // MFD_CLOEXEC|MFD_NOEXEC_SEAL
		{name: "MemfdSealedExecveat", try: []string{"memfd-sealed-exec", "noop"}, want: "errno EACCES",
			near: []string{"execveat-path", e.probe, "noop"}},
		{name: "MemfdSealedProcExec", try: []string{"memfd-sealed-proc-exec", "noop"}, want: "errno EACCES",
			near: []string{"exec", e.probe, "noop"}},
		{name: "MemfdSealedChmod", try: []string{"memfd-sealed-chmod"}, want: "errno EPERM",
			near: []string{"memfd-create", "0x8"}},
		// execveat(AT_EMPTY_PATH) on a descriptor of a file the sandbox
		// wrote: Landlock checks the file's path, not how it is named.
		{name: "WriteThenExecveat", try: []string{"write-execveat", w + "/dropped-at", "noop"}, want: "errno EACCES",
			near: []string{"execveat-path", e.xbin + "/tool", "noop"}},
		// The same through a dynamically linked program and its loader.
		{name: "ShellReadsShadow", try: []string{"exec", "/bin/sh", "-c", "cat /etc/shadow >/dev/null 2>&1 || echo denied"}, want: "denied",
			near: []string{"exec", "/bin/sh", "-c", `echo ok >"$HOME/sh-out" && cat "$HOME/sh-out"`}},
		{name: "PlantInExecFolder", try: []string{"create", e.xbin + "/planted"}, want: "errno EACCES",
			near: []string{"exec", e.xbin + "/tool", "noop"}},
		{name: "OverwriteGrantedBinary", try: []string{"open-write", e.xbin + "/tool-rw"}, want: "errno EACCES",
			near: []string{"exec", e.xbin + "/tool-rw", "noop"}},
	})
}

func TestEscapeNetwork(t *testing.T) {
	t.Parallel()
	e := newEscapeEnv(t)
	v4 := func(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
	tcp := func(p *Policy) {
		p.ConnectTCP = []uint16{uint16(e.tcpGranted), uint16(e.tcp6Granted)}
		p.BindTCP = []uint16{uint16(e.bindGranted)}
	}
	udp := func(p *Policy) { p.UDP = true }
	// Landlock before ABI 9 cannot hold a unix grant to its paths: the
	// policy must say best effort (see Unenforced).
	unixGrant := func(p *Policy) { p.Unix, p.BestEffort = []string{e.grantedSocket}, true }
	connectGranted := []string{"connect-tcp", v4(e.tcpGranted)}
	escapes := []escape{
		// TCP: Landlock's ports.
		{name: "ConnectTCPUngrantedPort", policy: tcp, try: []string{"connect-tcp", v4(e.tcpUngranted)}, want: "errno EACCES",
			near: connectGranted},
		{name: "BindTCPUngrantedPort", policy: tcp, try: []string{"bind-tcp", v4(e.bindUngranted)}, want: "errno EACCES",
			near: []string{"bind-tcp", v4(e.bindGranted)}},
		{name: "TCPWithoutGrant", try: []string{"connect-tcp", v4(e.tcpGranted)}, want: "errno EACCES",
			near: connectGranted, nearPolicy: tcp},
		{name: "MPTCPAroundPortRules", policy: tcp, try: []string{"connect-mptcp", v4(e.tcpUngranted)}, want: "errno EACCES",
			near: connectGranted},
		{name: "SCTPStream", policy: tcp, try: []string{"socket", "inet", "stream", "132"}, want: "errno EACCES",
			near: connectGranted},

		// UDP and DNS: refused unless granted, even with TCP granted.
		{name: "UDPWithTCPGranted", policy: tcp, try: []string{"socket", "inet", "dgram", "0"}, want: "errno EACCES",
			near: connectGranted},
		{name: "UDP6WithTCPGranted", policy: tcp, try: []string{"socket", "inet6", "dgram", "0"}, want: "errno EACCES",
			near: connectGranted},
		{name: "DNSWithoutUDP", try: []string{"dns-udp", e.resolver}, want: "errno EACCES",
			near: []string{"dns-udp", e.resolver}, nearPolicy: udp},
		{name: "ICMPWithUDPGranted", policy: udp, try: []string{"socket", "inet", "dgram", "1"}, want: "errno EACCES",
			near: []string{"dns-udp", e.resolver}},

		// Other families, never granted.
		{name: "RawSocket", policy: tcp, try: []string{"socket", "inet", "raw", "1"}, want: "errno EACCES",
			near: connectGranted},
		{name: "PacketSocket", policy: tcp, try: []string{"socket", "packet", "raw", "768"}, want: "errno EACCES",
			near: connectGranted},
		{name: "NetlinkSocket", policy: tcp, try: []string{"socket", "netlink", "raw", "0"}, want: "errno EACCES",
			near: connectGranted},
		{name: "VsockToTheHypervisor", policy: tcp, try: []string{"socket", "vsock", "stream", "0"}, want: "errno EACCES",
			near: connectGranted},
		{name: "KernelCryptoSocket", policy: tcp, try: []string{"socket", "alg", "seqpacket", "0"}, want: "errno EACCES",
			near: connectGranted},

		// Unix sockets of host services.
		{name: "PathnameUnixSocketWithoutGrant", try: []string{"connect-unix", e.hostSocket}, want: "errno EACCES",
			near: []string{"connect-unix", e.grantedSocket}, nearPolicy: unixGrant},
		// A pair of connected unix sockets reaches nothing outside: the
		// filter lets it be.
		{name: "AbstractUnixSocketWithoutGrant", try: []string{"connect-abstract", e.hostAbstract}, want: "errno EACCES",
			near: []string{"socketpair-unix"}},
		{name: "AbstractUnixSocketOfHost", policy: unixGrant, try: []string{"connect-abstract", e.hostAbstract}, want: "errno EPERM",
			near: []string{"listen-abstract", e.hostAbstract + "-own"}},
	}
	if e.tcp6Granted != 0 {
		v6 := func(port int) string { return "[::1]:" + strconv.Itoa(port) }
		escapes = append(escapes, escape{name: "ConnectTCP6UngrantedPort", policy: tcp,
			try: []string{"connect-tcp", v6(e.tcp6Ungranted)}, want: "errno EACCES",
			near: []string{"connect-tcp", v6(e.tcp6Granted)}})
	}
	e.check(t, escapes)
}

func TestEscapeProcesses(t *testing.T) {
	t.Parallel()
	e := newEscapeEnv(t)
	daemon, self := strconv.Itoa(e.daemon), strconv.Itoa(e.testProcess)
	ids := fmt.Sprintf("uid %[1]d/%[1]d/%[1]d gid %[1]d/%[1]d/%[1]d groups []", e.uid)
	daemonAlive := func(t *testing.T) {
		if !alive(e.daemon) {
			t.Errorf("the daemon (pid %d) died", e.daemon)
		}
	}
	e.check(t, []escape{
		// Signals: to the kernel's process, and to a process of the
		// sandbox's own uid, which only the Landlock scope stops.
		{name: "SignalKernelProcess", try: []string{"kill", self, "0"}, want: "errno EPERM",
			near: []string{"kill-self"}},
		{name: "SignalSameUIDDaemon", try: []string{"kill", daemon, "SIGKILL"}, want: "errno EPERM",
			near: []string{"kill-self"}, after: daemonAlive},
		{name: "PidfdSignalSameUIDDaemon", try: []string{"pidfd-signal", daemon, "SIGKILL"}, want: "errno EPERM",
			near: []string{"kill-self"}, after: daemonAlive},

		// Reaching into another process.
		{name: "PtraceKernelProcess", try: []string{"ptrace-attach", self}, want: "errno EPERM",
			near: []string{"open-read", "/proc/self/status"}},
		{name: "PtraceSameUIDDaemon", try: []string{"ptrace-attach", daemon}, want: "errno EPERM",
			near: []string{"open-read", "/proc/self/status"}, after: daemonAlive},
		{name: "PtraceTraceme", try: []string{"ptrace-traceme"}, want: "errno EPERM",
			near: []string{"open-read", "/proc/self/status"}},
		{name: "ProcessVMReadSameUIDDaemon", try: []string{"process-vm-read", daemon}, want: "errno EPERM",
			near: []string{"open", "/proc/self/mem"}},
		{name: "PidfdGetfdSameUIDDaemon", try: []string{"pidfd-getfd", daemon}, want: "errno EPERM",
			near: []string{"open", "/proc/self/mem"}},
		// The sandbox's /proc shows none of these processes (see
		// TestEscapeProc): ENOENT, before any ptrace check could refuse.
		{name: "KernelProcessMem", try: []string{"open", "/proc/" + self + "/mem"}, want: "errno ENOENT",
			near: []string{"open", "/proc/self/mem"}},
		{name: "SameUIDDaemonMem", try: []string{"open", "/proc/" + daemon + "/mem"}, want: "errno ENOENT",
			near: []string{"open", "/proc/self/mem"}},
		{name: "KernelProcessEnviron", try: []string{"open-read", "/proc/" + self + "/environ"}, want: "errno ENOENT",
			near: []string{"open-read", "/proc/self/environ"}},
		{name: "SameUIDDaemonEnviron", try: []string{"open-read", "/proc/" + daemon + "/environ"}, want: "errno ENOENT",
			near: []string{"open-read", "/proc/self/environ"}},
		{name: "KernelProcessDescriptor", try: []string{"open-read", fmt.Sprintf("/proc/%s/fd/%d", self, e.heldFD)}, want: "errno ENOENT",
			near: []string{"open-read", "/proc/self/fd/0"}},
		{name: "SameUIDDaemonRoot", try: []string{"open-read", "/proc/" + daemon + "/root/etc/passwd"}, want: "errno ENOENT",
			near: []string{"open-read", "/proc/self/root/etc/passwd"}},

		// Privilege.
		{name: "SetuidRoot", try: []string{"setuid", "0"}, want: "errno EPERM",
			near: []string{"setuid", strconv.Itoa(e.uid)}},
		{name: "SetgroupsRoot", try: []string{"setgroups-root"}, want: "errno EPERM",
			near: []string{"ids"}, nearWant: ids},
		{name: "SetuidRootBinary", try: []string{"exec", e.probeSUID, "ids"}, want: ids,
			near: []string{"exec", e.probe, "ids"}, nearWant: ids},
		{name: "RetainedCapabilities", try: []string{"caps"}, want: "caps inh=0 prm=0 eff=0 bnd=0 amb=0",
			near: []string{"ids"}, nearWant: ids},
		{name: "CapsetAdmin", try: []string{"capset-admin"}, want: "errno EPERM",
			near: []string{"ids"}, nearWant: ids},

		// Namespaces and the mount table.
		{name: "Mount", try: []string{"mount-invalid"}, want: "errno EPERM",
			near: []string{"readdir", e.work}},
		{name: "Umount", try: []string{"umount-invalid"}, want: "errno EPERM",
			near: []string{"readdir", e.work}},
		{name: "Chroot", try: []string{"chroot", e.work}, want: "errno EPERM",
			near: []string{"readdir", e.work}},
		{name: "UnshareUser", try: []string{"unshare", "user"}, want: "errno EPERM",
			near: []string{"fork"}},
		{name: "UnshareNet", try: []string{"unshare", "net"}, want: "errno EPERM",
			near: []string{"fork"}},
		{name: "UnshareMount", try: []string{"unshare", "mount"}, want: "errno EPERM",
			near: []string{"fork"}},
		{name: "CloneNewUser", try: []string{"clone-ns", "user"}, want: "errno EPERM",
			near: []string{"fork"}},
		{name: "CloneNewPID", try: []string{"clone-ns", "pid"}, want: "errno EPERM",
			near: []string{"fork"}},
		{name: "Clone3", try: []string{"clone3-invalid"}, want: "errno ENOSYS",
			near: []string{"fork"}},
		{name: "PersonalityNoASLR", try: []string{"personality", "0x0040000"}, want: "errno EPERM",
			near: []string{"personality", "0xffffffff"}},
		{name: "PersonalityReadImpliesExec", try: []string{"personality", "0x0400000"}, want: "errno EPERM",
			near: []string{"personality", "0"}},
		{name: "Setns", try: []string{"setns-invalid"}, want: "errno EPERM",
			near: []string{"open", "/proc/self/ns/net"}},
	})
}

func TestEscapeKernel(t *testing.T) {
	t.Parallel()
	e := newEscapeEnv(t)
	noop := []string{"noop"}
	// A terminal on stdin, for the terminal ioctls; the neighbour reads its
	// size.
	tty := ptyStdin
	escapes := []escape{
		{name: "Reboot", try: []string{"reboot-invalid"}, want: "errno EPERM", near: noop},
		{name: "KexecLoad", try: []string{"kexec-invalid"}, want: "errno EPERM", near: noop},
		{name: "KexecFileLoad", try: []string{"kexec-file-invalid"}, want: "errno EPERM", near: noop},
		{name: "InitModule", try: []string{"init-module-invalid"}, want: "errno EPERM", near: noop},
		{name: "FinitModule", try: []string{"finit-module-invalid"}, want: "errno EPERM", near: noop},
		{name: "DeleteModule", try: []string{"delete-module-invalid"}, want: "errno EPERM", near: noop},
		{name: "Swapon", try: []string{"swapon-invalid"}, want: "errno EPERM", near: noop},
		{name: "Settimeofday", try: []string{"settimeofday-invalid"}, want: "errno EPERM", near: noop},
		{name: "KernelLog", try: []string{"syslog-size"}, want: "errno EPERM", near: noop},
		{name: "BPF", try: []string{"bpf-invalid"}, want: "errno EPERM", near: noop},
		{name: "PerfEventOpen", try: []string{"perf-self"}, want: "errno EPERM", near: noop},
		{name: "Userfaultfd", try: []string{"userfaultfd"}, want: "errno EPERM", near: noop},
		{name: "Keyring", try: []string{"keyctl"}, want: "errno EPERM", near: noop},
		{name: "IOUring", try: []string{"io-uring-setup"}, want: "errno EPERM",
			near: []string{"open-read", e.work + "/mine"}},
		{name: "OpenByHandle", try: []string{"open-by-handle-invalid"}, want: "errno EPERM",
			near: []string{"open-read", e.work + "/mine"}},
		{name: "TIOCSTI", setup: tty, try: []string{"tiocsti"}, want: "errno EPERM",
			near: []string{"tiocgwinsz"}},
		{name: "TIOCSTIHighBits", setup: tty, try: []string{"tiocsti-high"}, want: "errno EPERM",
			near: []string{"tiocgwinsz"}},
		{name: "TIOCLINUX", setup: tty, try: []string{"tioclinux"}, want: "errno EPERM",
			near: []string{"tiocgwinsz"}},
	}
	if runtime.GOARCH == "amd64" {
		if ia32() {
			escapes = append(escapes, escape{name: "Int80", try: []string{"int80"}, want: "signal SIGSYS", near: noop})
		} else {
			t.Log("Int80 not tried: this kernel runs no i386 code (ia32_emulation off)")
		}
		escapes = append(escapes,
			escape{name: "X32", try: []string{"x32"}, want: "signal SIGSYS", near: noop},
			escape{name: "Iopl", try: []string{"iopl"}, want: "errno EPERM", near: noop},
		)
	}
	e.check(t, escapes)
}

// TestEscapeKernelObjects: System V IPC and POSIX message queues make
// objects that belong to no process and outlive the tree (a 512 MiB shm
// segment, a 0666 queue); the sandbox cannot make them, while a pipe and a
// shared mapping of a file in its workspace work.
func TestEscapeKernelObjects(t *testing.T) {
	t.Parallel()
	e := newEscapeEnv(t)
	pipe := []string{"pipe"}
	e.check(t, []escape{
		{name: "SysVSharedMemory", try: []string{"shmget", strconv.Itoa(512 << 20)}, want: "errno EPERM",
			near: []string{"shm-file", e.work + "/shm", strconv.Itoa(1 << 20)}},
		{name: "SysVMessageQueue", try: []string{"msgget"}, want: "errno EPERM", near: pipe},
		{name: "SysVSemaphore", try: []string{"semget"}, want: "errno EPERM", near: pipe},
		{name: "POSIXMessageQueue", try: []string{"mq-open", fmt.Sprintf("kairo-escape-%d", e.uid)}, want: "errno EPERM", near: pipe},
	})
}

// TestEscapeProc: the sandbox's /proc holds its own processes only. The
// host's shows every command line (the daemon's, other trees') and, in
// /proc/net/unix, every listening socket.
func TestEscapeProc(t *testing.T) {
	t.Parallel()
	e := newEscapeEnv(t)
	daemon, self := strconv.Itoa(e.daemon), strconv.Itoa(e.testProcess)
	e.check(t, []escape{
		{name: "InitCmdline", try: []string{"open-read", "/proc/1/cmdline"}, want: "errno ENOENT",
			near: []string{"open-read", "/proc/self/cmdline"}},
		{name: "KernelProcessCmdline", try: []string{"open-read", "/proc/" + self + "/cmdline"}, want: "errno ENOENT",
			near: []string{"open-read", "/proc/self/status"}},
		// Of the sandbox's own uid: Landlock keeps the sandbox from
		// ptracing it, and hidepid hides what it may not ptrace.
		{name: "SameUIDDaemonCmdline", try: []string{"open-read", "/proc/" + daemon + "/cmdline"}, want: "errno ENOENT",
			near: []string{"open-read", "/proc/thread-self/status"}},
		{name: "ListProcesses", try: []string{"proc-pids"}, want: "ok",
			near: []string{"readdir", "/proc/self/fd"}},
		{name: "NetUnix", try: []string{"open-read", "/proc/net/unix"}, want: "errno ENOENT",
			near: []string{"open-read", "/proc/self/mountinfo"}},
		{name: "ProcSys", try: []string{"open-read", "/proc/sys/kernel/hostname"}, want: "errno ENOENT",
			near: []string{"open-read", "/proc/self/limits"}},
		// The host's /proc lies under the sandbox's; no path leads to it.
		{name: "HostProcThroughRoot", try: []string{"open-read", "/proc/self/root/proc/1/cmdline"}, want: "errno ENOENT",
			near: []string{"open-read", "/proc/self/root/proc/self/cmdline"}},
		// A process of the tree sees the others of its tree.
		{name: "ShellSeesOnlyItself", try: []string{"exec", "/bin/sh", "-c", "set -- /proc/[0-9]*; echo $#"}, want: "1",
			near: []string{"exec", "/bin/sh", "-c", `sleep 5 & test -r /proc/$!/cmdline && echo ok; kill $!`}},
	})
	if _, err := os.Stat("/proc/" + daemon + "/cmdline"); err != nil {
		t.Fatalf("outside the sandbox the daemon's cmdline must be there for the escapes to mean anything: %v", err)
	}
}

// TestEscapeGroups: a kernel with supplementary groups (here root's helper
// started with groups 4 and 27, adm and sudo on Debian) passes none of them
// to the sandbox, which runs with its primary gid alone.
func TestEscapeGroups(t *testing.T) {
	t.Parallel()
	e := newEscapeEnv(t)
	groups := func(_ *testing.T, c *Cmd) {
		c.SysProcAttr.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{4, 27}}
	}
	id := func(flag string) []string { return []string{"exec", "/usr/bin/id", flag} }
	gid := strconv.Itoa(e.uid)
	e.check(t, []escape{
		{name: "SupplementaryGroups", setup: groups, try: id("-G"), want: gid,
			near: id("-g"), nearWant: gid},
	})
}

func TestEscapeLimits(t *testing.T) {
	t.Parallel()
	e := newEscapeEnv(t)
	e.check(t, []escape{
		// The probe is a Go program, whose runtime reserves most of a
		// gigabyte of address space as it starts: the limit leaves it
		// room. (The helper itself runs under any limit: it sets it last,
		// with nothing left to allocate; see TestHelperUnderTightLimits.)
		{name: "MemoryBomb", policy: func(p *Policy) { p.Limits.Memory = 2 << 30 },
			try: []string{"mmap", strconv.Itoa(16 << 30)}, want: "errno ENOMEM",
			near: []string{"mmap", strconv.Itoa(64 << 20)}},
		// The process limit counts every process of the uid: the fork bomb
		// has one of its own.
		{name: "ForkBomb", policy: func(p *Policy) { p.Limits.Processes = 32; p.UID, p.GID = e.forkUID, e.forkUID },
			try: []string{"fork-many", "1000"}, want: "errno EAGAIN",
			near: []string{"fork-many", "4"}},
		// Go ignores SIGXCPU at the soft limit; the hard limit a second
		// later kills.
		{name: "CPUSpin", policy: func(p *Policy) { p.Limits.CPUSeconds = 1 },
			try: []string{"spin", "1m"}, want: "signal SIGKILL",
			near: []string{"spin", "50ms"}},
		// Go ignores SIGXFSZ: the write past the limit fails instead.
		{name: "FileSizeBomb", policy: func(p *Policy) { p.Limits.FileSize = 1 << 20 },
			try: []string{"write-bytes", e.work + "/big", strconv.Itoa(8 << 20)}, want: "errno EFBIG",
			near: []string{"write-bytes", e.work + "/small", strconv.Itoa(512 << 10)}},
		{name: "DescriptorExhaustion", policy: func(p *Policy) { p.Limits.OpenFiles = 64 },
			try: []string{"open-many", "100000"}, want: "errno EMFILE",
			near: []string{"open-many", "16"}},
	})
}

// TestEscapeDefaultLimits: the default profile's own limits
// (DefaultLimits), unchanged, stop the same bombs. Its file size and CPU
// limits, 1 GiB and an hour, are read back by TestDefaultLimits rather
// than reached. An environment of its own: the fork bomb's uid must not
// be shared with TestEscapeLimits's.
func TestEscapeDefaultLimits(t *testing.T) {
	t.Parallel()
	e := newEscapeEnv(t)
	e.check(t, []escape{
		{name: "MemoryBomb", try: []string{"mmap", strconv.Itoa(8 << 30)}, want: "errno ENOMEM",
			near: []string{"mmap", strconv.Itoa(256 << 20)}},
		{name: "ForkBomb", policy: func(p *Policy) { p.UID, p.GID = e.forkUID, e.forkUID },
			try: []string{"fork-many", "1000"}, want: "errno EAGAIN",
			near: []string{"fork-many", "64"}},
		{name: "DescriptorExhaustion", try: []string{"open-many", "100000"}, want: "errno EMFILE",
			near: []string{"open-many", "512"}},
	})
}

// TestEscapeWallClockLeftToCaller: the wall-clock limit is the process
// manager's to enforce (it owns the timer and kills the tree); the helper
// neither enforces it nor refuses it. Output floods and orphans are the
// process manager's too and are tested there.
func TestEscapeWallClockLeftToCaller(t *testing.T) {
	t.Parallel()
	e := newEscapeEnv(t)
	p := e.policy(func(p *Policy) { p.Limits.Wall = 10 * time.Millisecond })
	if got := e.run(t, p, nil, "sleep", "200ms"); got != "ok" {
		t.Fatalf("a probe past its wall limit answered %q under the helper alone, want ok", got)
	}
}

// TestEscapeInheritance: nothing of the kernel's process reaches the
// sandbox but what the policy gives, neither descriptors (even ones opened
// without close-on-exec, or handed over on purpose) nor environment.
// Not parallel: it sets the environment and leaks a descriptor into every
// child started meanwhile.
func TestEscapeInheritance(t *testing.T) {
	e := newEscapeEnv(t)
	t.Setenv("KAIRO_TEST_SECRET", "hunter2")
	leaked, err := syscall.Open(e.home+"/notes", syscall.O_RDONLY, 0) // no O_CLOEXEC
	noErr(t, err)
	defer syscall.Close(leaked)
	handed, err := os.Open(e.home + "/notes")
	noErr(t, err)
	defer handed.Close()
	hand := func(_ *testing.T, c *Cmd) { c.ExtraFiles = append(c.ExtraFiles, handed) }

	for _, x := range []struct {
		name      string
		try, near []string
		want      string
	}{
		{"InheritedDescriptors", []string{"fds"}, []string{"read-fd", "0"}, "ok"},
		{"HandedDescriptor", []string{"read-fd", "5"}, []string{"read-fd", "0"}, "errno EBADF"},
		{"SecretEnvironment", []string{"getenv", "KAIRO_TEST_SECRET"}, []string{"getenv", "KAIRO_GRANTED"}, "unset"},
	} {
		t.Run(x.name, func(t *testing.T) {
			if got := e.run(t, e.policy(nil), hand, x.try...); got != x.want {
				t.Errorf("escape %v: the sandbox answered %q, want %q", x.try, got, x.want)
			}
			if got := e.run(t, e.policy(nil), hand, x.near...); got != "ok" {
				t.Errorf("granted neighbour %v: the sandbox answered %q, want ok", x.near, got)
			}
		})
	}
}

// ptyStdin gives c a new terminal's slave as stdin, for TIOCSTI to aim at.
func ptyStdin(t *testing.T, c *Cmd) {
	master, slave, err := pty.Open()
	noErr(t, err)
	t.Cleanup(func() {
		master.Close()
		slave.Close()
	})
	c.Stdin = slave
}

// TestSeccompAblation shows each rule of the seccomp filter load-bearing:
// with the filter off (Policy.SkipSeccomp) the probe succeeds, as nothing
// else in the sandbox stops it; with the filter on, it fails.
func TestSeccompAblation(t *testing.T) {
	t.Parallel()
	e := newEscapeEnv(t)
	tty := ptyStdin
	legacyTIOCSTI(t)
	tcp := func(p *Policy) { p.ConnectTCP = []uint16{uint16(e.tcpGranted)} }
	rules := []ablation{
		// Landlock's port rules cover IPPROTO_TCP only.
		{"MPTCP", tcp, nil, []string{"connect-mptcp", "127.0.0.1:" + strconv.Itoa(e.tcpUngranted)}, "errno EACCES"},
		{"UDP", nil, nil, []string{"dns-udp", e.resolver}, "errno EACCES"},
		{"PathnameUnixSocket", nil, nil, []string{"connect-unix", e.hostSocket}, "errno EACCES"},
		{"Netlink", nil, nil, []string{"socket", "netlink", "raw", "0"}, "errno EACCES"},
		{"Vsock", nil, nil, []string{"socket", "vsock", "stream", "0"}, "errno EACCES"},
		{"IOUring", nil, nil, []string{"io-uring-setup"}, "errno EPERM"},
		{"TIOCSTI", nil, tty, []string{"tiocsti"}, "errno EPERM"},
		{"TIOCSTIHighBits", nil, tty, []string{"tiocsti-high"}, "errno EPERM"},
		{"UserNamespace", nil, nil, []string{"clone-ns", "user"}, "errno EPERM"},
		{"PtraceTraceme", nil, nil, []string{"ptrace-traceme"}, "errno EPERM"},
		{"PerfEventOpen", nil, nil, []string{"perf-self"}, "errno EPERM"},
		{"Userfaultfd", nil, nil, []string{"userfaultfd"}, "errno EPERM"},
		{"Keyring", nil, nil, []string{"keyctl"}, "errno EPERM"},
		{"PersonalityNoASLR", nil, nil, []string{"personality", "0x0040000"}, "errno EPERM"},
		// POSIX message queues are not here: opening one opens a file of
		// the kernel's mqueue mount, which no Landlock rule grants, so
		// Landlock refuses it too (EACCES) and the filter is a second lock.
		{"SysVSharedMemory", nil, nil, []string{"shmget", strconv.Itoa(1 << 20)}, "errno EPERM"},
		{"SysVMessageQueue", nil, nil, []string{"msgget"}, "errno EPERM"},
		{"MemfdExec", nil, nil, []string{"memfd-exec", "noop"}, "errno EPERM"},
	}
	if runtime.GOARCH == "amd64" && ia32() {
		rules = append(rules, ablation{"Int80", nil, nil, []string{"int80"}, "signal SIGSYS"})
	}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			off := e.policy(r.policy)
			off.SkipSeccomp = true
			if got := e.run(t, off, r.setup, r.try...); got != "ok" {
				t.Errorf("%q with the filter off: the sandbox answered %q, want ok (something else stops it: the rule is not what holds)", strings.Join(r.try, " "), got)
			}
			if got := e.run(t, e.policy(r.policy), r.setup, r.try...); got != r.want {
				t.Errorf("%q with the filter on: the sandbox answered %q, want %q", strings.Join(r.try, " "), got, r.want)
			}
		})
	}
}

// ablation is a probe that only the seccomp filter stops.
type ablation struct {
	name   string
	policy func(*Policy)
	setup  func(*testing.T, *Cmd)
	try    []string
	want   string // with the filter on; with it off, "ok"
}

// legacyTIOCSTI makes sure TIOCSTI works for an unprivileged process on
// its controlling terminal, as it does unless dev.tty.legacy_tiocsti is 0
// (Linux 6.2+; distributions turn it off more and more). Then the filter
// off lets the ioctl through and the ablation shows the rule holding; the
// sysctl is put back when t ends.
func legacyTIOCSTI(t *testing.T) {
	const sysctl = "/proc/sys/dev/tty/legacy_tiocsti"
	old, err := os.ReadFile(sysctl)
	if err != nil || strings.TrimSpace(string(old)) != "0" {
		return // an older kernel, where TIOCSTI is always there, or already on
	}
	if err := os.WriteFile(sysctl, []byte("1"), 0); err != nil {
		t.Fatalf("dev.tty.legacy_tiocsti is 0 and cannot be set: %v", err)
	}
	t.Cleanup(func() { os.WriteFile(sysctl, old, 0) })
}

// TestProcAblation shows the sandbox's own /proc load-bearing: with the
// host's /proc (Policy.SharedProc) the default profile reads other
// processes' command lines and /proc/net/unix, as it did before; with its
// own, it does not.
func TestProcAblation(t *testing.T) {
	t.Parallel()
	e := newEscapeEnv(t)
	for _, try := range [][]string{
		{"open-read", "/proc/1/cmdline"},
		{"open-read", "/proc/" + strconv.Itoa(e.daemon) + "/cmdline"},
		{"open-read", "/proc/net/unix"},
	} {
		t.Run(strings.ReplaceAll(try[1], "/", "_"), func(t *testing.T) {
			t.Parallel()
			if got := e.run(t, e.policy(func(p *Policy) { p.SharedProc = true }), nil, try...); got != "ok" {
				t.Errorf("%q with the host's /proc: %q, want ok (something else stops it: the private /proc is not what holds)", strings.Join(try, " "), got)
			}
			if got := e.run(t, e.policy(nil), nil, try...); got != "errno ENOENT" {
				t.Errorf("%q with the sandbox's /proc: %q, want errno ENOENT", strings.Join(try, " "), got)
			}
		})
	}
}

// TestEscapeProcWarm: a warm helper makes the sandbox's /proc before it is
// handed a spawn (off the spawn's path, see procfs.go); what it runs sees
// the same /proc as a helper started for the spawn.
func TestEscapeProcWarm(t *testing.T) {
	t.Parallel()
	e := newEscapeEnv(t)
	for _, x := range []struct {
		try  []string
		want string
	}{
		{[]string{"open-read", "/proc/1/cmdline"}, "errno ENOENT"},
		{[]string{"open-read", "/proc/" + strconv.Itoa(e.testProcess) + "/cmdline"}, "errno ENOENT"},
		{[]string{"open-read", "/proc/net/unix"}, "errno ENOENT"},
		{[]string{"proc-pids"}, "ok"},
		{[]string{"open-read", "/proc/self/status"}, "ok"}, // the neighbour
		{[]string{"open-read", "/proc/self/cmdline"}, "ok"},
	} {
		if got := e.runWarm(t, e.policy(nil), x.try...); got != x.want {
			t.Errorf("%q through a warm helper: %q, want %q", strings.Join(x.try, " "), got, x.want)
		}
	}
}

// TestEscapeWarmPrivilege: a warm helper sets no_new_privs and empties its
// capability bounding set while it waits (prepareDrop, off the spawn's
// path); what it runs holds no capability and gains none, as through a
// helper started for the spawn.
func TestEscapeWarmPrivilege(t *testing.T) {
	t.Parallel()
	e := newEscapeEnv(t)
	ids := fmt.Sprintf("uid %[1]d/%[1]d/%[1]d gid %[1]d/%[1]d/%[1]d groups []", e.uid)
	for _, x := range []struct {
		try  []string
		want string
	}{
		{[]string{"caps"}, "caps inh=0 prm=0 eff=0 bnd=0 amb=0"},
		{[]string{"setuid", "0"}, "errno EPERM"},
		{[]string{"capset-admin"}, "errno EPERM"},
		{[]string{"exec", e.probeSUID, "ids"}, ids},
		{[]string{"ids"}, ids}, // the neighbour
	} {
		if got := e.runWarm(t, e.policy(nil), x.try...); got != x.want {
			t.Errorf("%q through a warm helper: %q, want %q", strings.Join(x.try, " "), got, x.want)
		}
	}
}

// TestEscapeWarmNarrower: the ruleset a warm helper prepares while it
// waits (landlock.go) serves only a plan that holds every rule of it; a
// narrower one, here without /etc/passwd, gets a ruleset of its own, and
// what it leaves out stays refused. The default profile through a warm
// helper still reads it.
func TestEscapeWarmNarrower(t *testing.T) {
	t.Parallel()
	e := newEscapeEnv(t)
	narrow := e.policy(func(p *Policy) {
		p.Read = slices.DeleteFunc(slices.Clone(p.Read), func(s string) bool { return s == "/etc/passwd" })
	})
	for _, x := range []struct {
		p    *Policy
		try  []string
		want string
	}{
		{narrow, []string{"open-read", "/etc/passwd"}, "errno EACCES"},
		{narrow, []string{"open-read", "/etc/group"}, "ok"}, // the neighbour
		{e.policy(nil), []string{"open-read", "/etc/passwd"}, "ok"},
		{e.policy(nil), []string{"open-read", "/etc/shadow"}, "errno EACCES"},
	} {
		if got := e.runWarm(t, x.p, x.try...); got != x.want {
			t.Errorf("%q through a warm helper: %q, want %q", strings.Join(x.try, " "), got, x.want)
		}
	}
}

// TestEscapeWarmFilter: the seccomp filter a warm helper installs while it
// waits (warmfilter.go) confines its spawn as the filter installed last
// does — a socket the default profile does not grant, a namespace, stay
// refused, the neighbour works — and a plan with another filter, one that
// grants TCP, is refused by the helper rather than run under the wrong
// filter.
func TestEscapeWarmFilter(t *testing.T) {
	t.Parallel()
	e := newEscapeEnv(t)
	def := e.policy(nil)
	filter := WarmFilterOf(def)
	for _, x := range []struct {
		try  []string
		want string
	}{
		{[]string{"socket", "inet", "stream", "0"}, "errno EACCES"},
		{[]string{"unshare", "user"}, "errno EPERM"},
		{[]string{"socketpair-unix"}, "ok"}, // the neighbour
	} {
		got, err := e.runWarmFiltered(t, def, filter, x.try...)
		if err != nil || got != x.want {
			t.Errorf("%q through a warm helper with the filter installed: %q (%v), want %q", strings.Join(x.try, " "), got, err, x.want)
		}
	}
	tcp := e.policy(func(p *Policy) { p.ConnectTCP = []uint16{uint16(e.tcpGranted)} })
	c, err := Command(os.Args[0], tcp, []string{e.probe, "socket", "inet", "stream", "0"})
	noErr(t, err)
	c.Started()
	if c.Fits(filter) || !c.Fits(nil) {
		t.Errorf("a plan that grants TCP fits the default profile's filter (%v) or does not fit a helper without one (%v)", c.Fits(filter), c.Fits(nil))
	}
	got, err := e.runWarmFiltered(t, tcp, filter, "socket", "inet", "stream", "0")
	if err == nil || !strings.Contains(err.Error(), "other than the plan's") {
		t.Errorf("a plan that grants TCP, handed to a helper with the default profile's filter: %q (%v), want it refused", got, err)
	}
}

// runWarm runs the probe under p through a warm helper and returns its
// line.
func (e *escapeEnv) runWarm(t *testing.T, p *Policy, args ...string) string {
	t.Helper()
	out, err := e.runWarmFiltered(t, p, nil, args...)
	if err != nil {
		t.Fatalf("probe %v: the sandbox did not start: %v", args, err)
	}
	return out
}

// runWarmFiltered runs the probe under p through a warm helper that
// installed filter while it waited, and returns its line, or why the
// sandbox did not start.
func (e *escapeEnv) runWarmFiltered(t *testing.T, p *Policy, filter *WarmFilter, args ...string) (string, error) {
	t.Helper()
	helper, ctl, err := StartWarm(os.Args[0], filter)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	c, err := HandoffCommand(os.Args[0], p, append([]string{e.probe}, args...))
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	noErr(t, err)
	defer r.Close()
	null, err := os.Open(os.DevNull)
	noErr(t, err)
	defer null.Close()
	err = c.Handoff(ctl, null, w, w, false)
	w.Close()
	if serr := c.Started(); serr != nil {
		helper.Process.Kill()
		helper.Wait()
		return "", serr
	}
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(r)
	helper.Wait()
	return strings.TrimSpace(string(out)), nil
}

// TestEscapeSwappedFolder: a folder granted fs.write that the sandbox's
// own code swaps for a link between the policy's making and the helper's
// open — a skill racing the start of its child, in its own writable folder
// — grants nothing where the link leads: the plan holds paths without
// links and the helper opens them without following any. The neighbour:
// the same grant, unswapped, is writable.
func TestEscapeSwappedFolder(t *testing.T) {
	e := newEscapeEnv(t)
	grant := func(dir string) *Policy {
		mkdirFixture(t, dir, 0o700)
		noErr(t, os.Chown(dir, e.uid, e.uid))
		return e.policy(func(p *Policy) { p.Write = append(p.Write, dir) })
	}
	swapped := e.work + "/swap-a"
	got := e.run(t, grant(swapped), func(t *testing.T, _ *Cmd) {
		noErr(t, os.Remove(swapped))
		noErr(t, os.Symlink(e.outside, swapped))
	}, "create", swapped+"/via-link")
	if got != "errno EACCES" {
		t.Fatalf("create through a folder swapped for a link to %s: %q, want errno EACCES", e.outside, got)
	}
	if _, err := os.Lstat(e.outside + "/via-link"); err == nil {
		t.Fatalf("the sandbox created %s through the swapped folder", e.outside+"/via-link")
	}
	kept := e.work + "/swap-b"
	if got := e.run(t, grant(kept), nil, "create", kept+"/new"); got != "ok" {
		t.Fatalf("create in a granted folder: %q, want ok", got)
	}
}
