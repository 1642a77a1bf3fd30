package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/testkit"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sandbox"
	"github.com/vmihailenco/msgpack/v5"
)

// The tests below run real binaries through the Sandboxed launcher, as
// `kairo up` does: kairo itself is the sandbox helper, built once.
var helperBin testkit.LazyKairo

func TestMain(m *testing.M) {
	code := m.Run()
	helperBin.Remove()
	os.Exit(code)
}

// sandboxHelper builds cmd/kairo once, as make build does (testkit:
// linked once for every package of the run that asks), and returns its
// path; it skips the test on a machine whose kernel has no Landlock.
func sandboxHelper(t *testing.T) string {
	t.Helper()
	if sandbox.LandlockABI() == 0 {
		t.Skip("this kernel has no Landlock")
	}
	return helperBin.Path(t)
}

// needRoot skips a test that is about the uids of their own that only a
// root kernel gives.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("sandbox uids of their own need a kernel running as root")
	}
}

// newSandboxEnv is newEnv with a Sandboxed launcher whose Root is a folder
// the sandbox uids can pass through.
func newSandboxEnv(t *testing.T) (*env, *Sandboxed) {
	t.Helper()
	l := &Sandboxed{Helper: sandboxHelper(t), Root: reachableDir(t, 0o711)}
	return newEnv(t, Config{Launcher: l}), l
}

// reachableDir is a fresh folder with mode perm, removed after the test
// (and after the manager that uses it is closed): t.TempDir's parent is
// 0700, which a sandbox uid cannot pass.
func reachableDir(t *testing.T, perm os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kairo-proc-sandbox-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, perm); err != nil {
		t.Fatal(err)
	}
	return dir
}

// run spawns spec, waits for its exit and for the exited event, and returns
// the exit and the output.
func (e *env) run(spec Spec) (*Session, abi.ProcessInfo, *collect) {
	e.t.Helper()
	out := &collect{}
	s := e.spawn(spec, out)
	info := wait(e.t, s)
	e.event("kairo.process.exited", s.ID())
	return s, info, out
}

// all is the data of every event of subject about process id seen so far.
func (e *env) all(subject, id string) []map[string]any {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []map[string]any
	for _, ev := range e.events {
		if ev.Type != subject {
			continue
		}
		var data map[string]any
		msgpack.Unmarshal(ev.Data, &data)
		if data["processId"] == id {
			out = append(out, data)
		}
	}
	return out
}

func exitedWith(info abi.ProcessInfo, code int) bool {
	return info.Status == abi.ProcessExited && info.ExitCode != nil && *info.ExitCode == code
}

// TestSandboxedDefaultProfile: a spawn without a manifest runs as a uid of
// its own, reads the system's files but not the rest of the machine, writes
// its workspace and temp folder only, and sees none of the kernel's
// environment.
func TestSandboxedDefaultProfile(t *testing.T) {
	needRoot(t)
	e, _ := newSandboxEnv(t)
	// A file every user may read, outside the folders the profile grants:
	// only Landlock keeps it from the sandbox.
	outside := reachableDir(t, 0o755)
	secret := filepath.Join(outside, "readable")
	if err := os.WriteFile(secret, []byte("not for the sandbox\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("a uid of its own", func(t *testing.T) {
		_, info, out := e.run(Spec{Argv: []string{"id", "-u"}})
		uid, err := strconv.Atoi(strings.TrimSpace(out.text("stdout")))
		if !exitedWith(info, 0) || err != nil || uid < UIDBase || uid >= UIDBase+UIDCount {
			t.Fatalf("id -u: %+v, stdout %q: want a uid in [%d, %d)", info, out.text("stdout"), UIDBase, UIDBase+UIDCount)
		}
	})

	t.Run("system files: passwd yes, shadow and the rest of the machine no", func(t *testing.T) {
		_, info, out := e.run(Spec{Argv: []string{"cat", "/etc/passwd"}})
		if !exitedWith(info, 0) || !strings.Contains(out.text("stdout"), "root:") {
			t.Errorf("cat /etc/passwd: %+v, stdout %q stderr %q", info, out.text("stdout"), out.text("stderr"))
		}
		for _, path := range []string{"/etc/shadow", secret} {
			_, info, out := e.run(Spec{Argv: []string{"cat", path}})
			if exitedWith(info, 0) || !strings.Contains(out.text("stderr"), "Permission denied") || out.text("stdout") != "" {
				t.Errorf("cat %s: %+v, stdout %q stderr %q: want Permission denied", path, info, out.text("stdout"), out.text("stderr"))
			}
		}
	})

	t.Run("writes in its workspace and temp folder only", func(t *testing.T) {
		escape := filepath.Join(os.TempDir(), "kairo-escape-"+strconv.Itoa(os.Getpid()))
		t.Cleanup(func() { os.Remove(escape) })
		_, info, out := e.run(Spec{Argv: []string{"sh", "-c", `
			echo work > made && echo tmp > "$TMPDIR/made" && cat made "$TMPDIR/made" && pwd
			echo escape > ` + escape + ` || echo refused`}, KeepWorkspace: true})
		lines := strings.Split(strings.TrimSpace(out.text("stdout")), "\n")
		if !exitedWith(info, 0) || len(lines) != 4 || lines[0] != "work" || lines[1] != "tmp" || lines[3] != "refused" {
			t.Fatalf("%+v\nstdout %q\nstderr %q", info, out.text("stdout"), out.text("stderr"))
		}
		if b, err := os.ReadFile(filepath.Join(lines[2], "made")); err != nil || string(b) != "work\n" {
			t.Errorf("the workspace %s does not hold what the process wrote: %q, %v", lines[2], b, err)
		}
		if _, err := os.Stat(escape); !os.IsNotExist(err) {
			t.Errorf("the process wrote %s, outside its folders (/tmp is open to every uid): %v", escape, err)
		}
	})

	t.Run("a minimal environment", func(t *testing.T) {
		t.Setenv("SECRET_TOKEN", "hunter2")
		_, info, out := e.run(Spec{Argv: []string{"env"}, Env: []string{"GIVEN=yes"}})
		var names []string
		for _, kv := range strings.Split(strings.TrimSpace(out.text("stdout")), "\n") {
			name, _, _ := strings.Cut(kv, "=")
			names = append(names, name)
		}
		want := "GIVEN HOME LANG PATH TMPDIR"
		if !exitedWith(info, 0) || strings.Join(slices.Sorted(slices.Values(names)), " ") != want {
			t.Errorf("env: %+v\n%s\nwant exactly %s: the spec's variables and the profile's, nothing of the kernel's", info, out.text("stdout"), want)
		}
	})
}

// TestSandboxedWallLimit: a tree past its wall-clock limit is canceled
// with a reason and killed; one that ends in time is left alone.
func TestSandboxedWallLimit(t *testing.T) {
	e, _ := newSandboxEnv(t)
	start := time.Now()
	s, info, _ := e.run(Spec{Argv: []string{"sleep", "30"}, WallLimit: 300 * time.Millisecond})
	if took := time.Since(start); info.Status != abi.ProcessKilled || took > 20*time.Second {
		t.Errorf("sleep 30 with a wall limit of 300ms: %+v after %s, want killed well before the sleep ends", info, took)
	}
	if _, data := e.event("kairo.process.canceled", s.ID()); !strings.Contains(fmt.Sprint(data["reason"]), "wall-clock limit") {
		t.Errorf("canceled event %v does not name the wall-clock limit", data)
	}

	s, info, _ = e.run(Spec{Argv: []string{"sleep", "0.1"}, WallLimit: 300 * time.Millisecond})
	if !exitedWith(info, 0) || len(e.all("kairo.process.canceled", s.ID())) != 0 {
		t.Errorf("sleep 0.1 with a wall limit of 300ms: %+v, canceled events %v; want exit 0 and none", info, e.all("kairo.process.canceled", s.ID()))
	}
}

// TestSandboxedOutputLimit: output past the limit is dropped, the last
// delivered chunk says so, and the throttled events count what was dropped;
// output of exactly the limit is delivered whole and unmarked.
func TestSandboxedOutputLimit(t *testing.T) {
	e, _ := newSandboxEnv(t)
	const limit = 64 << 10
	for _, tc := range []struct {
		size      int
		truncated bool
	}{
		{10 << 20, true},
		{limit, false}, // exactly the limit: all of it
	} {
		// With chunks of 4 KiB the limit falls between two chunks: the
		// client must learn of the drop all the same.
		s, info, out := e.run(Spec{Argv: []string{"head", "-c", strconv.Itoa(tc.size), "/dev/zero"}, OutputLimit: limit, MaxChunkBytes: 4 << 10})
		got, truncated := 0, false
		out.mu.Lock()
		for _, c := range out.chunks {
			got += len(c.Chunk)
			truncated = truncated || c.Truncated
		}
		out.mu.Unlock()
		if !exitedWith(info, 0) || got != min(tc.size, limit) || truncated != tc.truncated {
			t.Errorf("%d bytes under a limit of %d: %+v, delivered %d, a chunk marked truncated: %v (want %v)", tc.size, limit, info, got, truncated, tc.truncated)
		}
		dropped := 0
		for _, d := range e.all("kairo.process.output.throttled", s.ID()) {
			if d["reason"] != "output limit" || d["stream"] != "stdout" {
				t.Errorf("throttled event %v: want reason \"output limit\" on stdout", d)
			}
			n, _ := strconv.Atoi(fmt.Sprint(d["droppedBytes"]))
			dropped += n
		}
		if dropped != tc.size-min(tc.size, limit) {
			t.Errorf("%d bytes under a limit of %d: throttled events report %d dropped, want %d", tc.size, limit, dropped, tc.size-min(tc.size, limit))
		}
	}
}

// running reports whether pid runs now (or is stopped): a zombie has been
// killed and only waits to be reaped by whoever adopted it.
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// gone waits for pid to stop running: long enough for a loaded machine.
func gone(pid int) bool {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !running(pid) {
			return true
		}
	}
	return false
}

func pids(t *testing.T, text string) []int {
	t.Helper()
	var out []int
	for _, f := range strings.Fields(text) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("not a pid: %q in %q", f, text)
		}
		out = append(out, pid)
	}
	return out
}

// The scripts below leave a process behind that writes its own pid to the
// file pid (so it surely ran) and sleeps; the leader prints that pid.
const leaveBehind = `while [ ! -s pid ]; do sleep 0.01; done; cat pid`

// TestSandboxedOrphans: whatever a tree leaves behind — a background child,
// one that left the session, a stopped one, one that ignores SIGTERM — is
// killed with it, after it exits or when it is canceled; processes of other
// uids, and another sandboxed tree, are not.
func TestSandboxedOrphans(t *testing.T) {
	needRoot(t)
	e, _ := newSandboxEnv(t)

	// Neighbours the sweeps must spare: a process of the test's own uid,
	// one of an ordinary user, and another sandboxed tree.
	var neighbours []int
	for _, uid := range []uint32{0, 65534} {
		cmd := exec.Command("sleep", "60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		neighbours = append(neighbours, cmd.Process.Pid)
	}
	other := e.spawn(Spec{Argv: []string{"sleep", "60"}, CorrelationID: "other"})
	neighbours = append(neighbours, other.Info().PID)

	for _, tc := range []struct{ name, script string }{
		{"a background child", `sh -c 'echo $$ > pid; exec sleep 60' & ` + leaveBehind},
		{"a child that left the session", `setsid sh -c 'echo $$ > pid; exec sleep 60' & ` + leaveBehind},
		{"a stopped child that left the session", `setsid sh -c 'echo $$ > pid; kill -STOP $$' & ` + leaveBehind},
		{"a grandchild that ignores SIGTERM and SIGHUP", `sh -c 'trap "" TERM HUP; setsid sh -c "echo \$\$ > pid; exec sleep 60" &' & ` + leaveBehind},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, info, out := e.run(Spec{Argv: []string{"sh", "-c", tc.script}})
			ps := pids(t, out.text("stdout"))
			if !exitedWith(info, 0) || len(ps) != 1 {
				t.Fatalf("%+v, stdout %q stderr %q", info, out.text("stdout"), out.text("stderr"))
			}
			if !gone(ps[0]) {
				t.Errorf("pid %d, left behind by the tree, still runs after the tree exited", ps[0])
			}
		})
	}

	t.Run("cancel of a running tree", func(t *testing.T) {
		out := &collect{}
		s := e.spawn(Spec{Argv: []string{"sh", "-c", `
			sleep 60 & echo $!
			setsid sh -c 'trap "" TERM; echo $$; exec sleep 60' &
			wait`}, CorrelationID: "c-cancel"}, out)
		var ps []int
		for deadline := time.Now().Add(10 * time.Second); len(ps) < 2; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the tree did not print two pids: %q %q", out.text("stdout"), out.text("stderr"))
			}
			ps = pids(t, out.text("stdout"))
		}
		for _, pid := range ps {
			if !running(pid) {
				t.Fatalf("pid %d is not running before the cancel", pid)
			}
		}
		if ids := e.m.Cancel("c-cancel", "test"); len(ids) != 1 || ids[0] != s.ID() {
			t.Fatalf("Cancel = %v, want [%s]", ids, s.ID())
		}
		for _, pid := range ps {
			if !gone(pid) {
				t.Errorf("pid %d of the canceled tree still runs", pid)
			}
		}
	})

	for _, pid := range neighbours {
		if !running(pid) {
			t.Errorf("neighbour pid %d was killed by a sweep of another uid", pid)
		}
	}
	if ids := e.m.Cancel("other", "test"); len(ids) != 1 {
		t.Errorf("the other sandboxed tree was not running any more: %v", ids)
	}
}

// shSkill is a skill whose command is sh -c script, granted the system's
// programs and libraries and its workspace, with more (its [limits],
// [[progress]], ...) at the end of the manifest.
func shSkill(t *testing.T, script, more string) *manifests.Skill {
	t.Helper()
	text := `[skill]
name = "test"
command = ["/usr/bin/sh", "-c", '''` + script + `''']

[fs]
read = ["/usr", "/lib", "/lib64", "/etc/ld.so.cache", "/proc"]
write = ["$WORK"]
exec = ["/usr/bin"]
` + more
	s, err := manifests.ParseSkill(filepath.Join(t.TempDir(), "skill.toml"), []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// skillSpec is the spec of a run of s in workspace work ("" for one the
// launcher makes).
func skillSpec(t *testing.T, s *manifests.Skill, work string) Spec {
	t.Helper()
	spec, err := SkillSpec(s, nil, nil, work, nil)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// ownedWorkspace is a workspace of the operator's whose mode lets every
// uid write it, as /tmp's does: the sandbox's uid may write it by DAC.
func ownedWorkspace(t *testing.T) string {
	t.Helper()
	return reachableDir(t, 0o777)
}

// TestSandboxedCPULimit: cpu_seconds ends a busy loop by signal, and spares
// a process that runs longer but idles.
func TestSandboxedCPULimit(t *testing.T) {
	e, _ := newSandboxEnv(t)
	busy := e.spawn(skillSpec(t, shSkill(t, `while :; do :; done`, "[limits]\ncpu_seconds = 1\nwall_seconds = 30\n"), ""), &collect{})
	// Its neighbour runs longer than the limit, without using cpu.
	idle := e.spawn(skillSpec(t, shSkill(t, `sleep 1.5; echo slept`, "[limits]\ncpu_seconds = 1\n"), ""), &collect{})
	if info := wait(t, busy); info.Status != abi.ProcessKilled || (info.Signal != "SIGXCPU" && info.Signal != "SIGKILL") {
		t.Errorf("a busy loop with cpu_seconds = 1: %+v, want killed by SIGXCPU or SIGKILL", info)
	}
	if info := wait(t, idle); !exitedWith(info, 0) {
		t.Errorf("sleep 1.5 with cpu_seconds = 1: %+v, want exit 0", info)
	}
}

// TestSandboxedFileSizeLimit: file_size stops a write at the limit with
// SIGXFSZ; a file of exactly the limit is written.
func TestSandboxedFileSizeLimit(t *testing.T) {
	needRoot(t)
	e, _ := newSandboxEnv(t)
	work := ownedWorkspace(t)
	s := shSkill(t, `exec head -c 10485760 /dev/zero > big`, "[limits]\nfile_size = \"1MiB\"\n")
	if _, info, out := e.run(skillSpec(t, s, work)); info.Status != abi.ProcessKilled || info.Signal != "SIGXFSZ" {
		t.Errorf("10 MiB written with file_size = 1MiB: %+v (stderr %q), want killed by SIGXFSZ", info, out.text("stderr"))
	}
	if fi, err := os.Stat(filepath.Join(work, "big")); err != nil || fi.Size() != 1<<20 {
		t.Errorf("the file written past its limit: %v, want 1 MiB", err)
	}

	s = shSkill(t, `exec head -c 1048576 /dev/zero > fits`, "[limits]\nfile_size = \"1MiB\"\n")
	if _, info, out := e.run(skillSpec(t, s, work)); !exitedWith(info, 0) {
		t.Errorf("1 MiB written with file_size = 1MiB: %+v (stderr %q), want exit 0", info, out.text("stderr"))
	}
	if fi, err := os.Stat(filepath.Join(work, "fits")); err != nil || fi.Size() != 1<<20 {
		t.Errorf("the file written up to its limit: %v, want 1 MiB", err)
	}
}

// processesOf counts the processes of uid.
func processesOf(uid int) int {
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if fi, err := os.Stat("/proc/" + e.Name()); err == nil && int(fi.Sys().(*syscall.Stat_t).Uid) == uid {
			n++
		}
	}
	return n
}

// TestSandboxedProcessesLimit: processes caps the tree's uid, so a fork
// loop fails past it; a tree within it starts every child.
func TestSandboxedProcessesLimit(t *testing.T) {
	needRoot(t)
	e, _ := newSandboxEnv(t)
	// The inner shell forks until it cannot (dash then gives up); the outer
	// one says so and stays a second, while the test counts the uid's
	// processes.
	out := &collect{}
	s := e.spawn(skillSpec(t, shSkill(t, `id -u
sh -c 'for i in $(seq 50); do sleep 5 & done; wait'
echo "inner exited $?"
sleep 1`, "[limits]\nprocesses = 10\n"), ""), out)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.text("stdout"), "inner exited"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the inner shell did not end: %q %q", out.text("stdout"), out.text("stderr"))
		}
	}
	uid, _ := strconv.Atoi(strings.Fields(out.text("stdout"))[0])
	if n := processesOf(uid); n > 10 || n < 5 {
		t.Errorf("uid %d has %d processes with processes = 10", uid, n)
	}
	wait(t, s)
	if strings.Contains(out.text("stdout"), "inner exited 0") || !strings.Contains(strings.ToLower(out.text("stderr")), "fork") {
		t.Errorf("the shell did not fail to fork: stdout %q stderr %q", out.text("stdout"), out.text("stderr"))
	}

	// Within the limit, every child starts.
	_, info, out := e.run(skillSpec(t, shSkill(t, `for i in $(seq 5); do sleep 0.1 & done; wait; echo ok`, "[limits]\nprocesses = 10\n"), ""))
	if !exitedWith(info, 0) || out.text("stdout") != "ok\n" || out.text("stderr") != "" {
		t.Errorf("5 children with processes = 10: %+v, stdout %q stderr %q", info, out.text("stdout"), out.text("stderr"))
	}
}

// TestSandboxedProgress: a [[progress]] rule turns matching lines into
// kairo.process.progress events with the rule's named groups; a line that
// does not match is not progress.
func TestSandboxedProgress(t *testing.T) {
	e, _ := newSandboxEnv(t)
	s := shSkill(t, `for p in 10 20 30 40 50 60 70 80 90 100; do echo "progress=$p%"; echo working; sleep 0.05; done
echo "progress=999% of nothing"`, `
[[progress]]
pattern = '^progress=(?P<percent>\d+)%$'
`)
	sess, info, out := e.run(skillSpec(t, s, ""))
	if !exitedWith(info, 0) {
		t.Fatalf("%+v\nstdout %q\nstderr %q", info, out.text("stdout"), out.text("stderr"))
	}
	evs := e.all("kairo.process.progress", sess.ID())
	if len(evs) < 2 {
		t.Fatalf("%d progress events, want several: %v", len(evs), evs)
	}
	last := -1
	for _, d := range evs {
		values, _ := d["values"].(map[string]any)
		pct, err := strconv.Atoi(fmt.Sprint(values["percent"]))
		if err != nil || len(values) != 1 || pct < last || d["stream"] != "stdout" {
			t.Fatalf("progress events %v: want values {percent} rising, on stdout", evs)
		}
		last = pct
	}
	if last != 100 {
		t.Errorf("the last progress is %d%%, want 100%% (the line that does not match the rule is not progress): %v", last, evs)
	}
}

// TestSandboxedSkillRefused: a skill is refused at spawn, with the reason,
// when its program is outside fs.exec once links are followed, or when its
// grants need more than this kernel's Landlock can enforce — unless the
// operator chose best effort.
func TestSandboxedSkillRefused(t *testing.T) {
	t.Run("a command outside fs.exec", func(t *testing.T) {
		e, _ := newSandboxEnv(t)
		// $SKILL_DIR/bin is granted; bin/link leads out of it, bin/copy
		// is a program of its own there.
		dir := reachableDir(t, 0o755)
		if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/usr/bin/id", filepath.Join(dir, "bin", "link")); err != nil {
			t.Fatal(err)
		}
		prog, err := os.ReadFile("/usr/bin/id")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "bin", "copy"), prog, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"link", "copy"} {
			text := `[skill]
name = "test"
command = ["$SKILL_DIR/bin/` + name + `", "-u"]
[fs]
read = ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"]
exec = ["$SKILL_DIR/bin"]
`
			s, err := manifests.ParseSkill(filepath.Join(dir, "skill.toml"), []byte(text))
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.m.Spawn(skillSpec(t, s, ""), "owner")
			if name == "copy" {
				if err != nil {
					t.Errorf("a program in the granted folder: %v", err)
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), "bin/link (which is /usr/bin/id) is not granted execute") || !strings.Contains(err.Error(), "fs.exec") {
				t.Errorf("a link out of the granted folder: %v, want refused naming the program and fs.exec", err)
			}
		}
	})

	t.Run("net.unix on a kernel that cannot confine it", func(t *testing.T) {
		if sandbox.LandlockABI() >= 9 {
			t.Skip("this kernel's Landlock confines pathname unix sockets")
		}
		e, l := newSandboxEnv(t)
		s := shSkill(t, `echo ran`, "[net]\nunix = [\"/run/kairo-test.sock\"]\n")
		_, err := e.m.Spawn(skillSpec(t, s, ""), "owner")
		if err == nil || !strings.Contains(err.Error(), "unix socket") || !strings.Contains(err.Error(), "/run/kairo-test.sock") || !strings.Contains(err.Error(), "best effort") {
			t.Errorf("net.unix on Landlock ABI %d: %v, want refused naming the socket and best effort", sandbox.LandlockABI(), err)
		}
		l.BestEffort = true
		if _, info, out := e.run(skillSpec(t, s, "")); !exitedWith(info, 0) || out.text("stdout") != "ran\n" {
			t.Errorf("net.unix with best effort: %+v, stdout %q stderr %q", info, out.text("stdout"), out.text("stderr"))
		}
	})
}

// Two kernels on one machine give out uids of the same range: each holds
// the uids of its trees, so the cleanup of one tree and the sweep of a
// starting kernel spare the other kernel's trees.
func TestSandboxedUIDsAcrossKernels(t *testing.T) {
	needRoot(t)
	a, _ := newSandboxEnv(t)
	b, _ := newSandboxEnv(t)
	start := func(e *env) (*Session, *collect, int) {
		t.Helper()
		out := &collect{}
		s := e.spawn(Spec{Argv: []string{"sh", "-c", "id -u; exec sleep 60"}, CorrelationID: "long"}, out)
		for deadline := time.Now().Add(10 * time.Second); !strings.HasSuffix(out.text("stdout"), "\n"); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no uid printed: %q", out.text("stderr"))
			}
		}
		uid, _ := strconv.Atoi(strings.TrimSpace(out.text("stdout")))
		return s, out, uid
	}
	sa, _, uidA := start(a)
	sb, _, uidB := start(b)
	if uidA == uidB {
		t.Fatalf("two kernels gave their trees the same uid %d", uidA)
	}
	// A tree of a gets uidB once b's tree is done, not before: run one
	// in a while b's runs, and let it end.
	_, info, out := a.run(Spec{Argv: []string{"id", "-u"}})
	if !exitedWith(info, 0) || strings.TrimSpace(out.text("stdout")) == strconv.Itoa(uidB) {
		t.Errorf("a's second tree: %+v, uid %q; b holds %d", info, out.text("stdout"), uidB)
	}
	if !running(sb.Info().PID) || !running(sa.Info().PID) {
		t.Fatalf("a tree's cleanup killed a running tree of the other kernel")
	}

	// A process of a sandbox uid no kernel holds, whose lock names this
	// home, is what a dead kernel of this home left behind: the sweep of
	// this home kills it, and spares the live trees and what a dead kernel
	// of another home left (that home's start ends it).
	stray := func(uid uint32, home string) (*exec.Cmd, chan struct{}) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(uidLockDir, strconv.Itoa(int(uid))), append([]byte{uidBusy}, home...), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sleep", "60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		reaped := make(chan struct{})
		go func() { cmd.Wait(); close(reaped) }() // ends with the kill below
		t.Cleanup(func() { cmd.Process.Kill(); <-reaped })
		return cmd, reaped
	}
	_, mineReaped := stray(UIDBase+UIDCount-1, "/home/a/.kairo")
	theirs, _ := stray(UIDBase+UIDCount-2, "/home/b/.kairo")
	if n := SweepSandboxUIDs("/home/a/.kairo", UIDBase, UIDCount); n != 1 {
		t.Errorf("the sweep killed %d processes, want the stray one of this home", n)
	}
	select {
	case <-mineReaped:
	case <-time.After(30 * time.Second):
		t.Errorf("the sweep left this home's stray process running")
	}
	if !running(theirs.Process.Pid) {
		t.Errorf("the sweep of one home killed what another home's kernel left")
	}
	if !running(sa.Info().PID) || !running(sb.Info().PID) {
		t.Errorf("the sweep killed a tree of a live kernel")
	}
	a.m.Cancel("long", "test")
	b.m.Cancel("long", "test")
}

// allocUID takes a uid's lock outside l.mu: allocations at the same time
// still get distinct uids, a range with none left is refused, and a lock
// file written in place, never truncated on release, reads back as the
// last state written: a shorter home leaves nothing of a longer one.
func TestSandboxedAllocUIDConcurrent(t *testing.T) {
	needRoot(t)
	const n = 8
	base := UIDBase - 1<<20 + os.Getpid()%4096*n // below the default range, apart from other runs
	t.Cleanup(func() {
		for u := base; u < base+n; u++ {
			os.Remove(filepath.Join(uidLockDir, strconv.Itoa(u)))
		}
	})
	l := &Sandboxed{UIDBase: base, UIDCount: n, Home: "/home/a-longer-name/.kairo"}
	uids := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			u, err := l.allocUID()
			if err != nil {
				t.Error(err)
			}
			uids[i] = u
		})
	}
	wg.Wait()
	seen := map[int]bool{}
	for _, u := range uids {
		if u < base || u >= base+n || seen[u] {
			t.Fatalf("concurrent allocations gave %v: want %d distinct uids in [%d, %d)", uids, n, base, base+n)
		}
		seen[u] = true
	}
	if u, err := l.allocUID(); err == nil {
		t.Fatalf("a range with every uid given out gave out %d", u)
	}
	for _, u := range uids {
		l.free(u)
	}
	lockFile := filepath.Join(uidLockDir, strconv.Itoa(uids[0]))
	if b, _ := os.ReadFile(lockFile); len(b) == 0 || b[0] != uidReleased {
		t.Fatalf("a freed uid's lock file holds %q, want it released", b)
	}
	short := &Sandboxed{UIDBase: uids[0], UIDCount: 1, Home: "/h"}
	u, err := short.allocUID()
	if err != nil || u != uids[0] {
		t.Fatalf("a released uid taken again: %d, %v", u, err)
	}
	if b, _ := os.ReadFile(lockFile); string(b) != string(uidBusy)+"/h" {
		t.Errorf("the lock file of a uid taken by home /h holds %q", b)
	}
	short.free(u)
}

// TestSandboxedUnpassableFolder: a program under a folder the sandbox's uid
// may not pass (a clone in a root-owned 0700 temp folder, say) is refused
// at spawn with an error naming that folder, not a bare "permission
// denied" from the exec; the same folder made passable runs it.
func TestSandboxedUnpassableFolder(t *testing.T) {
	needRoot(t)
	e, _ := newSandboxEnv(t)
	outer := reachableDir(t, 0o700)
	dir := filepath.Join(outer, "skill")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := func() Spec {
		return Spec{Argv: []string{script}, Policy: func(work, tmp string) (*sandbox.Policy, error) {
			p := sandbox.Default(work, tmp, nil)
			p.Exec = append(p.Exec, dir)
			return p, nil
		}}
	}
	_, err := e.m.Spawn(spec(), "owner")
	if err == nil || !strings.Contains(err.Error(), "may not pass through "+outer) {
		t.Fatalf("spawn under a 0700 folder: %v, want an error naming %s", err, outer)
	}
	if err := os.Chmod(outer, 0o711); err != nil {
		t.Fatal(err)
	}
	_, info, out := e.run(spec())
	if !exitedWith(info, 0) || out.text("stdout") != "ran\n" {
		t.Fatalf("under a passable folder: %+v, output %q", info, out.text("stdout"))
	}
}
