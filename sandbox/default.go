package sandbox

import (
	"os"
	"slices"
	"strings"
	"sync"
)

// System folders every profile may read: programs, libraries, and the few
// files of /etc that the C library and common tools read at start. Not /etc
// as a whole, not /home, not /root, not /var, not /sys, no devices but the
// data sinks and sources.
var systemRead = []string{
	"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/localtime", "/etc/locale.alias", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
	"/etc/alternatives", "/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/mime.types",
	"/proc",
}

// systemExec are the folders of installed programs.
var systemExec = []string{"/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/lib", "/usr/libexec", "/usr/local/bin"}

// systemFolders are the system folders this machine has, looked up once:
// every spawn without a manifest needs them.
var systemFolders = sync.OnceValue(func() struct{ read, exec []string } {
	return struct{ read, exec []string }{existing(systemRead), existing(systemExec)}
})

// pathFacts is what the plan needs to know of a path: whether it exists,
// whether it is a folder (links followed), and the path with every link on
// the way resolved (linkFree), the path itself when it does not resolve.
type pathFacts struct {
	exists, dir bool
	real        string
}

// systemPaths are the facts of the system folders and the devices every
// profile grants, looked up once as [systemFolders] are: they are in every
// default profile, and stat'ing and resolving them again for each spawn
// was a seventh of its time. A system folder that became a link since
// grants nothing (the helper opens the resolved path without following
// links); one made since is not granted until the kernel restarts.
var systemPaths = sync.OnceValue(func() map[string]pathFacts {
	m := map[string]pathFacts{}
	for _, list := range [][]string{systemRead, systemExec, devReadWrite, devRead} {
		for _, p := range list {
			m[p] = lookPathFacts(p)
		}
	}
	return m
})

// factsOf is path's facts: a system path's from [systemPaths], any other's
// looked up now.
func factsOf(path string) pathFacts {
	if f, ok := systemPaths()[path]; ok {
		return f
	}
	return lookPathFacts(path)
}

func lookPathFacts(path string) pathFacts {
	fi, err := os.Stat(path)
	if err != nil {
		return pathFacts{real: path}
	}
	return pathFacts{exists: true, dir: fi.IsDir(), real: linkFree(path)}
}

// DefaultPath is the PATH of a sandboxed binary that was not given one.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// DefaultLimits are the resource limits of the default profile: finite,
// and wide enough that a compiler, an interpreter or an MCP server runs
// under them. Each is an rlimit of every process of the tree; the cgroup of
// the tree, where there is one, bounds the tree as a whole. A launcher
// configured otherwise (the [sandbox] table of kairo.toml) sets
// [Policy.Limits] after [Default].
var DefaultLimits = Limits{
	// RLIMIT_NPROC counts every process and thread of the real uid. As
	// root the kernel gives each tree a uid of its own, so this bounds the
	// tree: a fork bomb stops at 256, while `make -j`, a Go or Java
	// program's threads and a test runner's workers fit. Not root, the
	// tree shares the kernel's uid and the count includes every process of
	// that uid (Gaps and `kairo sandbox check` say so).
	Processes: 256,
	// RLIMIT_AS bounds address space, not resident memory: runtimes reserve
	// far more than they touch. 4 GiB lets `go build`, python3, node and a
	// JVM (which sizes its heap to the limit) start and work; a node
	// program that instantiates WebAssembly needs about 10 GiB of
	// reservations and fails under it. One process cannot take the
	// machine's memory; the tree's total is the cgroup's to bound.
	Memory: 4 << 30,
	// RLIMIT_FSIZE: no single file past 1 GiB (a write beyond fails with
	// EFBIG, or SIGXFSZ kills); a workspace filled with many is the
	// workspace cap's to stop.
	FileSize: 1 << 30,
	// RLIMIT_CPU: one hour of CPU time per process, SIGXCPU then SIGKILL a
	// second later. A build or a test suite takes minutes; a spinning
	// process is stopped even when nobody watches it. A server that runs
	// for days at low load stays far from it.
	CPUSeconds: 3600,
	// RLIMIT_NOFILE: the conventional soft limit, here also the hard one,
	// so that a process cannot raise it to exhaust the kernel's tables.
	OpenFiles: 1024,
}

// BaseEnv is the environment every sandboxed binary starts from, whatever
// launched it: PATH and LANG. The daemon's own environment never reaches
// a child; a variable gets there only by name.
func BaseEnv() []string {
	return []string{"PATH=" + DefaultPath, "LANG=C.UTF-8"}
}

// Default is the profile of a spawn without a manifest: read-only system
// folders, write only to work (its workspace) and tmp, no network, no
// devices, [DefaultLimits]. env is added to a minimal environment ([BaseEnv],
// HOME=work, TMPDIR=tmp).
func Default(work, tmp string, env []string) *Policy {
	p := &Policy{
		Read:   slices.Clone(systemFolders().read), // the caller may add to them
		Exec:   slices.Clone(systemFolders().exec),
		Write:  []string{work, tmp},
		Dir:    work,
		UID:    -1,
		GID:    -1,
		Limits: DefaultLimits,
	}
	p.Env = MergeEnv(MergeEnv(BaseEnv(), []string{"HOME=" + work, "TMPDIR=" + tmp}), env)
	return p
}

// MergeEnv is base with the variables of over set on top.
func MergeEnv(base, over []string) []string {
	out := append([]string(nil), base...)
	for _, kv := range over {
		name, _, _ := strings.Cut(kv, "=")
		replaced := false
		for i, b := range out {
			if n, _, _ := strings.Cut(b, "="); n == name {
				out[i], replaced = kv, true
				break
			}
		}
		if !replaced {
			out = append(out, kv)
		}
	}
	return out
}
