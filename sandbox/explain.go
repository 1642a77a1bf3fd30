package sandbox

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Unenforced lists what of p a kernel at Landlock ABI abi cannot enforce
// exactly: each entry says what would be open that p does not grant. An
// empty list means p is enforced as written.
func Unenforced(p *Policy, abi int) []string {
	var out []string
	if abi < 1 {
		return []string{"filesystem: no Landlock, every path the uid can reach is open"}
	}
	if abi < 3 {
		out = append(out, "filesystem: truncating files outside fs.write (Landlock ABI 3)")
	}
	if abi < 4 && (len(p.ConnectTCP) > 0 || len(p.BindTCP) > 0 || len(p.Hosts) > 0) {
		out = append(out, "network: TCP to every port, not only the granted ones (Landlock ABI 4)")
	}
	if abi < 5 {
		out = append(out, "devices: ioctl on the granted device files (Landlock ABI 5)")
	}
	if abi < 6 && len(p.Unix) > 0 {
		out = append(out, "ipc: abstract unix sockets outside the sandbox (Landlock ABI 6)")
	}
	if abi < 6 && p.UID < 0 {
		out = append(out, "ipc: signals to the kernel's other processes of the same uid (Landlock ABI 6)")
	}
	if len(p.Unix) > 0 && abi < resolveUnixABI {
		out = append(out, fmt.Sprintf("net.unix: connect to every pathname unix socket the uid can reach, not only %s (Landlock ABI %d)", strings.Join(p.Unix, ", "), resolveUnixABI))
	}
	if p.MinLandlockABI > abi {
		out = append(out, fmt.Sprintf("the policy asks for Landlock ABI %d; this kernel has %d", p.MinLandlockABI, abi))
	}
	return out
}

// resolveUnixABI is the first Landlock ABI that controls connecting to
// pathname unix sockets.
const resolveUnixABI = 9

// checkEnforceable refuses p when the kernel would enforce less than it
// says, unless p is best-effort.
func checkEnforceable(p *Policy) error {
	miss := Unenforced(p, LandlockABI())
	if len(miss) == 0 || p.BestEffort {
		return nil
	}
	return fmt.Errorf("this kernel cannot enforce the policy exactly (refusing; an operator may choose best effort):\n  %s", strings.Join(miss, "\n  "))
}

// Gaps lists what of p the sandbox leaves open on this machine though it
// runs p anyway: not a grant it cannot enforce ([Unenforced], which refuses
// the policy), but a bound that only a root kernel can give.
func Gaps(p *Policy) []string { return gaps(p, hidesProc()) }

func gaps(p *Policy, root bool) []string {
	if root {
		return nil
	}
	out := []string{
		"/proc: the host's, as the kernel is not root: every process's command line, /proc/net (unix sockets, connections) and /proc/sys are readable wherever /proc is granted",
	}
	if p.Limits.Processes > 0 && p.UID < 0 {
		out = append(out, fmt.Sprintf("processes: the limit of %d counts every process of uid %d, the kernel's own, not this tree's alone", p.Limits.Processes, os.Getuid()))
	}
	return out
}

// Features is what the running kernel can enforce, for `kairo sandbox check`.
type Features struct {
	LandlockABI int
	Seccomp     bool
	NoNewPrivs  bool
	Root        bool // the kernel can drop to a uid of the sandbox's own and give the sandbox its own /proc
	// MemfdNoExecSeal: memfd_create takes MFD_NOEXEC_SEAL (Linux 6.3), the
	// only memfd the filter lets a sandbox make.
	MemfdNoExecSeal bool
}

// Probe reads the running kernel's features.
func Probe() Features {
	f := Features{LandlockABI: LandlockABI(), Root: os.Geteuid() == 0}
	_, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0)
	f.Seccomp = err == nil
	_, err = unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	f.NoNewPrivs = err == nil
	if fd, err := unix.MemfdCreate("kairo-probe", unix.MFD_CLOEXEC|unix.MFD_NOEXEC_SEAL); err == nil {
		unix.Close(fd)
		f.MemfdNoExecSeal = true
	}
	return f
}

// WriteCheck prints what this kernel enforces, layer by layer.
func WriteCheck(w io.Writer, f Features) {
	yes := func(b bool) string {
		if b {
			return "enforced"
		}
		return "NOT enforced"
	}
	abi := f.LandlockABI
	fmt.Fprintf(w, "Landlock ABI %d\n", abi)
	fmt.Fprintf(w, "  filesystem read/write/exec by path   %s\n", yes(abi >= 1))
	fmt.Fprintf(w, "  rename and link across folders       %s\n", yes(abi >= 2))
	fmt.Fprintf(w, "  truncate                             %s\n", yes(abi >= 3))
	fmt.Fprintf(w, "  TCP bind and connect by port         %s\n", yes(abi >= 4))
	fmt.Fprintf(w, "  ioctl on devices                     %s\n", yes(abi >= 5))
	fmt.Fprintf(w, "  abstract unix sockets and signals    %s\n", yes(abi >= 6))
	fmt.Fprintf(w, "  pathname unix sockets by path        %s (seccomp refuses AF_UNIX unless net.unix grants it)\n", yes(abi >= resolveUnixABI))
	fmt.Fprintf(w, "seccomp filter                         %s\n", yes(f.Seccomp))
	fmt.Fprintf(w, "  sockets by family/type/protocol, no ptrace, mount, namespaces, keyring, bpf, perf, io_uring, modules, kexec, TIOCSTI\n")
	fmt.Fprintf(w, "  no System V IPC or POSIX message queues (they outlive the tree)\n")
	if f.MemfdNoExecSeal {
		fmt.Fprintf(w, "  memfd_create only with MFD_NOEXEC_SEAL: a memfd never runs as a program\n")
	} else {
		fmt.Fprintf(w, "  memfd_create refused altogether: this kernel has no MFD_NOEXEC_SEAL (Linux 6.3)\n")
	}
	fmt.Fprintf(w, "no_new_privs                           %s\n", yes(f.NoNewPrivs))
	if f.Root {
		fmt.Fprintf(w, "uid                                    a uid of its own per process tree (%d and up), no groups, no capabilities\n", 0x7fe00000)
	} else {
		fmt.Fprintf(w, "uid                                    the kernel's own (%d): not root, so no uid of its own per tree; no capabilities\n", os.Getuid())
	}
	if f.Root {
		fmt.Fprintf(w, "/proc                                  the sandbox's own (%s): other processes, /proc/net and /proc/sys hidden\n", procOptions)
	} else {
		fmt.Fprintf(w, "/proc                                  NOT enforced: the host's, as the kernel is not root: every process's command line and /proc/net are readable\n")
	}
	l := DefaultLimits
	fmt.Fprintf(w, "rlimits                                cpu, memory, processes, file size, open files, core=0; default profile: cpu %ds, memory %s, processes %d, file size %s, open files %d\n",
		l.CPUSeconds, gib(l.Memory), l.Processes, gib(l.FileSize), l.OpenFiles)
	if !f.Root {
		fmt.Fprintf(w, "  the process limit counts every process of uid %d, the kernel's own, not one tree's\n", os.Getuid())
	}
}

// gib is n bytes in GiB when it is a whole number of them.
func gib(n uint64) string {
	if n != 0 && n%(1<<30) == 0 {
		return strconv.FormatUint(n>>30, 10) + " GiB"
	}
	return strconv.FormatUint(n, 10) + " bytes"
}

// Explain prints the rules p applies to target, layer by layer, in the
// order the helper applies them.
func Explain(w io.Writer, p *Policy, target string) {
	q := p
	if target != "" {
		q = p.withLoaders(target)
	}
	fmt.Fprintf(w, "target     %s\n", target)
	fmt.Fprintf(w, "dir        %s\n", orNone(q.Dir))
	fmt.Fprintf(w, "\n1. descriptors: everything beyond stdin, stdout and stderr is closed at exec\n")
	fmt.Fprintf(w, "\n2. rlimits\n")
	l := q.Limits
	fmt.Fprintf(w, "   cpu          %s\n", limitStr(l.CPUSeconds, "s"))
	fmt.Fprintf(w, "   memory       %s\n", limitStr(l.Memory, " bytes"))
	fmt.Fprintf(w, "   processes    %s\n", limitStr(l.Processes, ""))
	fmt.Fprintf(w, "   file size    %s\n", limitStr(l.FileSize, " bytes"))
	fmt.Fprintf(w, "   open files   %s\n", limitStr(l.OpenFiles, ""))
	fmt.Fprintf(w, "   core dumps   0\n")
	fmt.Fprintf(w, "   (kernel-side) wall %s, output %s, output rate %s\n", durStr(l.Wall.String(), l.Wall == 0), limitStr(l.OutputBytes, " bytes"), limitStr(l.OutputRate, " bytes/s"))
	fmt.Fprintf(w, "\n3. no_new_privs: nothing it execs gains privileges\n")
	fmt.Fprintf(w, "\n4. Landlock (ABI %d on this kernel), one ruleset; everything not listed is denied\n", LandlockABI())
	gs, missing := grants(q)
	for _, g := range gs {
		fmt.Fprintf(w, "   %-7s %s\n", g.kind, g.path)
	}
	for _, m := range missing {
		fmt.Fprintf(w, "   (skipped, does not exist) %s\n", m)
	}
	if len(q.Hosts) > 0 {
		fmt.Fprintf(w, "   tcp connect  %s; and the port of the tree's egress proxy, chosen at spawn\n", portsStr(q.ConnectTCP))
	} else {
		fmt.Fprintf(w, "   tcp connect  %s\n", portsStr(q.ConnectTCP))
	}
	fmt.Fprintf(w, "   tcp bind     %s\n", portsStr(q.BindTCP))
	fmt.Fprintf(w, "   scoped       abstract unix sockets and signals stay inside the sandbox\n")
	if hidesProc() && !q.SharedProc {
		fmt.Fprintf(w, "   /proc        the sandbox's own, mounted before the ruleset (%s): its own processes only\n", procOptions)
	} else {
		fmt.Fprintf(w, "   /proc        the host's: every process's command line and /proc/net where /proc is granted\n")
	}
	fmt.Fprintf(w, "\n5. credentials\n")
	switch {
	case q.UID > 0:
		fmt.Fprintf(w, "   uid %d gid %d, no supplementary groups, no capabilities\n", q.UID, q.GID)
	case os.Geteuid() == 0:
		fmt.Fprintf(w, "   a uid of its own, chosen at spawn; no supplementary groups, no capabilities\n")
	default:
		fmt.Fprintf(w, "   the kernel's uid %d, no capabilities\n", os.Getuid())
	}
	fmt.Fprintf(w, "\n6. seccomp filter (all threads)\n")
	if q.SkipSeccomp {
		fmt.Fprintf(w, "   OFF (ablation test)\n")
	} else {
		fp := q.filterPolicy()
		fp.TCP = fp.TCP || len(q.Hosts) > 0 // the proxy's port
		fmt.Fprintf(w, "   kill: foreign architectures, x32 calls\n")
		fmt.Fprintf(w, "   deny: ptrace, process_vm_*, mount family, unshare, setns, namespace clone flags, clone3 (ENOSYS), keyctl, bpf, perf_event_open, userfaultfd, io_uring, kexec, modules, TIOCSTI, TIOCLINUX, System V IPC, POSIX message queues, memfd_create without MFD_NOEXEC_SEAL\n")
		fmt.Fprintf(w, "   sockets: tcp %s, udp %s, unix %s; never raw, packet, netlink, vsock, MPTCP\n", onOff(fp.TCP), onOff(fp.UDP), onOff(fp.Unix))
	}
	fmt.Fprintf(w, "\n7. execve with this environment only\n")
	env := slices.Clone(q.Env)
	slices.Sort(env)
	for _, kv := range env {
		fmt.Fprintf(w, "   %s\n", kv)
	}
	if len(q.Hosts) > 0 {
		fmt.Fprintf(w, "   and, at spawn, HTTPS_PROXY, HTTP_PROXY, ALL_PROXY (and in lower case) = the egress proxy's address; NO_PROXY and no_proxy empty\n")
	}
	explainHosts(w, q.Hosts)
	if miss := slices.Concat(Unenforced(q, LandlockABI()), Gaps(q)); len(miss) > 0 {
		fmt.Fprintf(w, "\nNOT enforced on this kernel:\n")
		for _, m := range miss {
			fmt.Fprintf(w, "   %s\n", m)
		}
	}
}

// explainHosts prints the [net] hosts the tree reaches through its
// egress proxy, and how.
func explainHosts(w io.Writer, hosts []string) {
	if len(hosts) == 0 {
		return
	}
	fmt.Fprintf(w, "\n8. egress proxy: the kernel's, on 127.0.0.1 on a port of the tree's own; the only way to these hosts\n")
	for _, h := range hosts {
		fmt.Fprintf(w, "   host         %s\n", hostStr(h))
	}
	fmt.Fprintf(w, "   the proxy resolves the names (the sandbox has no UDP, so no DNS of its own) and dials what it resolved;\n")
	fmt.Fprintf(w, "   redirects and IP literals are checked against the same list; a refused host is a 403 and kairo.sandbox.denied\n")
}

// hostStr is a [net] hosts entry with the ports it allows spelled out
// when it names none.
func hostStr(h string) string {
	h = strings.TrimSpace(h)
	hasPort := strings.Count(h, ":") == 1 // name:port, v4:port
	if strings.HasPrefix(h, "[") {
		hasPort = !strings.HasSuffix(h, "]") // [v6]:port
	}
	if hasPort {
		return h
	}
	return h + " (ports 80 and 443)"
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func limitStr(v uint64, unit string) string {
	if v == 0 {
		return "no limit"
	}
	return strconv.FormatUint(v, 10) + unit
}

func durStr(s string, none bool) string {
	if none {
		return "no limit"
	}
	return s
}

func portsStr(ps []uint16) string {
	if len(ps) == 0 {
		return "none"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ", ")
}

func onOff(b bool) string {
	if b {
		return "allowed"
	}
	return "denied"
}
