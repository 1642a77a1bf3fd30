package audit

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/kairo-os/kairo/abi"
)

// Denial is one refusal the audit subsystem reported.
type Denial struct {
	// PID is the refused process (the thread group); 0 when the record
	// did not say.
	PID int
	// UID is its uid when the refusal happened: the sandbox's uid of its
	// tree, when a root kernel runs it. -1 when no record said and the
	// process was gone before it could be asked.
	UID int
	// Op is an abi.Denied* value.
	Op string
	// Object is what was refused: the path (for a file Landlock refused
	// to create, its folder), the TCP port, the system call's name.
	Object string
	// Detail is the reporter's own words: Landlock's blockers
	// ("fs.make_reg"), the seccomp verdict ("errno", "kill_process").
	Detail string
	// Reporter is "landlock" or "seccomp".
	Reporter string
	// Domain is the Landlock domain that refused it (hex, as the kernel
	// writes it); empty for seccomp.
	Domain string
	// DomainPID is the process that made the Landlock domain, when the
	// Reader saw the domain's first record: the sandbox's helper, which
	// became the first process of the refused process's tree. 0 when
	// unknown, and for seccomp.
	DomainPID int
	// Exe is the refused process's executable, when a record of the
	// event named it.
	Exe string
}

// Reporters.
const (
	ReporterLandlock = "landlock"
	ReporterSeccomp  = "seccomp"
)

// event is the records of one audit event, in the order they came.
type event struct {
	serial  uint64
	records []record
}

// denials are the refusals event reports: one per Landlock access record,
// or the seccomp refusal. Seccomp's clone3 refusal is the sandbox's own
// doing (the C library then falls back to clone) and is never reported,
// nor is a verdict that let the call through (SECCOMP_RET_LOG).
func (e *event) denials() []Denial {
	var sys *record
	for i := range e.records {
		if e.records[i].typ == typeSyscall {
			sys = &e.records[i]
		}
	}
	var out []Denial
	for i := range e.records {
		r := &e.records[i]
		var d Denial
		switch r.typ {
		case typeLandlockAccess:
			d = landlockDenial(r)
		case typeSeccomp:
			var ok bool
			if d, ok = seccompDenial(r); !ok {
				continue
			}
		default:
			continue
		}
		if sys != nil {
			// The system call's record names the process by its
			// credentials at the time, which the Landlock record lacks.
			if d.PID == 0 {
				d.PID = sys.int("pid", 0)
			}
			if d.UID < 0 {
				d.UID = sys.int("uid", -1)
			}
			if d.Exe == "" {
				if v, ok := sys.get("exe"); ok {
					d.Exe = value(v)
				}
			}
		}
		out = append(out, d)
	}
	return out
}

// landlockDenial reads an AUDIT_LANDLOCK_ACCESS record (the kernel's
// security/landlock/audit.c and security/lsm_audit.c), as Linux 6.18
// writes them (testdata/records.txt):
//
//	domain=1851233d2 blockers=fs.make_reg path="/etc" dev="vda" ino=19
//	domain=1851234b0 blockers=fs.read_dir path=2F7372762F6B6169726F dev="vda" ino=803226
//	domain=1851234b0 blockers=net.connect_tcp daddr=127.0.0.1 dest=80
//	domain=1851234b0 blockers=net.bind_tcp src=8080
//	domain=1851234b0 blockers=scope.signal opid=1 ocomm="systemd"
//
// A file Landlock refused to make or remove is named by its folder. The
// record does not name the process: the event's SYSCALL record does (a
// kernel that adds pid= to it is read too).
func landlockDenial(r *record) Denial {
	d := Denial{Reporter: ReporterLandlock, PID: r.int("pid", 0), UID: -1}
	d.Domain, _ = r.get("domain")
	d.Detail, _ = r.get("blockers")
	d.Op = landlockOp(d.Detail)
	switch {
	case strings.HasPrefix(d.Detail, "net."):
		port := "dest"
		if d.Op == abi.DeniedBindTCP {
			port = "src"
		}
		d.Object, _ = r.get(port)
	case strings.HasPrefix(d.Detail, "scope.signal"), d.Detail == "ptrace":
		d.Object = "pid " + fieldOr(r, "opid", "?")
		if c, ok := r.get("ocomm"); ok {
			d.Object += " (" + value(c) + ")"
		}
	default:
		for _, k := range []string{"path", "name"} {
			if v, ok := r.get(k); ok {
				d.Object = value(v)
				break
			}
		}
	}
	return d
}

func fieldOr(r *record, key, def string) string {
	if v, ok := r.get(key); ok {
		return v
	}
	return def
}

// landlockOp is the operation of Landlock's blockers: the one of the
// first blocker, as they come together only for one operation (a rename
// refused both fs.refer and fs.make_reg is a write either way).
func landlockOp(blockers string) string {
	first, _, _ := strings.Cut(blockers, ",")
	switch first {
	case "fs.execute":
		return abi.DeniedExec
	case "fs.read_file", "fs.read_dir":
		return abi.DeniedRead
	case "fs.write_file", "fs.truncate", "fs.refer", "fs.ioctl_dev":
		return abi.DeniedWrite
	case "net.connect_tcp":
		return abi.DeniedConnectTCP
	case "net.bind_tcp":
		return abi.DeniedBindTCP
	}
	if strings.HasPrefix(first, "fs.make_") || strings.HasPrefix(first, "fs.remove_") {
		return abi.DeniedWrite
	}
	return abi.DeniedOther // scope.*, ptrace, fs.change_topology, what comes next
}

// Seccomp verdicts, as the record's code gives them: the action alone
// (SECCOMP_RET_ACTION_FULL), without the errno of an ERRNO verdict.
const (
	retKillProcess = 0x80000000
	retKillThread  = 0x00000000
	retTrap        = 0x00030000
	retErrno       = 0x00050000
	retUserNotif   = 0x7fc00000
	retTrace       = 0x7ff00000
	retLog         = 0x7ffc0000
	retAllow       = 0x7fff0000
	retActionFull  = 0xffff0000
)

// actionNames are the verdicts by the names kernel.seccomp.actions_logged
// gives them.
var actionNames = map[uint32]string{
	retKillProcess: "kill_process", retKillThread: "kill_thread", retTrap: "trap",
	retErrno: "errno", retUserNotif: "user_notif", retTrace: "trace",
}

// seccompDenial reads an AUDIT_SECCOMP record (kernel/auditsc.c), which
// comes alone, before the system call's audit context begins:
//
//	auid=4294967295 uid=2146435073 gid=2146435073 ses=4294967295 pid=18846
//	comm="unshare" exe="/usr/bin/unshare" sig=0 arch=c000003e syscall=272
//	compat=0 ip=0x7fda6df160f7 code=0x50000
//
// ok is false for a verdict that let the call through, and for the
// sandbox's clone3.
func seccompDenial(r *record) (d Denial, ok bool) {
	codeText, _ := r.get("code")
	code, err := strconv.ParseUint(strings.TrimPrefix(codeText, "0x"), 16, 32)
	if err != nil {
		return d, false
	}
	nr := r.int("syscall", -1)
	arch, _ := r.get("arch")
	action := uint32(code) & retActionFull
	switch {
	case action == retAllow, action == retLog:
		return d, false
	case action == retErrno && nr == clone3 && arch == nativeArch:
		return d, false
	}
	d.Detail = actionNames[action]
	if d.Detail == "" {
		d.Detail = fmt.Sprintf("verdict %#x", action)
	}
	d.Reporter = ReporterSeccomp
	d.Op = abi.DeniedSyscall
	d.PID = r.int("pid", 0)
	d.UID = r.int("uid", -1)
	d.Object = syscallName(arch, nr)
	if v, ok := r.get("exe"); ok {
		d.Exe = value(v)
	}
	return d, true
}

// syscallName names system call nr of the audit architecture arch (hex,
// as the record writes it): its name on this machine's architecture, else
// "syscall NR" with the architecture when it is a foreign one.
func syscallName(arch string, nr int) string {
	if arch == nativeArch {
		if name, ok := syscallNames[nr]; ok {
			return name
		}
		return "syscall " + strconv.Itoa(nr)
	}
	return fmt.Sprintf("syscall %d of architecture %s", nr, arch)
}

// nativeArch is this machine's AUDIT_ARCH_* as records write it.
var nativeArch = strconv.FormatUint(uint64(auditArch), 16)

// uidOf is the real uid of process pid now, from /proc; -1 when it is
// gone. A Landlock refusal outside a system call's audit context (a
// process forked before audit was turned on has none) names the process
// alone; it is asked at once, while it most likely still runs.
func uidOf(pid int) int {
	if pid <= 0 {
		return -1
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				if n, err := strconv.Atoi(f[0]); err == nil {
					return n
				}
			}
		}
	}
	return -1
}
