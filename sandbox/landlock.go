package sandbox

import (
	"fmt"
	"os"
	"strings"
	"sync"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Filesystem rights by the Landlock ABI that introduced them.
const (
	fsV1 = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSReadDir |
		ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar | ll.AccessFSMakeDir |
		ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeBlock |
		ll.AccessFSMakeSym
	fsV2 = fsV1 | ll.AccessFSRefer
	fsV3 = fsV2 | ll.AccessFSTruncate
	fsV5 = fsV3 | ll.AccessFSIoctlDev

	netTCP = ll.AccessNetBindTCP | ll.AccessNetConnectTCP
	scopes = ll.ScopeAbstractUnixSocket | ll.ScopeSignal
)

// The rights each kind of grant gives, before they are cut to what the
// kernel handles.
const (
	readDir   = ll.AccessFSReadFile | ll.AccessFSReadDir
	readFile  = ll.AccessFSReadFile
	execDir   = ll.AccessFSExecute | readDir
	execFile  = ll.AccessFSExecute | readFile
	writeFile = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
	// Everything but execute and device nodes: create, write, truncate,
	// rename and remove files, folders, links, fifos and sockets.
	writeDir = readDir | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSRemoveDir |
		ll.AccessFSRemoveFile | ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSym |
		ll.AccessFSMakeFifo | ll.AccessFSMakeSock | ll.AccessFSRefer
)

// Devices every sandbox may use: the data sinks and sources programs open
// without thinking. Nothing else under /dev.
var (
	devReadWrite = []string{"/dev/null", "/dev/zero", "/dev/full"}
	devRead      = []string{"/dev/random", "/dev/urandom"}
)

var abiOnce = sync.OnceValue(func() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
})

// LandlockABI is the Landlock ABI version of the running kernel; 0 when
// Landlock is missing or disabled.
func LandlockABI() int { return abiOnce() }

// handled is what a ruleset on a kernel at abi handles: every right that
// kernel knows, so that whatever a rule does not grant is denied.
func handled(abi int) ll.RulesetAttr {
	var a ll.RulesetAttr
	switch {
	case abi >= 5:
		a.HandledAccessFS = fsV5
	case abi >= 3:
		a.HandledAccessFS = fsV3
	case abi >= 2:
		a.HandledAccessFS = fsV2
	case abi >= 1:
		a.HandledAccessFS = fsV1
	}
	if abi >= 4 {
		a.HandledAccessNet = netTCP
	}
	if abi >= 6 {
		a.Scoped = scopes
	}
	return a
}

// grant is one Landlock path rule, for the explanation and the ruleset.
type grant struct {
	path   string
	real   string // path with its links resolved (linkFree), for the ruleset
	rights uint64
	kind   string // read, write, exec, device
}

// grants lists p's path rules. A path that does not exist grants nothing
// and is reported in missing.
func grants(p *Policy) (gs []grant, missing []string) {
	add := func(kind string, paths []string, dir, file uint64) {
		for _, path := range paths {
			if strings.HasPrefix(path, "$") { // a folder made at run time (explain)
				gs = append(gs, grant{path, path, dir, kind})
				continue
			}
			f := factsOf(path)
			if !f.exists {
				missing = append(missing, kind+" "+path)
				continue
			}
			r := file
			if f.dir {
				r = dir
			}
			gs = append(gs, grant{path, f.real, r, kind})
		}
	}
	add("read", p.Read, readDir, readFile)
	add("write", p.Write, writeDir, writeFile)
	add("exec", p.Exec, execDir, execFile)
	// ioctl on the sinks too: isatty(/dev/null) must answer ENOTTY, not
	// a refusal every program would make (and report) at its start.
	add("device", devReadWrite, 0, writeFile|ll.AccessFSIoctlDev)
	add("device", devRead, 0, readFile)
	return gs, missing
}

// applyRuleset confines the calling thread — the one that will exec — to
// the plan's Landlock rules, in one ruleset: the paths, the TCP ports and
// the scopes. The helper's other threads stay as they are and end with the
// exec; one thread is much cheaper to confine than all of them, which
// takes a signal to each. What Landlock leaves to the seccomp filter:
// docs/RATIONALE.md#landlock-and-seccomp-each-close-what-the-other-cannot.
func applyRuleset(p *plan) error {
	attr := p.ruleset
	if attr.HandledAccessFS == 0 {
		return nil // no Landlock here: the kernel ran the policy as best effort
	}
	fd, have := takePrepared(p)
	if fd < 0 {
		var err error
		if fd, err = ll.LandlockCreateRuleset(&attr, 0); err != nil {
			return fmt.Errorf("landlock: create ruleset: %w", err)
		}
	}
	defer unix.Close(fd)
	for _, r := range p.rules {
		if have[r] {
			continue
		}
		if _, err := addPathRule(fd, r); err != nil {
			return err
		}
	}
	for _, g := range []struct {
		ports  []uint16
		access uint64
	}{{p.connect, ll.AccessNetConnectTCP}, {p.bind, ll.AccessNetBindTCP}} {
		for _, port := range g.ports {
			if err := ll.LandlockAddNetPortRule(fd, &ll.NetPortAttr{AllowedAccess: g.access, Port: uint64(port)}, 0); err != nil {
				return fmt.Errorf("landlock: grant tcp port %d: %w", port, err)
			}
		}
	}
	var flags uint32
	if p.logDenials {
		flags = restrictFlags()
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock: restrict: %w", err)
	}
	return nil
}

// addPathRule adds r to the ruleset fd, and says whether it did. A path
// that is gone, or that has a link on the way now, grants nothing: the
// plan's paths have none (linkFree), so one was swapped in since, by
// someone who may write on the way — a sandbox racing its child's start.
func addPathRule(fd int, r rule) (bool, error) {
	pfd, err := unix.Openat2(unix.AT_FDCWD, r.path, &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return false, nil // gone or swapped since the policy was made
	}
	err = ll.LandlockAddPathBeneathRule(fd, &ll.PathBeneathAttr{AllowedAccess: r.rights, ParentFd: pfd}, 0)
	unix.Close(pfd)
	if err != nil {
		return false, fmt.Errorf("landlock: grant %s: %w", r.path, err)
	}
	return true, nil
}

// A warm helper makes, while it waits, a ruleset holding the rules of the
// system folders and devices the default profile grants, which most plans
// hold: a spawn then adds only its own (its workspace, its temp folder,
// /proc), a few calls instead of some sixty. A plan that does not hold
// every prepared rule — a manifest that grants less — gets a ruleset of
// its own, as from a helper started for it. /proc is never prepared: its
// rule must name the sandbox's own procfs. Rules name the inodes opened
// when they are added; a folder replaced since grants nothing new.
var prepared = struct {
	fd    int // -1: none
	attr  ll.RulesetAttr
	rules map[rule]bool
}{fd: -1}

// prepareRuleset makes the prepared ruleset, off the spawn's path.
func prepareRuleset() {
	abi := LandlockABI()
	if abi == 0 {
		return
	}
	attr := handled(abi)
	gs, _ := grants(&Policy{Read: systemFolders().read, Exec: systemFolders().exec})
	made, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return
	}
	// Above the descriptors a spawn's request puts in place (receive),
	// which would replace it.
	fd, err := unix.FcntlInt(uintptr(made), unix.F_DUPFD_CLOEXEC, ipcFD+1)
	unix.Close(made)
	if err != nil {
		return
	}
	rules := map[rule]bool{}
	for _, r := range pathRules(gs, attr.HandledAccessFS) {
		if r.path == "/proc" {
			continue
		}
		added, err := addPathRule(fd, r)
		if err != nil {
			unix.Close(fd)
			return
		}
		if added { // else the spawn tries it again
			rules[r] = true
		}
	}
	prepared.fd, prepared.attr, prepared.rules = fd, attr, rules
}

// takePrepared returns the prepared ruleset and its rules when p holds
// every one of them on the same terms; else it closes it and returns -1.
func takePrepared(p *plan) (int, map[rule]bool) {
	fd, rules := prepared.fd, prepared.rules
	prepared.fd, prepared.rules = -1, nil
	if fd < 0 {
		return -1, nil
	}
	held := 0
	for _, r := range p.rules {
		if rules[r] {
			held++
		}
	}
	if prepared.attr != p.ruleset || held != len(rules) {
		unix.Close(fd)
		return -1, nil
	}
	return fd, rules
}

// restrictFlags are landlock_restrict_self's flags on this kernel. By
// default Landlock logs only the refusals of the program that made the
// domain, which is the helper; from ABI 7 on, LOG_NEW_EXEC_ON logs those
// of the target and everything it execs too, so that the audit subsystem
// reports what the sandbox refused (internal/audit). Older ABIs reject
// the flag, and log nothing then.
func restrictFlags() uint32 {
	if LandlockABI() >= 7 {
		return unix.LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON
	}
	return 0
}

// existing is the paths of ps that exist on this machine.
func existing(ps []string) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}
