// Package sandbox confines one native binary to a [Policy]: the paths it may
// read, write and execute, the ports and sockets it may use, its whole
// environment, its limits and its uid. It reads no manifest: the kernel
// resolves a Policy from a skill's (proc.SkillPolicy) or from the default
// profile ([Default]) and hands it here.
//
// [Command] works a Policy out into a plan and starts a helper — a re-exec of
// a binary that calls [HelperMain], or a warm helper [StartWarm] started ahead
// of the spawn — which applies the plan to itself and execs the target:
// closed descriptors, rlimits, a /proc of its own, one Landlock ruleset, an
// unprivileged uid with no supplementary groups, no_new_privs and a seccomp
// filter. Deny by default: a grant the running kernel cannot enforce
// ([Unenforced]) is refused unless the policy asks for best effort, and what
// only a root kernel bounds is named ([Gaps]). [Probe] and [WriteCheck] say what
// this machine enforces (`kairo sandbox check`), [Explain] what a policy
// applies to one target (`kairo run --explain`). Why a helper does the
// confining: docs/RATIONALE.md#a-helper-because-go-cannot-act-between-fork-and-exec.
//
// # The default profile
//
// Default is what a spawn without a manifest runs under (`kairo spawn`, the
// agent's commands, an MCP server without a sandbox table): read the
// system folders, write its workspace and temp folder, execute installed
// programs, no network, and an environment of PATH, LANG, HOME and TMPDIR
// plus what the caller names; the kernel's own environment never reaches
// it. Its limits are [DefaultLimits], each an rlimit of every process of the
// tree, hard and soft alike so that the process cannot raise it:
//
//   - processes 256 (RLIMIT_NPROC): counted per real uid, and as root every
//     tree has a uid of its own, so a fork bomb stops at 256 while a
//     parallel build fits. Not root, the tree shares the kernel's uid and
//     the count includes every process of that uid (Gaps says so).
//   - memory 4 GiB of address space (RLIMIT_AS): runtimes reserve more
//     than they use, and 4 GiB lets go build, python3, node and a JVM
//     start and work (TestDefaultLimits runs them). Node's WebAssembly
//     reserves about 10 GiB per instance and fails under it.
//   - file size 1 GiB (RLIMIT_FSIZE): a write past it fails with EFBIG.
//   - CPU one hour (RLIMIT_CPU): SIGXCPU, then SIGKILL a second later.
//   - open files 1024 (RLIMIT_NOFILE).
//   - core dumps 0, always.
//
// The tree's total memory and process count are its cgroup's to bound,
// where the kernel makes one. A launcher configured otherwise ([sandbox] in
// kairo.toml) sets [Policy.Limits] after Default.
//
// # What the seccomp filter takes away
//
// Besides the calls that reach other processes, the mount table,
// namespaces and the running of the host ([BuildFilter] lists them), the
// filter refuses objects that would outlive the tree or run code no grant
// names: System V shared memory, message queues and semaphores and POSIX
// message queues (EPERM; a pipe or a shared mapping of a file in the
// workspace works), and memfd_create without MFD_NOEXEC_SEAL (Linux 6.3),
// since a memfd is on no path for Landlock's execute right to reach. A
// sealed memfd can neither be executed nor made executable.
//
// # /proc
//
// A helper running as root (the kernel is root) gives the sandbox a mount
// namespace of its own, a slave of the host's, with a new procfs on /proc
// mounted hidepid=invisible,subset=pid: the sandbox sees its own processes
// only, and no /proc/net or /proc/sys. The Landlock rule for /proc is
// opened after the mount, so it grants the new procfs alone. A warm helper
// mounts it before it waits for a spawn, off the spawn's path. Without
// root the sandbox reads the host's /proc where it is granted (every
// process's command line, /proc/net/unix); Explain and `kairo sandbox
// check` report it.
package sandbox
