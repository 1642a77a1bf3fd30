package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kairo-os/kairo/kernel/internal/egress"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sandbox"
	"golang.org/x/sys/unix"
)

// The uids the kernel gives sandboxes when it runs as root, by default:
// one of its own per process tree, with a primary gid of the same number
// that no group has, so that RLIMIT_NPROC counts that tree alone and every
// process of the tree — even one that left its session — can be found and
// killed by uid. No account on the machine has them. [sandbox] uid_base
// and uid_count in kairo.toml change the range.
const (
	UIDBase  = 0x7fe00000
	UIDCount = 1 << 16
)

// Sandboxed is the launcher of `kairo up`: every binary runs under the
// sandbox helper with the spec's policy, or the default profile when the
// spec has none.
type Sandboxed struct {
	// Helper is a binary that calls sandbox.HelperMain (kairo itself).
	Helper string
	// Root is where workspaces and temp folders are made; it must be
	// reachable (mode 0711 up the path) by the sandboxes' uids.
	Root string
	// BestEffort runs what this kernel cannot confine exactly, saying so.
	BestEffort bool
	// ServeIPC serves conn, the kernel's end of a socket pair, to a
	// process of tree running as uid with grants g: what it spawns joins
	// tree. Without it, a spec that asks for IPC is refused.
	ServeIPC func(conn *os.File, uid int, g manifests.IPCGrants, tree *Tree, skill string) error
	// Warm is how many helpers wait, started ahead of time, for the next
	// spawns: the start of a helper's Go runtime is then off the spawn's
	// path. 0 starts a helper for each spawn.
	Warm int
	// UIDBase and UIDCount are the range of the trees' uids (0: UIDBase
	// and UIDCount).
	UIDBase, UIDCount int
	// Home names the kernel's home in the uid locks, so that a sweep
	// kills what an earlier run of this home left and no other's.
	Home string
	// Limits replace the default profile's limits where set (non-zero).
	Limits sandbox.Limits
	// Cgroups, when set, puts every tree in a cgroup of its own under
	// this home's: kill, freeze and the memory and process limits act
	// there. Nil falls back to process groups and uids.
	Cgroups *CgroupHome
	// KeepWorkspaces keeps the workspaces the launcher makes after their
	// process ends; by default they are removed (Spec.KeepWorkspace keeps
	// one).
	KeepWorkspaces bool
	// WorkspaceMax caps a spawn's workspace and temp folder, in bytes (0:
	// no cap): RLIMIT_FSIZE bounds each file at once, and a check every
	// few seconds ends the tree of a spawn whose folders hold more.
	WorkspaceMax int64
	// StopGrace is how long a clean stop lets each tree end after
	// SIGTERM (Manager.Stop).
	StopGrace time.Duration
	// LogDenials has every sandbox log its refusals to the audit subsystem
	// (sandbox.Policy.LogDenials): set it, before the first spawn, when
	// something reads them there.
	LogDenials bool
	// Watchdog, when set, is stopped by Close.
	Watchdog *Watchdog
	// egressConfig, when set, adjusts the egress proxy of each tree whose
	// policy lists [net] hosts before it starts (see egress.go); tests
	// resolve names to their own servers with it.
	egressConfig func(*egress.Config)

	poolOnce sync.Once
	pool     chan *warmHelper
	filter   *sandbox.WarmFilter // the filter the next helper installs; mu
	// filterRun is the spawns' latest filter and how many spawns in a row
	// had it (mu): a filter is learned only after learnAfter of them.
	filterRun struct {
		f *sandbox.WarmFilter
		n int
	}
	taken    chan struct{}
	ended    chan struct{} // a spawn that took a waiting helper ended
	stop     chan struct{}
	poolDone chan struct{}

	mu    sync.Mutex
	inUse map[int]*os.File // the uids given out, and their locks
	// reserved are the uids an allocUID is taking the lock of.
	reserved map[int]bool
	next     int
	launch   atomic.Uint64

	sizes   sizeCheck
	janitor janitor
	egress  egressTrees
}

func (l *Sandboxed) uidRange() (base, count int) {
	base, count = l.UIDBase, l.UIDCount
	if base <= 0 || count <= 0 {
		return UIDBase, UIDCount
	}
	return base, count
}

// nextName is a fresh name for a spawn's folders.
func (l *Sandboxed) nextName() string {
	return strconv.FormatUint(l.launch.Add(1), 10) + "-" + strconv.Itoa(os.Getpid())
}

// folders makes a spawn's temp folder and, when cwd is "" and keep is
// not set, its workspace. On failure tmp is "" and work says why.
func (l *Sandboxed) folders(cwd string, keep bool) (tmp, work string, made bool) {
	n := l.nextName()
	tmp = filepath.Join(l.Root, "tmp", n)
	if err := mkdirReachable(tmp); err != nil {
		return "", err.Error(), false
	}
	if cwd != "" || keep {
		return tmp, cwd, false
	}
	work = filepath.Join(l.Root, "work", n)
	if err := mkdirReachable(work); err != nil {
		os.RemoveAll(tmp)
		return "", err.Error(), false
	}
	return tmp, work, true
}

// overrideLimits sets each limit of p that o sets.
func overrideLimits(p *sandbox.Limits, o sandbox.Limits) {
	set := func(dst *uint64, v uint64) {
		if v != 0 {
			*dst = v
		}
	}
	set(&p.CPUSeconds, o.CPUSeconds)
	set(&p.Memory, o.Memory)
	set(&p.Processes, o.Processes)
	set(&p.FileSize, o.FileSize)
	set(&p.OpenFiles, o.OpenFiles)
	set(&p.OutputBytes, o.OutputBytes)
	set(&p.OutputRate, o.OutputRate)
	if o.Wall != 0 {
		p.Wall = o.Wall
	}
}

// After a helper was taken, the pool starts the next refillEnd after the
// spawn that took it ended, or refillMax after the take when it runs on;
// refillAfter after the take when no helper is left waiting, as in a burst
// of spawns, where the next would otherwise start a helper of its own.
// Not while the spawn runs: starting a helper (a Go runtime's start, its
// cgroup, folders and uid) takes a core for a couple of milliseconds, and
// on a machine of few cores it delayed the spawn's exit, reap and exited
// event by as much. Nor as its exited event goes out, which it delayed
// too, nor while a spawn that came right after it runs: 5 ms after the
// end landed in the middle of the next spawn's (12-15 ms on 2 loaded
// cores), 15 ms after it mostly past it. Never at once: a helper being
// started holds copies of the kernel's descriptors until its exec, the
// output pipes of the spawn just handed off among them, whose end of
// output would wait for it.
const (
	refillAfter = 5 * time.Millisecond
	refillEnd   = 15 * time.Millisecond
	refillMax   = 50 * time.Millisecond
)

// warmHelper is a helper started ahead of time, waiting on ctl, with a
// temp folder and a workspace made for its spawn and, with cgroups, in a
// tree cgroup made for it, bounded by the default profile's limits.
type warmHelper struct {
	cmd          *exec.Cmd
	ctl          *os.File
	cg           *cgroup
	memory, pids uint64 // the cgroup's limits
	tmp, work    string
	// uid, when the kernel is root, is the uid of the tree the helper's
	// spawn will most likely start, given out ahead, with tmp and work
	// given to it; 0 once a spawn took it, or when there is none.
	uid int
	// filter is the seccomp filter the helper installed while it waits
	// (nil: none): it runs only a spawn that has it.
	filter *sandbox.WarmFilter
	// mntns, when the kernel is root, is the helper's mount namespace,
	// which it made for its private /proc (sandbox/procfs.go), held open
	// so that the target's exit does not drop its last reference: the
	// kernel tears a mount namespace down inside the exit of its last
	// process, waiting for an RCU grace period (namespace_unlock), and
	// tells the parent only after it — 2 to 6 ms on 2 loaded cores,
	// against 0.1 ms for an exit without one. The spawn's cleanup
	// closes it after the exited event, off the exit's path.
	mntns *os.File
}

// holdMountNS opens the mount namespace of the waiting helper pid: it
// made it before it said it was ready.
func holdMountNS(pid int) *os.File {
	if os.Geteuid() != 0 {
		return nil // no private /proc, no namespace of its own
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/mnt")
	if err != nil {
		return nil // the exit then tears it down, as without this
	}
	return f
}

// closeLater closes f, a held mount namespace, off the caller's path:
// the last close tears the namespace down, which takes milliseconds.
func (l *Sandboxed) closeLater(f *os.File) {
	if f != nil {
		l.janitor.do(func() { f.Close() })
	}
}

// discard ends a helper that will not get its spawn, and removes what was
// made for it.
func (l *Sandboxed) discard(w *warmHelper) {
	w.ctl.Close() // the helper exits when its control socket closes
	w.cmd.Process.Kill()
	w.cmd.Wait()
	forgetLeader(w.cmd.Process.Pid)
	l.closeLater(w.mntns)
	uid := w.uid // nothing ever ran as it
	l.janitor.do(func() {
		if w.cg != nil {
			w.cg.remove()
		}
		if w.tmp != "" {
			os.RemoveAll(w.tmp)
			os.RemoveAll(w.work)
		}
		if uid > 0 {
			l.free(uid)
		}
	})
}

// takeWarm returns a waiting helper, or nil when none waits (the spawn
// then starts its own).
func (l *Sandboxed) takeWarm() *warmHelper {
	if l.Warm <= 0 {
		return nil
	}
	l.poolOnce.Do(l.startPool)
	select {
	case w := <-l.pool:
		select {
		case l.taken <- struct{}{}:
		default:
		}
		return w
	default:
		return nil
	}
}

// startPool starts the goroutine that keeps Warm helpers waiting; Close
// stops it.
func (l *Sandboxed) startPool() {
	p := sandbox.Default("", "", nil)
	p.LogDenials = l.LogDenials
	l.learnFilter(sandbox.WarmFilterOf(p))
	l.pool = make(chan *warmHelper, l.Warm)
	l.taken = make(chan struct{}, 1)
	l.ended = make(chan struct{}, 1)
	l.stop = make(chan struct{})
	l.poolDone = make(chan struct{})
	go func() {
		defer close(l.poolDone)
		for {
			for len(l.pool) < cap(l.pool) {
				l.mu.Lock()
				filter := l.filter
				l.mu.Unlock()
				w, err := l.startWarm(filter)
				if err != nil {
					break // spawns start their own until the next try
				}
				l.pool <- w
			}
			select {
			case <-l.taken:
				select { // an end of an earlier spawn's
				case <-l.ended:
				default:
				}
				if !l.refillWait() {
					return
				}
			case <-time.After(time.Second):
			case <-l.stop:
				return
			}
		}
	}()
}

// refillWait waits, after a helper was taken, for the time to start the
// next (see refillEnd); false when the pool stops.
func (l *Sandboxed) refillWait() bool {
	wait := refillMax
	if len(l.pool) == 0 {
		wait = refillAfter
	}
	late := time.NewTimer(wait)
	defer late.Stop()
	select {
	case <-l.ended:
		late.Reset(refillEnd)
		select {
		case <-late.C:
		case <-l.stop:
			return false
		}
	case <-late.C:
	case <-l.stop:
		return false
	}
	return true
}

// learnFilter makes f the seccomp filter the helpers started from now on
// install while they wait: at first the default profile's.
func (l *Sandboxed) learnFilter(f *sandbox.WarmFilter) {
	l.mu.Lock()
	l.filter = f
	l.mu.Unlock()
}

// learnAfter is how many spawns in a row must have one filter before the
// waiting helpers install it.
const learnAfter = 4

// sawFilter counts a spawn's filter f, and whether the helper it took
// fitted it. A helper that did not fit is replaced on the spawn's path
// (fitHelper), so the helpers started next install none, which fits any
// spawn at the price of installing its filter at exec (a third of a
// millisecond): spawns that alternate kinds (sockets granted or not) pay
// that, not a helper's start each. Once learnAfter spawns in a row had
// one filter, the helpers install it ahead again.
func (l *Sandboxed) sawFilter(f *sandbox.WarmFilter, fitted bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	run := &l.filterRun
	if run.n > 0 && sameFilter(run.f, f) {
		run.n++
	} else {
		run.f, run.n = f, 1
	}
	switch {
	case !fitted:
		l.filter = nil
	case run.n >= learnAfter:
		l.filter = run.f
	}
}

// sameFilter reports whether a and b (nil: none) are one filter.
func sameFilter(a, b *sandbox.WarmFilter) bool {
	return a == b || a != nil && b != nil && *a == *b
}

// warmEnded tells the pool that a spawn that took a waiting helper ended.
func (l *Sandboxed) warmEnded() {
	select {
	case l.ended <- struct{}{}:
	default:
	}
}

// startHelper starts a waiting helper's process, with filter installed
// while it waits, registered as a leader so that the orphan reaper leaves
// its exit to its exec.Cmd. leaders.mu is held across the fork alone, not
// while the helper's runtime starts: every spawn's start and every exit's
// reap take it, and the pool's refill, a helper started 5 ms after a
// spawn ended, held them up for that start — milliseconds on 2 loaded
// cores, paid by the next spawn when spawns came back to back.
func (l *Sandboxed) startHelper(filter *sandbox.WarmFilter) (*exec.Cmd, *os.File, error) {
	leaders.mu.Lock()
	cmd, ctl, err := sandbox.BeginWarm(l.Helper, filter)
	if err == nil {
		leaders.pids[cmd.Process.Pid] = true
	}
	leaders.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	if err := sandbox.WaitWarm(cmd, ctl); err != nil {
		forgetLeader(cmd.Process.Pid) // reaped by WaitWarm
		return nil, nil, err
	}
	return cmd, ctl, nil
}

// startWarm starts one waiting helper, with filter installed while it
// waits (nil: none), its folders, its uid and, with cgroups, its cgroup.
func (l *Sandboxed) startWarm(filter *sandbox.WarmFilter) (*warmHelper, error) {
	cmd, ctl, err := l.startHelper(filter)
	if err != nil {
		return nil, err
	}
	w := &warmHelper{cmd: cmd, ctl: ctl, filter: filter, mntns: holdMountNS(cmd.Process.Pid)}
	fail := func(err error) (*warmHelper, error) {
		ctl.Close()
		cmd.Process.Kill()
		cmd.Wait()
		forgetLeader(cmd.Process.Pid)
		if w.mntns != nil {
			w.mntns.Close()
		}
		if w.cg != nil {
			w.cg.remove()
		}
		if w.tmp != "" {
			os.RemoveAll(w.tmp)
			os.RemoveAll(w.work)
		}
		return nil, err
	}
	if l.Cgroups != nil {
		if w.cg, err = l.Cgroups.newTree(); err != nil {
			return fail(err)
		}
		if err = w.cg.add(cmd.Process.Pid); err != nil {
			return fail(err)
		}
		// The default profile's limits, which most spawns have: such a
		// spawn writes none. They are wide enough for the helper.
		lim := sandbox.DefaultLimits
		overrideLimits(&lim, l.Limits)
		if err = w.cg.setLimits(lim.Memory, lim.Processes, true); err != nil {
			return fail(err)
		}
		w.memory, w.pids = lim.Memory, lim.Processes
	}
	if l.Root != "" {
		tmp, work, _ := l.folders("", false)
		if tmp == "" {
			return fail(errors.New(work))
		}
		w.tmp, w.work = tmp, work
	}
	if os.Geteuid() == 0 {
		// Taking a uid's lock and giving it the folders cost a spawn a
		// fifth of a millisecond: done here, off its path.
		if w.uid, err = l.allocUID(); err != nil {
			return fail(err)
		}
		if w.tmp != "" {
			os.Chown(w.tmp, w.uid, w.uid)
			os.Chown(w.work, w.uid, w.uid)
		}
	}
	return w, nil
}

// DefaultStopGrace is the clean stop's grace of kairo.toml's defaults.
const DefaultStopGrace = 5 * time.Second

// Scratch are the folders under Root a kernel's end removes: the temp
// folders and the workspaces, but not those kept.
func (l *Sandboxed) Scratch() []string {
	return []string{filepath.Join(l.Root, "tmp"), filepath.Join(l.Root, "work")}
}

// RemoveScratch removes the Scratch folders; their processes must be gone.
func (l *Sandboxed) RemoveScratch() {
	for _, d := range l.Scratch() {
		os.RemoveAll(d)
	}
}

// Close ends the waiting helpers, the workspace size check and the
// watchdog. Spawns after Close start their own helpers.
func (l *Sandboxed) Close() {
	l.sizes.close()
	defer l.janitor.close()
	if l.Watchdog != nil {
		defer l.Watchdog.Stop()
	}
	l.poolOnce.Do(func() {}) // no pool starts after this
	if l.stop == nil {
		return
	}
	close(l.stop)
	<-l.poolDone
	for {
		select {
		case w := <-l.pool:
			l.discard(w)
		default:
			return
		}
	}
}

// unpassable is the first folder on the way to path that uid (with gid uid
// and no groups) may not search, by its mode; "" when there is none.
func unpassable(path string, uid int) string {
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			return ""
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return ""
		}
		var bit os.FileMode = 0o001
		switch {
		case int(st.Uid) == uid:
			bit = 0o100
		case int(st.Gid) == uid:
			bit = 0o010
		}
		if fi.Mode().Perm()&bit == 0 {
			return dir
		}
		if dir == "/" {
			return ""
		}
	}
}

func modeOf(path string) os.FileMode {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Mode().Perm()
}

func ownerOf(path string) int {
	fi, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// mkdirReachable makes dir (mode 0700, for the sandbox uid it is given to)
// in a parent the sandbox uids may pass through but not list.
func mkdirReachable(dir string) error {
	err := os.Mkdir(dir, 0o700)
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// The first in its parent: make the parent, passable but not listable.
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o711); err != nil {
		return err
	}
	if err := os.Chmod(parent, 0o711); err != nil {
		return err
	}
	return os.Mkdir(dir, 0o700)
}

// connect makes the socket pair of a process's kernel connection: one end
// served with grants g, the other handed to the process.
func (l *Sandboxed) connect(c *sandbox.Cmd, uid int, g manifests.IPCGrants, tree *Tree, skill string) error {
	if l.ServeIPC == nil {
		return fmt.Errorf("the skill asks for [ipc] scopes, and this kernel serves no connections to skills")
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("kernel connection for the skill: %w", err)
	}
	kernelEnd, skillEnd := os.NewFile(uintptr(fds[0]), "kernel-end"), os.NewFile(uintptr(fds[1]), "skill-end")
	defer kernelEnd.Close() // the server keeps its own duplicate
	if uid < 0 {
		uid = os.Getuid()
	}
	if err := l.ServeIPC(kernelEnd, uid, g, tree, skill); err != nil {
		skillEnd.Close()
		return err
	}
	c.SetIPC(skillEnd)
	return nil
}

// ScratchRoot makes (afresh) the folder a [Sandboxed] launcher keeps its temp
// folders and scratch workspaces in: name, under a folder of this user's in
// /dev/shm when that is a tmpfs — making a folder on a disk filesystem costs
// a quarter of a millisecond per spawn on a virtual disk, on tmpfs a few
// microseconds — else in the system's temp folder. The path up to it may be
// passed through by the sandboxes' uids, not listed. It suits short-lived
// runs (`kairo run`, benchmarks); a kernel's workspaces go on disk
// ([DiskRoot]).
func ScratchRoot(name string) (string, error) {
	base := os.TempDir()
	var st unix.Statfs_t
	if unix.Statfs("/dev/shm", &st) == nil && st.Type == unix.TMPFS_MAGIC {
		base = "/dev/shm"
	}
	return rootIn(base, name, true)
}

// DiskRoot is [ScratchRoot] on disk: name under a folder of this user's in
// /var/tmp, so that what the workspaces hold takes disk, not memory. What
// is in it stays: RemoveScratch removes all but the workspaces kept.
func DiskRoot(name string) (string, error) {
	return rootIn("/var/tmp", name, false)
}

// rootIn makes base/kairo-EUID/name (afresh when fresh), passable (0711)
// by the sandboxes' uids.
func rootIn(base, name string, fresh bool) (string, error) {
	mine := filepath.Join(base, "kairo-"+strconv.Itoa(os.Geteuid()))
	if err := os.Mkdir(mine, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("sandbox scratch folder: %w", err)
	}
	// base is open to every user: the folder must be ours, not a link or a
	// folder someone else made there first.
	fi, err := os.Lstat(mine)
	if err != nil {
		return "", fmt.Errorf("sandbox scratch folder: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || !fi.IsDir() || int(st.Uid) != os.Geteuid() {
		return "", fmt.Errorf("sandbox scratch folder %s is not a folder of this user's: remove it", mine)
	}
	if err := os.Chmod(mine, 0o711); err != nil {
		return "", err
	}
	root := filepath.Join(mine, name)
	if fresh {
		if err := os.RemoveAll(root); err != nil {
			return "", fmt.Errorf("sandbox scratch folder: %w", err)
		}
	}
	if err := os.Mkdir(root, 0o711); err != nil && (fresh || !errors.Is(err, fs.ErrExist)) {
		return "", fmt.Errorf("sandbox scratch folder: %w", err)
	}
	if err := os.Chmod(root, 0o711); err != nil {
		return "", err
	}
	return root, nil
}

// NoProgramError is a spawn of a program by a bare name that is neither
// on the sandbox's PATH nor a shell builtin: "run progress-demo" with no
// such skill installed, or a typo. It is refused before anything starts,
// rather than left to a shell that exits 127.
type NoProgramError struct {
	Name string // as it was asked for
	Path string // the sandbox's PATH
}

// Error names the program, the PATH it was looked for on, and where the
// installed skills are listed.
func (e *NoProgramError) Error() string {
	return fmt.Sprintf("no program or skill named %s (not on the sandbox's PATH %s); `kairo tools` lists the skills", e.Name, e.Path)
}

// missingProgram is the bare program name argv runs that is not found on
// the PATH of env, or "". A shell line (/bin/sh -c LINE) is looked into:
// its first word, when it is a plain name followed by a blank or nothing,
// and not a builtin or a keyword of the shell. Anything else — a path,
// shell syntax, a word the shell may expand — is left to the exec and the
// shell.
func missingProgram(argv, env []string) string {
	if len(argv) == 0 {
		return ""
	}
	name := argv[0]
	if len(argv) == 3 && (name == "/bin/sh" || name == "/usr/bin/sh") && argv[1] == "-c" {
		line := strings.TrimLeft(argv[2], " \t")
		end := strings.IndexFunc(line, func(r rune) bool { return !plainNameRune(r) })
		switch {
		case end == 0:
			return ""
		case end > 0 && line[end] != ' ' && line[end] != '\t' && line[end] != '\n':
			return "" // "a=b", "f()", "x;": the shell's to read
		case end > 0:
			line = line[:end]
		}
		if slices.Contains(shellWords, line) {
			return ""
		}
		name = line
	}
	if name == "" || strings.ContainsRune(name, '/') || !strings.ContainsFunc(name, func(r rune) bool { return r != '.' }) {
		return ""
	}
	for _, dir := range filepath.SplitList(envPath(env)) {
		if !filepath.IsAbs(dir) {
			continue
		}
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && !fi.IsDir() {
			return "" // executable or not: the exec says which
		}
	}
	return name
}

// plainNameRune is a rune of a program name the shell takes as it is.
func plainNameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == '+'
}

// shellWords are the builtins and reserved words of sh (POSIX, and dash's
// and bash's common ones) a line may start with.
var shellWords = []string{
	".", ":", "alias", "bg", "break", "case", "cd", "command", "continue", "do", "done", "echo", "elif", "else",
	"esac", "eval", "exec", "exit", "export", "false", "fc", "fg", "fi", "for", "function", "getopts", "hash",
	"if", "in", "jobs", "kill", "local", "newgrp", "printf", "pwd", "read", "readonly", "return", "select",
	"set", "shift", "source", "test", "then", "time", "times", "trap", "true", "type", "ulimit", "umask",
	"unalias", "unset", "until", "wait", "while",
}

// envPath is the PATH of env, or the sandbox's default.
func envPath(env []string) string {
	path := sandbox.DefaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	return path
}
