package sandbox

import (
	"time"
)

// Policy is a resolved sandbox: what one native binary may touch. Paths are
// absolute and free of variables; an empty list grants nothing. The kernel
// builds a Policy from a skill manifest (proc.SkillPolicy) or the default
// profile ([Default]); [Command] works it out into the plan the helper
// enforces before execve.
type Policy struct {
	// Filesystem (Landlock). Read grants reading files and listing
	// folders under each path; Write grants creating, writing, truncating,
	// renaming and removing under each path (and reading it); Exec grants
	// executing the files under each path (and reading them).
	Read  []string
	Write []string
	Exec  []string

	// Network. TCP connect and bind are allowed to the listed ports only
	// (Landlock); UDP and unix sockets are refused unless granted (seccomp).
	ConnectTCP []uint16
	BindTCP    []uint16
	UDP        bool
	// Unix lists the pathname unix sockets the binary may connect to; any
	// entry lets it create AF_UNIX sockets.
	Unix []string
	// Hosts are the host names (manifest [net] hosts entries) the binary
	// may reach, only through the kernel's egress proxy: the sandbox
	// itself grants nothing for them. The launcher starts the proxy for
	// the tree, adds its port to ConnectTCP and its address to Env
	// (HTTPS_PROXY and the others); without that, Hosts reach nothing.
	Hosts []string

	// IPC hands the binary a connection to the kernel (Cmd.SetIPC) as
	// descriptor 3, named by KAIRO_IPC_FD: the only way out of the
	// sandbox to the kernel, served with the skill's [ipc] scopes only.
	IPC bool

	// Env is the binary's whole environment: nothing else is inherited.
	Env []string
	// Dir is its working directory.
	Dir string

	Limits Limits

	// UID and GID the binary runs as; -1 keeps the kernel's (only when the
	// kernel is not root: root always drops).
	UID int
	GID int

	// MinLandlockABI refuses to run on a kernel whose Landlock is older.
	MinLandlockABI int
	// BestEffort runs even when this kernel cannot enforce every grant
	// exactly, enforcing what it can; [Unenforced] says what is not enforced.
	// It is the operator's explicit choice, never a default.
	BestEffort bool

	// LogDenials has Landlock log the refusals of the target and what it
	// execs, and the seccomp filter log its own, to the audit subsystem:
	// set by a kernel that reads them there (kairo.sandbox.denied). Off,
	// a sandbox adds nothing to the audit log.
	LogDenials bool

	// SkipSeccomp leaves the seccomp filter off. It exists for the
	// ablation tests that show each rule of the filter is load-bearing;
	// nothing outside tests sets it.
	SkipSeccomp bool
	// SharedProc leaves the host's /proc where a root kernel gives the
	// sandbox one of its own (see procfs.go). Like SkipSeccomp it exists
	// for the ablation test, and for the benchmark that measures what the
	// private /proc costs; nothing outside tests sets it.
	SharedProc bool
}

// Limits are the resource limits of a sandboxed binary; zero is no limit
// (core dumps, RLIMIT_CORE, are always 0).
type Limits struct {
	CPUSeconds  uint64        // RLIMIT_CPU: SIGXCPU, then SIGKILL
	Memory      uint64        // RLIMIT_AS, bytes
	Processes   uint64        // RLIMIT_NPROC
	FileSize    uint64        // RLIMIT_FSIZE, bytes: SIGXFSZ
	OpenFiles   uint64        // RLIMIT_NOFILE
	Wall        time.Duration // killed by the kernel after this long
	OutputBytes uint64        // output beyond this is dropped
	OutputRate  uint64        // bytes per second per stream
}
