package sandbox

import (
	"fmt"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// These tests run the filter in runBPF, the interpreter in bpf_test.go, to
// check every rule on inputs a real process cannot easily produce (other
// arches, high argument bits, every syscall number). seccomp_test.go
// checks the same rules against the kernel.

var (
	verdictAllow    = uint32(unix.SECCOMP_RET_ALLOW)
	verdictKill     = uint32(unix.SECCOMP_RET_KILL_PROCESS)
	verdictDeny     = retErrno(unix.EPERM)
	verdictNoSocket = retErrno(unix.EACCES)
	verdictNoClone3 = retErrno(unix.ENOSYS)
)

// allPolicies is every FilterPolicy.
func allPolicies() []FilterPolicy {
	var fps []FilterPolicy
	for bits := range 8 {
		fps = append(fps, FilterPolicy{TCP: bits&1 != 0, UDP: bits&2 != 0, Unix: bits&4 != 0})
	}
	return fps
}

func buildFilter(t *testing.T, fp FilterPolicy) []unix.SockFilter {
	t.Helper()
	prog, err := BuildFilter(fp)
	if err != nil {
		t.Fatalf("BuildFilter(%+v): %v", fp, err)
	}
	return prog
}

func verdictName(v uint32) string {
	switch v {
	case verdictAllow:
		return "allow"
	case verdictKill:
		return "kill"
	}
	if v&unix.SECCOMP_RET_ACTION_FULL == unix.SECCOMP_RET_ERRNO {
		return "errno " + unix.ErrnoName(unix.Errno(v&unix.SECCOMP_RET_DATA))
	}
	return fmt.Sprintf("%#x", v)
}

// call is a native syscall with its arguments.
func nativeCall(nr uint32, args ...uint64) seccompInput {
	in := seccompInput{nr: nr, arch: auditArch}
	copy(in.args[:], args)
	return in
}

func TestBuildFilterResolvesEveryPolicy(t *testing.T) {
	for _, fp := range allPolicies() {
		prog := buildFilter(t, fp)
		if len(prog) >= 200 {
			t.Errorf("%+v: %d instructions; keep the filter under 200", fp, len(prog))
		}
		// The kernel refuses a program whose jumps leave it; check every
		// jump, reached or not.
		for pc, insn := range prog {
			if insn.Code&0x07 != unix.BPF_JMP {
				continue
			}
			far := pc + 1 + max(int(insn.Jt), int(insn.Jf))
			if insn.Code == unix.BPF_JMP|unix.BPF_JA {
				far = pc + 1 + int(insn.K)
			}
			if far >= len(prog) {
				t.Errorf("%+v: jump at %d lands at %d, past the end (%d)", fp, pc, far, len(prog))
			}
		}
		if last := prog[len(prog)-1]; last.Code != unix.BPF_RET|unix.BPF_K {
			t.Errorf("%+v: last instruction %+v is not a return", fp, last)
		}
		t.Logf("%+v: %d instructions", fp, len(prog))
	}
}

func TestFilterKillsOtherABIs(t *testing.T) {
	prog := buildFilter(t, FilterPolicy{TCP: true, UDP: true, Unix: true})
	for _, arch := range []uint32{unix.AUDIT_ARCH_I386, unix.AUDIT_ARCH_X86_64, unix.AUDIT_ARCH_ARM,
		unix.AUDIT_ARCH_AARCH64, 0} {
		if arch == auditArch {
			continue
		}
		// getpid of i386 and of arm is 20; try the native number too.
		for _, nr := range []uint32{20, unix.SYS_GETPID} {
			in := nativeCall(nr)
			in.arch = arch
			run, err := runBPF(prog, in)
			if err != nil || run.verdict != verdictKill {
				t.Errorf("arch %#x nr %d: %s, %v; want kill", arch, nr, verdictName(run.verdict), err)
			}
		}
	}
	if x32Bit == 0 {
		return
	}
	for _, nr := range []uint32{x32Bit | unix.SYS_GETPID, x32Bit | unix.SYS_PTRACE, 0xffffffff} {
		run, err := runBPF(prog, nativeCall(nr))
		if err != nil || run.verdict != verdictKill {
			t.Errorf("x32 nr %#x: %s, %v; want kill", nr, verdictName(run.verdict), err)
		}
	}
}

// TestFilterLeavesPlainSyscallsToTheCache checks every syscall number the
// filter does not name: it must be allowed whatever the arguments, without
// reading them, so the kernel's seccomp cache skips the filter for it, and
// every named syscall must get its verdict.
func TestFilterLeavesPlainSyscallsToTheCache(t *testing.T) {
	denied := slices.Concat(deniedSyscalls, archDeniedSyscalls)
	sc := argSyscalls
	byArgs := []uint32{sc.clone, sc.ioctl, sc.personality, sc.socket, sc.socketpair, sc.memfdCreate}
	junk := []uint64{^uint64(0), 0xdead0000beef, 0, 1, 0x80000000, 0x7fffffff}
	for _, fp := range allPolicies() {
		prog := buildFilter(t, fp)
		longest := 0
		for nr := uint32(0); nr < 1024; nr++ {
			run, err := runBPF(prog, nativeCall(nr, junk...))
			if err != nil {
				t.Fatalf("%+v nr %d: %v", fp, nr, err)
			}
			want := verdictAllow
			switch {
			case slices.Contains(byArgs, nr):
				continue
			case slices.Contains(denied, nr):
				want = verdictDeny
			case nr == sc.clone3:
				want = verdictNoClone3
			}
			if run.verdict != want || run.readArgs {
				t.Errorf("%+v nr %d: %s (read args: %v); want %s without reading args",
					fp, nr, verdictName(run.verdict), run.readArgs, verdictName(want))
			}
			longest = max(longest, run.steps)
		}
		// Arch check, number load, x32 check, then about log2(routes)
		// splits and a leaf of bpfLeafSize compares.
		if longest > 20 {
			t.Errorf("%+v: a syscall decided on its number alone ran %d instructions; want at most 20", fp, longest)
		}
	}
}

func TestFilterArgumentRules(t *testing.T) {
	const high = 0xdead_beef_0000_0000 // bits the kernel drops from an int argument
	sc := argSyscalls
	ns := []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER,
		unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWCGROUP}
	tests := []struct {
		name string
		in   seccompInput
		want uint32
	}{
		{"fork", nativeCall(sc.clone, uint64(unix.SIGCHLD)), verdictAllow},
		{"thread", nativeCall(sc.clone, unix.CLONE_VM|unix.CLONE_FS|unix.CLONE_FILES|unix.CLONE_SIGHAND|
			unix.CLONE_THREAD|unix.CLONE_SYSVSEM|unix.CLONE_SETTLS|unix.CLONE_PARENT_SETTID|
			unix.CLONE_CHILD_CLEARTID), verdictAllow},
		{"vfork", nativeCall(sc.clone, unix.CLONE_VM|unix.CLONE_VFORK|uint64(unix.SIGCHLD)), verdictAllow},
		// In clone(2) 0x80 is part of the exit signal, not CLONE_NEWTIME.
		{"exit signal with bit 0x80", nativeCall(sc.clone, 0x80|uint64(unix.SIGCHLD)), verdictAllow},
		{"namespace flags in the ignored high half", nativeCall(sc.clone, unix.CLONE_NEWUSER<<32|uint64(unix.SIGCHLD)), verdictAllow},
		{"clone3", nativeCall(sc.clone3, 0, 88), verdictNoClone3},

		{"ioctl TIOCSTI", nativeCall(sc.ioctl, 0, uint64(sc.tiocsti)), verdictDeny},
		{"ioctl TIOCSTI with high bits", nativeCall(sc.ioctl, 0, high|uint64(sc.tiocsti)), verdictDeny},
		{"ioctl TIOCLINUX", nativeCall(sc.ioctl, 0, uint64(sc.tioclinux)), verdictDeny},
		{"ioctl TIOCLINUX with high bits", nativeCall(sc.ioctl, 0, high|uint64(sc.tioclinux)), verdictDeny},
		{"ioctl TIOCGWINSZ", nativeCall(sc.ioctl, 0, unix.TIOCGWINSZ), verdictAllow},
		{"ioctl FIONREAD", nativeCall(sc.ioctl, 3, unix.TIOCINQ), verdictAllow},
		{"ioctl TIOCSTI in the fd", nativeCall(sc.ioctl, uint64(sc.tiocsti), unix.TCGETS), verdictAllow},

		{"personality PER_LINUX", nativeCall(sc.personality, 0), verdictAllow},
		{"personality query", nativeCall(sc.personality, 0xffffffff), verdictAllow},
		{"personality query with high bits", nativeCall(sc.personality, high|0xffffffff), verdictAllow},
		{"personality ADDR_NO_RANDOMIZE", nativeCall(sc.personality, 0x0040000), verdictDeny},
		{"personality READ_IMPLIES_EXEC", nativeCall(sc.personality, 0x0400000), verdictDeny},
		{"personality PER_LINUX32", nativeCall(sc.personality, 0x0008), verdictDeny},

		{"memfd_create MFD_NOEXEC_SEAL", nativeCall(sc.memfdCreate, 0, unix.MFD_NOEXEC_SEAL), verdictAllow},
		{"memfd_create MFD_NOEXEC_SEAL|MFD_CLOEXEC|MFD_ALLOW_SEALING", nativeCall(sc.memfdCreate, 0, unix.MFD_NOEXEC_SEAL|unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING), verdictAllow},
		{"memfd_create 0", nativeCall(sc.memfdCreate, 0, 0), verdictDeny},
		{"memfd_create MFD_CLOEXEC", nativeCall(sc.memfdCreate, 0, unix.MFD_CLOEXEC), verdictDeny},
		{"memfd_create MFD_EXEC", nativeCall(sc.memfdCreate, 0, unix.MFD_EXEC), verdictDeny},
		{"memfd_create MFD_NOEXEC_SEAL in the high half", nativeCall(sc.memfdCreate, 0, unix.MFD_NOEXEC_SEAL<<32), verdictDeny},

		{"socketpair AF_UNIX", nativeCall(sc.socketpair, unix.AF_UNIX, unix.SOCK_STREAM), verdictAllow},
		{"socketpair AF_UNIX dgram", nativeCall(sc.socketpair, unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC), verdictAllow},
		{"socketpair AF_INET", nativeCall(sc.socketpair, unix.AF_INET, unix.SOCK_STREAM), verdictNoSocket},
		{"socketpair AF_NETLINK", nativeCall(sc.socketpair, unix.AF_NETLINK, unix.SOCK_RAW), verdictNoSocket},
		{"socketpair AF_TIPC", nativeCall(sc.socketpair, unix.AF_TIPC, unix.SOCK_SEQPACKET), verdictNoSocket},
	}
	for _, flag := range ns {
		tests = append(tests, struct {
			name string
			in   seccompInput
			want uint32
		}{fmt.Sprintf("clone %#x", flag), nativeCall(sc.clone, flag|uint64(unix.SIGCHLD)), verdictDeny})
	}
	for _, fp := range allPolicies() {
		prog := buildFilter(t, fp)
		for _, tt := range tests {
			run, err := runBPF(prog, tt.in)
			if err != nil || run.verdict != tt.want {
				t.Errorf("%+v %s: %s, %v; want %s", fp, tt.name, verdictName(run.verdict), err, verdictName(tt.want))
			}
		}
	}
}

func TestFilterSocketRules(t *testing.T) {
	const (
		never = iota
		tcp
		udp
		unixGrant
	)
	const high = 0x7777_0000_0000_0000
	nb := uint64(unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC)
	tests := []struct {
		name                  string
		family, typ, protocol uint64
		grant                 int
	}{
		{"tcp4", unix.AF_INET, unix.SOCK_STREAM, 0, tcp},
		{"tcp4 nonblock cloexec", unix.AF_INET, unix.SOCK_STREAM | nb, unix.IPPROTO_TCP, tcp},
		{"tcp6", unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_TCP, tcp},
		{"tcp4 with high bits", high | unix.AF_INET, high | unix.SOCK_STREAM, high, tcp},
		{"mptcp", unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP, never},
		{"mptcp6", unix.AF_INET6, unix.SOCK_STREAM | nb, unix.IPPROTO_MPTCP, never},
		{"stream as udp", unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_UDP, never},
		{"stream with an unknown flag", unix.AF_INET, unix.SOCK_STREAM | 0x100, 0, never},
		{"sctp", unix.AF_INET, unix.SOCK_SEQPACKET, unix.IPPROTO_SCTP, never},
		{"udp4", unix.AF_INET, unix.SOCK_DGRAM, 0, udp},
		{"udp6", unix.AF_INET6, unix.SOCK_DGRAM | nb, unix.IPPROTO_UDP, udp},
		{"udplite", unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_UDPLITE, never},
		{"icmp ping", unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP, never},
		{"dgram as tcp", unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_TCP, never},
		{"raw", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP, never},
		{"raw6 protocol 0", unix.AF_INET6, unix.SOCK_RAW, 0, never},
		{"unix stream", unix.AF_UNIX, unix.SOCK_STREAM, 0, unixGrant},
		{"unix dgram", unix.AF_UNIX, unix.SOCK_DGRAM | nb, 0, unixGrant},
		{"unix seqpacket", unix.AF_UNIX, unix.SOCK_SEQPACKET, 0, unixGrant},
		{"netlink", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE, never},
		{"packet", unix.AF_PACKET, unix.SOCK_RAW, 0x0300, never},
		{"vsock", unix.AF_VSOCK, unix.SOCK_STREAM, 0, never},
		{"alg", unix.AF_ALG, unix.SOCK_SEQPACKET, 0, never},
		{"bluetooth", unix.AF_BLUETOOTH, unix.SOCK_STREAM, 0, never},
		{"can", unix.AF_CAN, unix.SOCK_RAW, 1, never},
	}
	for _, fp := range allPolicies() {
		prog := buildFilter(t, fp)
		granted := map[int]bool{tcp: fp.TCP, udp: fp.UDP, unixGrant: fp.Unix}
		for _, tt := range tests {
			want := verdictNoSocket
			if granted[tt.grant] {
				want = verdictAllow
			}
			run, err := runBPF(prog, nativeCall(argSyscalls.socket, tt.family, tt.typ, tt.protocol))
			if err != nil || run.verdict != want {
				t.Errorf("%+v socket %s: %s, %v; want %s", fp, tt.name, verdictName(run.verdict), err, verdictName(want))
			}
		}
	}
}
