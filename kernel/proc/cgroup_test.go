package proc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sandbox"
)

var testHomes atomic.Uint64

// testCgroupHome makes a home cgroup of the test's own, removed once the
// test (and the manager that uses it, cleaned up before) is done; it
// skips the test where the host gives no cgroups.
func testCgroupHome(t *testing.T) *CgroupHome {
	t.Helper()
	needRoot(t)
	cgs, err := FindCgroups()
	if err != nil {
		t.Skipf("no cgroups: %v", err)
	}
	h, err := cgs.Home("kairo-test-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(testHomes.Add(1), 10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		killHome(h.dirs, h.Layout != CgroupV1)
		for _, d := range h.dirs {
			removeChildren(d)
			rmdirCgroup(d)
		}
	})
	return h
}

// newCgroupEnv is newSandboxEnv with every tree in a cgroup under a home
// of the test's own.
func newCgroupEnv(t *testing.T) (*env, *Sandboxed) {
	t.Helper()
	h := testCgroupHome(t) // cleaned up after the manager below
	// A uid range of its own: the orphans of a tree killed in another
	// test go to PID 1, and until it reaps them they count in their uid's
	// RLIMIT_NPROC.
	base := UIDBase + 4096*int(testHomes.Load()%16)
	l := &Sandboxed{Helper: sandboxHelper(t), Root: reachableDir(t, 0o711), Cgroups: h, UIDBase: base, UIDCount: 4096}
	t.Cleanup(l.Close)
	return newEnv(t, Config{Launcher: l}), l
}

// inCgroup reports whether pid is in the cgroup folder dir (v2, or the
// first hierarchy) or one below it.
func inCgroup(pid int, dir string) bool {
	for _, p := range procsUnder(dir) {
		if p == pid {
			return true
		}
	}
	return false
}

// waitOutput waits until out's stdout holds n whitespace-separated
// fields, and returns them.
func waitOutput(t *testing.T, out *collect, n int) []string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if f := strings.Fields(out.text("stdout")); len(f) >= n {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("stdout %q stderr %q: want %d fields", out.text("stdout"), out.text("stderr"), n)
		}
	}
}

// TestCgroupIdentity: a tree runs as a uid of the reserved range with a
// primary gid of the same number and no other group — also in a folder
// an ordinary user owns, which before chose that user — and the operator
// can still run it there.
func TestCgroupIdentity(t *testing.T) {
	e, _ := newCgroupEnv(t)
	owned := reachableDir(t, 0o755)
	if err := os.Chown(owned, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	for _, cwd := range []string{"", owned} {
		_, info, out := e.run(Spec{Argv: []string{"sh", "-c", "id -u; id -g; id -G; pwd"}, Cwd: cwd})
		f := strings.Fields(out.text("stdout"))
		if !exitedWith(info, 0) || len(f) != 4 {
			t.Fatalf("cwd %q: %+v, stdout %q stderr %q", cwd, info, out.text("stdout"), out.text("stderr"))
		}
		uid, _ := strconv.Atoi(f[0])
		if uid < UIDBase || uid >= UIDBase+UIDCount || f[1] != f[0] || f[2] != f[0] { // the range's default
			t.Errorf("cwd %q: uid %s gid %s groups %s: want one uid of the range, its gid the same number, no other group", cwd, f[0], f[1], f[2])
		}
		if cwd != "" && f[3] != cwd {
			t.Errorf("ran in %s, want %s", f[3], cwd)
		}
	}
	// The folder's DAC decides: the tree may not write a 0755 folder of
	// another user's.
	_, info, out := e.run(Spec{Argv: []string{"sh", "-c", "echo x > f || echo refused"}, Cwd: owned})
	if !exitedWith(info, 0) || strings.TrimSpace(out.text("stdout")) != "refused" {
		t.Errorf("write into a 0755 folder of uid 65534: %+v %q", info, out.text("stdout"))
	}
}

// TestCgroupCancelKillsDaemonized: a tree in its cgroup whose child
// daemonizes (setsid, then fork, the parent exits) is fully killed by a
// cancel; the control, a plain spawn in a cgroup, runs to its exit.
func TestCgroupCancelKillsDaemonized(t *testing.T) {
	e, l := newCgroupEnv(t)
	_, info, out := e.run(Spec{Argv: []string{"sh", "-c", "echo ran; exit 3"}})
	if !exitedWith(info, 3) || out.text("stdout") != "ran\n" {
		t.Fatalf("control: %+v %q %q", info, out.text("stdout"), out.text("stderr"))
	}

	out = &collect{}
	s := e.spawn(Spec{Argv: []string{"sh", "-c", `
		setsid sh -c 'sh -c "trap \"\" TERM HUP; echo \$\$; exec sleep 300" & exit 0' &
		echo $$; wait; exec sleep 300`}, CorrelationID: "daemon"}, out)
	ps := pids(t, strings.Join(waitOutput(t, out, 2), " "))
	home := l.Cgroups.dirs[0]
	for _, pid := range ps {
		if !running(pid) || !inCgroup(pid, home) {
			t.Fatalf("pid %d: running %v, in the home's cgroup %v", pid, running(pid), inCgroup(pid, home))
		}
	}
	if ids := e.m.Cancel("daemon", "test"); len(ids) != 1 || ids[0] != s.ID() {
		t.Fatalf("Cancel = %v", ids)
	}
	for _, pid := range ps {
		if !gone(pid) {
			t.Errorf("pid %d survived the cancel of its tree", pid)
		}
	}
	if n := procsUnder(home); len(n) != 0 {
		t.Errorf("processes left in the home's cgroup: %v", n)
	}
}

// TestCgroupPidsLimit: a fork bomb stops at the tree's process limit,
// counted in its cgroup; a tree within the limit starts every child.
func TestCgroupPidsLimit(t *testing.T) {
	e, l := newCgroupEnv(t)
	if !l.Cgroups.Limits {
		t.Skip("the host's cgroups bound no process counts")
	}
	limited := func(script string) Spec {
		return Spec{Argv: []string{"sh", "-c", script}, Policy: func(work, tmp string) (*sandbox.Policy, error) {
			p := sandbox.Default(work, tmp, nil)
			p.Limits.Processes = 10
			return p, nil
		}}
	}
	out := &collect{}
	s := e.spawn(limited(`echo start; sh -c 'for i in $(seq 50); do sleep 30 & done'; echo forked; exec sleep 30`), out)
	waitOutput(t, out, 2)
	tree := s.tree.cg
	if n := len(procsUnder(tree.dirs[0])); n > 10 || n < 5 {
		ev, _ := os.ReadFile(filepath.Join(tree.limitDir("pids"), "pids.events"))
		t.Errorf("%d processes in the tree's cgroup with processes = 10 (pids.events %q, stderr %q)", n, ev, out.text("stderr"))
	}
	if b, _ := os.ReadFile(filepath.Join(tree.limitDir("pids"), "pids.max")); strings.TrimSpace(string(b)) != "10" {
		t.Errorf("pids.max = %q, want 10", b)
	}
	s.Signal(syscall.SIGKILL)
	wait(t, s)

	_, info, out := e.run(limited(`for i in $(seq 5); do sleep 0.1 & done; wait; echo ok`))
	if !exitedWith(info, 0) || out.text("stdout") != "ok\n" {
		t.Errorf("5 children with processes = 10: %+v %q %q", info, out.text("stdout"), out.text("stderr"))
	}
}

// limitDir is the folder that holds the controller's limit of cg.
func (cg *cgroup) limitDir(controller string) string {
	if cg.home.Layout == CgroupV2 {
		return cg.dirs[0]
	}
	return cg.v1(controller)
}

// TestCgroupMemoryLimit: processes of a tree that together take more than
// its memory limit are OOM-killed in its cgroup, and the exit says so; a
// tree that stays under it exits cleanly.
func TestCgroupMemoryLimit(t *testing.T) {
	e, l := newCgroupEnv(t)
	if !l.Cgroups.Limits {
		t.Skip("the host's cgroups bound no memory")
	}
	limited := func(script string) Spec {
		return Spec{Argv: []string{"sh", "-c", script}, Policy: func(work, tmp string) (*sandbox.Policy, error) {
			p := sandbox.Default(work, tmp, nil)
			p.Limits.Memory = 256 << 20
			return p, nil
		}}
	}
	// Each tail holds the 96 MB "line" it reads until its input ends:
	// four of them pass 256 MiB together, each under it alone. (The limit
	// is not smaller: when the helper was this test binary, what of it the
	// helper read into the page cache, which this test process maps too,
	// was charged to the tree and could not be reclaimed — with 64 MiB,
	// writing the limit failed with EBUSY on a loaded machine.)
	over := limited(`
		for i in 1 2 3 4; do (head -c 96000000 /dev/zero; sleep 3) | tail > /dev/null & done
		wait; echo done`)
	s, info, out := e.run(over)
	for try := 0; try < 3 && strings.Contains(out.text("stderr"), "pthread_create failed"); try++ {
		s, info, out = e.run(over) // see below
	}
	_, data := e.event("kairo.process.exited", s.ID())
	reason, _ := data["reason"].(string)
	if !exitedWith(info, 0) || !strings.Contains(reason, "OOM-killed") || !strings.Contains(reason, strconv.Itoa(256<<20)) {
		t.Errorf("over the memory limit: %+v, reason %q, stderr %q: want an OOM kill reported", info, reason, out.text("stderr"))
	}
	s, info, out = e.run(limited(`head -c 8000000 /dev/zero | tail > /dev/null; echo done`))
	for try := 0; try < 3 && strings.Contains(out.text("stderr"), "pthread_create failed"); try++ {
		// A helper built with cgo (this test binary once, then a `go
		// build` of kairo) starts threads with pthread_create, whose
		// stacks a memory limit (RLIMIT_AS) set before may not fit. The
		// helper is now testkit's static kairo, which makes no such
		// thread; the retry stays for a helper built otherwise.
		s, info, out = e.run(limited(`head -c 8000000 /dev/zero | tail > /dev/null; echo done`))
	}
	if _, data := e.event("kairo.process.exited", s.ID()); !exitedWith(info, 0) || data["reason"] != nil {
		t.Errorf("under the memory limit: %+v %v, stderr %q", info, data, out.text("stderr"))
	}
}

// TestCgroupPauseResume: SIGSTOP freezes the whole tree — a child that
// left the session too — and SIGCONT thaws it.
func TestCgroupPauseResume(t *testing.T) {
	e, _ := newCgroupEnv(t)
	out := &collect{}
	s := e.spawn(Spec{Argv: []string{"sh", "-c", `setsid sh -c 'while :; do echo t; sleep 0.02; done' & wait`}}, out)
	waitOutput(t, out, 3)
	if err := s.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cg := s.l.cg
	for deadline := time.Now().Add(30 * time.Second); !cg.frozen(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the tree's cgroup did not freeze")
		}
	}
	n := len(out.text("stdout"))
	time.Sleep(200 * time.Millisecond) // a frozen tree prints nothing, however long
	if m := len(out.text("stdout")); m != n {
		t.Errorf("the frozen tree printed %d bytes", m-n)
	}
	if err := s.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, out, n/2+3) // "t\n" per line: n/2 fields so far
	s.Signal(syscall.SIGKILL)
	if info := wait(t, s); info.Status != abi.ProcessKilled {
		t.Errorf("after SIGKILL: %+v", info)
	}
}

// TestCgroupTreeMembers: a spawn with a Parent runs as the parent tree's
// uid, in a cgroup inside the tree's, in its run loop; it is killed when
// the tree's root ends, and then the tree takes no more members. A spawn
// without a Parent is a tree of its own (the control).
func TestCgroupTreeMembers(t *testing.T) {
	e, _ := newCgroupEnv(t)
	rootOut := &collect{}
	root := e.spawn(Spec{Argv: []string{"sh", "-c", "id -u; exec sleep 300"}, CorrelationID: "loop-1", CausationID: "ev-1"}, rootOut)
	rootUID := waitOutput(t, rootOut, 1)[0]

	memOut := &collect{}
	member := e.spawn(Spec{Argv: []string{"sh", "-c", "id -u; exec sleep 300"}, Parent: root}, memOut)
	if got := waitOutput(t, memOut, 1)[0]; got != rootUID {
		t.Errorf("the member runs as uid %s, its tree as %s", got, rootUID)
	}
	if member.Tree() != root.Tree() || member.Tree().Root() != root {
		t.Errorf("the member's tree is not its parent's")
	}
	if i := member.Info(); i.CorrelationID != "loop-1" || i.CausationID != "ev-1" {
		t.Errorf("the member's correlation %q causation %q, want the parent's", i.CorrelationID, i.CausationID)
	}
	if !inCgroup(member.Info().PID, root.l.cg.dirs[0]) || member.l.cg.parent != root.l.cg {
		t.Errorf("the member is not in a cgroup inside its tree's")
	}

	otherOut := &collect{}
	other := e.spawn(Spec{Argv: []string{"sh", "-c", "id -u; exec sleep 300"}}, otherOut)
	if got := waitOutput(t, otherOut, 1)[0]; got == rootUID || other.Tree() == root.Tree() {
		t.Errorf("a spawn without a Parent joined a tree (uid %s)", got)
	}

	// The root ends (as a skill at its wall limit): the member dies with it.
	root.Terminate(time.Second)
	wait(t, root)
	select {
	case <-member.Done():
	default:
		t.Fatal("the root's Done came before its member's end")
	}
	if !gone(member.Info().PID) {
		t.Errorf("the member outlived its tree's root")
	}
	if _, err := e.m.Spawn(Spec{Argv: []string{"true"}, Parent: root}, "owner"); err == nil || !strings.Contains(err.Error(), "tree has ended") {
		t.Errorf("a spawn into an ended tree: %v", err)
	}
	if !running(other.Info().PID) {
		t.Errorf("the end of one tree killed another")
	}
	other.Signal(syscall.SIGKILL)
	wait(t, other)
}

// TestStopGrace: a clean stop sends each tree SIGTERM and lets it finish
// within the grace — a child that traps TERM writes its file — and kills
// one that ignores TERM once the grace is over.
func TestStopGrace(t *testing.T) {
	e, _ := newCgroupEnv(t)
	dir := reachableDir(t, 0o777)
	done := filepath.Join(dir, "done")
	out := &collect{}
	trapper := e.spawn(Spec{Argv: []string{"sh", "-c", `
		sh -c 'trap "sleep 0.2; echo bye > ` + done + `; exit 0" TERM; echo $$; while :; do sleep 0.05; done' &
		wait`}, Cwd: dir}, out)
	trapperPid := pids(t, waitOutput(t, out, 1)[0])[0]
	stubborn := &collect{}
	s := e.spawn(Spec{Argv: []string{"sh", "-c", `trap "" TERM; echo $$; while :; do sleep 0.05; done`}}, stubborn)
	waitOutput(t, stubborn, 1)

	start := time.Now()
	e.m.Stop(2 * time.Second)
	if b, err := os.ReadFile(done); err != nil || string(b) != "bye\n" {
		t.Errorf("the child that traps TERM did not get to write its file: %q %v", b, err)
	}
	if took := time.Since(start); took < 2*time.Second || took > 8*time.Second {
		t.Errorf("the stop took %v, want the 2 s grace for the tree that ignores TERM", took)
	}
	if info := s.Info(); info.Status != abi.ProcessKilled || info.Signal != "SIGKILL" {
		t.Errorf("the tree that ignores TERM: %+v, want killed after the grace", info)
	}
	if !gone(trapperPid) {
		t.Errorf("pid %d outlived the stop", trapperPid)
	}
	if info := trapper.Info(); !exitedWith(info, 143) && !exitedWith(info, 0) && info.Signal != "SIGTERM" {
		t.Errorf("the trapping tree: %+v", info)
	}
}

// TestWatchdog: when the kernel dies (the watchdog's pipe closes without a
// stop), the watchdog kills every tree of its home, daemonized children
// included; another home's trees live on. A home's start-up sweep kills
// what an earlier run of it left, and only that.
func TestWatchdog(t *testing.T) {
	e, l := newCgroupEnv(t)
	exe, err := os.Executable() // this test binary links the package: it can be the watchdog
	if err != nil {
		t.Fatal(err)
	}
	other := testCgroupHome(t)
	otherTree, err := other.newTree()
	if err != nil {
		t.Fatal(err)
	}
	neighbour := exec.Command("sleep", "300")
	if err := neighbour.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() { neighbour.Wait(); close(reaped) }() // ends with the kill in the cleanup
	t.Cleanup(func() { neighbour.Process.Kill(); <-reaped })
	if err := otherTree.add(neighbour.Process.Pid); err != nil {
		t.Fatal(err)
	}

	lock, err := LockWatchdog(context.Background(), filepath.Join(t.TempDir(), "watchdog.lock"))
	if err != nil {
		t.Fatal(err)
	}
	wd, err := l.Cgroups.StartWatchdog(exe, lock)
	if err != nil {
		t.Fatal(err)
	}
	out := &collect{}
	e.spawn(Spec{Argv: []string{"sh", "-c", `setsid sh -c 'echo $$; exec sleep 300' & wait`}}, out)
	ps := pids(t, waitOutput(t, out, 1)[0])
	if !running(ps[0]) {
		t.Fatal("not running")
	}
	// The kernel "dies": its end of the pipe closes, nothing else.
	wd.pipe.Close()
	select {
	case <-wd.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the watchdog did not exit after its pipe closed")
	}
	if !gone(ps[0]) {
		t.Errorf("pid %d of the home outlived the watchdog", ps[0])
	}
	if !running(neighbour.Process.Pid) {
		t.Errorf("the watchdog of one home killed another home's tree")
	}

	// The sweep: the other home, started again, finds and ends its own.
	again, err := other.Cgroups.Home(other.Name)
	if err != nil {
		t.Fatal(err)
	}
	if n := again.Sweep(); n != 1 {
		t.Errorf("the sweep found %d processes, want 1", n)
	}
	select {
	case <-reaped:
	case <-time.After(30 * time.Second):
		t.Errorf("the sweep left the earlier run's process running")
	}
}

// TestWorkspaces: a workspace the launcher made goes when its tree ends —
// a 1 GiB file in it too — unless kept; a workspace past its cap ends the
// tree, saying why, and a file past it is stopped at once; a tree under
// the cap runs to its end.
func TestWorkspaces(t *testing.T) {
	e, l := newCgroupEnv(t)
	_, info, out := e.run(Spec{Argv: []string{"sh", "-c", "head -c 1073741824 /dev/zero > big && pwd"}})
	work := strings.TrimSpace(out.text("stdout"))
	if !exitedWith(info, 0) || work == "" {
		t.Fatalf("%+v %q %q", info, out.text("stdout"), out.text("stderr"))
	}
	// Removed off the exit's path, soon after it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(work); os.IsNotExist(err) {
			break
		} else if time.Now().After(deadline) {
			t.Errorf("the workspace %s with its 1 GiB file stayed after the tree ended: %v", work, err)
			break
		}
	}

	_, info, out = e.run(Spec{Argv: []string{"sh", "-c", "echo kept > f && pwd"}, KeepWorkspace: true})
	kept := strings.TrimSpace(out.text("stdout"))
	if b, err := os.ReadFile(filepath.Join(kept, "f")); !exitedWith(info, 0) || err != nil || string(b) != "kept\n" {
		t.Errorf("a kept workspace: %+v, %q %v", info, b, err)
	}

	l.WorkspaceMax = 4 << 20
	l.sizes.every = 20 * time.Millisecond
	s, info, out := e.run(Spec{Argv: []string{"sh", "-c", "for i in 1 2 3; do head -c 2000000 /dev/zero > f$i; done; exec sleep 60"}})
	_, data := e.event("kairo.process.exited", s.ID())
	if reason, _ := data["reason"].(string); info.Status != abi.ProcessKilled || !strings.Contains(reason, "over the cap of 4194304") {
		t.Errorf("a workspace past its cap: %+v, reason %q (stderr %q)", info, reason, out.text("stderr"))
	}
	if _, c := e.event("kairo.process.canceled", s.ID()); !strings.Contains(c["reason"].(string), "sandbox.workspace_max") {
		t.Errorf("canceled: %v", c)
	}
	_, info, _ = e.run(Spec{Argv: []string{"sh", "-c", "exec head -c 8000000 /dev/zero > big"}})
	if info.Status != abi.ProcessKilled || info.Signal != "SIGXFSZ" {
		t.Errorf("one file past the cap: %+v, want SIGXFSZ", info)
	}
	_, info, out = e.run(Spec{Argv: []string{"sh", "-c", "head -c 1000000 /dev/zero > f; echo ok"}})
	if !exitedWith(info, 0) || out.text("stdout") != "ok\n" {
		t.Errorf("under the cap: %+v %q", info, out.text("stderr"))
	}
}
