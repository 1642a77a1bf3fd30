package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The escape suite runs testdata/probe, a static program that tries one
// thing and prints what the kernel answered, as a real sandboxed child of
// the helper. Each escape comes with a granted neighbour that must work
// under the same policy, so that a sandbox that breaks everything fails.

// escapeUIDs are the uids the suite's sandboxes run as: far from any real
// account and apart for each test process (by its pid), so that killing
// every process of a uid when a test ends touches only what the test
// started, even with several test processes at once. An environment takes
// a slot of two, the second for the fork bomb, whose limit counts every
// process of its uid, and gives it back when its test ends.
const (
	escapeUIDBase  = 2100000000
	escapeUIDsEach = 32 // per test process; pid_max is at most 1<<22
)

var escapeSlots struct {
	sync.Mutex
	used [escapeUIDsEach / 2]bool
}

// takeEscapeUIDs returns the first uid of a free slot, released when t
// ends and the slot's processes are killed.
func takeEscapeUIDs(t *testing.T) int {
	escapeSlots.Lock()
	defer escapeSlots.Unlock()
	for i, used := range escapeSlots.used {
		if used {
			continue
		}
		escapeSlots.used[i] = true
		uid := escapeUIDBase + escapeUIDsEach*os.Getpid() + 2*i
		t.Cleanup(func() {
			killUID(uid)
			killUID(uid + 1)
			escapeSlots.Lock()
			escapeSlots.used[i] = false
			escapeSlots.Unlock()
		})
		return uid
	}
	t.Fatalf("more than %d escape environments at once: raise escapeUIDsEach", len(escapeSlots.used))
	return 0
}

// probeTimeout bounds one run of the probe; nothing in the suite should
// take a tenth of it on an idle machine. The CPU spin needs two seconds of
// CPU time, which a loaded machine's share stretches to tens of seconds.
const probeTimeout = 2 * time.Minute

// escapeEnv is a sandbox's world: its folders, the host's files and
// services it must not reach, and the probe.
type escapeEnv struct {
	uid     int // the sandbox's uid and gid
	forkUID int // the fork bomb's, alone under its process limit

	root    string // 0755, root's: the sandbox can walk through it
	bin     string // the probe and a setuid-root copy; granted exec
	xbin    string // world-writable and granted exec: nothing may be planted in it
	work    string // the sandbox's own, granted write
	tmp     string // granted write
	outside string // world-writable, granted nothing
	home    string // another user's home: world-readable, granted nothing

	probe     string
	probeSUID string

	tcpGranted, tcpUngranted   int // loopback listeners, IPv4
	tcp6Granted, tcp6Ungranted int // loopback listeners, IPv6 (0 without IPv6)
	bindGranted, bindUngranted int // free ports
	resolver                   string
	hostSocket, grantedSocket  string // pathname unix sockets, mode 0777
	hostAbstract               string // an abstract unix socket, without the @

	daemon      int // a process of the sandbox's uid outside the sandbox
	heldFD      int // a descriptor of this process on another user's file
	testProcess int
}

// newEscapeEnv builds an environment that lives until t ends.
func newEscapeEnv(t *testing.T) *escapeEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the escape suite runs as root: it gives the sandbox its own uid and owns host files it must not reach")
	}
	if abi := LandlockABI(); abi < 6 {
		t.Skipf("Landlock ABI %d: the suite needs 6 (signal and abstract socket scopes)", abi)
	}
	uid := takeEscapeUIDs(t)
	e := &escapeEnv{uid: uid, forkUID: uid + 1, testProcess: os.Getpid()}

	root, err := os.MkdirTemp("", "kairo-escape-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	e.root = root
	e.bin, e.xbin = root+"/bin", root+"/xbin"
	e.work, e.tmp = root+"/work", root+"/tmp"
	e.outside, e.home = root+"/outside", root+"/home/alice"
	noErr(t, os.Chmod(root, 0o755))
	mkdirFixture(t, e.bin, 0o755)
	mkdirFixture(t, e.xbin, 0o777)
	mkdirFixture(t, e.outside, 0o777)
	mkdirFixture(t, root+"/home", 0o755)
	mkdirFixture(t, e.home, 0o755)
	mkdirFixture(t, root+"/run", 0o755)
	for _, d := range []string{e.work, e.tmp} {
		mkdirFixture(t, d, 0o700)
		noErr(t, os.Chown(d, e.uid, e.uid))
	}

	bin, err := probeBinary()
	if err != nil {
		t.Fatal(err)
	}
	e.probe, e.probeSUID = e.bin+"/probe", e.bin+"/probe-suid"
	writeFixture(t, e.probe, 0o755, string(bin))
	writeFixture(t, e.probeSUID, 0o755, string(bin))
	noErr(t, os.Chmod(e.probeSUID, 0o4755)) // root's, setuid
	writeFixture(t, e.xbin+"/tool", 0o755, string(bin))
	writeFixture(t, e.xbin+"/tool-rw", 0o777, string(bin))
	writeFixture(t, e.outside+"/tool", 0o755, string(bin))
	e.fixtures(t)
	e.services(t)
	return e
}

// fixtures are the files the escapes aim at, each used by one escape, and
// the sandbox's own files its neighbours use. Targets outside are
// world-readable or world-writable: only the sandbox stands in the way.
func (e *escapeEnv) fixtures(t *testing.T) {
	writeFixture(t, e.home+"/notes", 0o644, "alice's notes\n")
	for _, name := range []string{"rw", "trunc", "otrunc", "victim", "ren-a", "steal", "link-src"} {
		writeFixture(t, e.outside+"/"+name, 0o666, "host data\n")
	}
	mkdirFixture(t, e.outside+"/victim-dir", 0o777)
	for _, name := range []string{
		"mine", "trunc-me", "otrunc-me", "unlink-me", "ren-a", "move-a", "plant", "link-a",
	} {
		writeFixture(t, e.work+"/"+name, 0o644, "sandbox data\n")
		noErr(t, os.Chown(e.work+"/"+name, e.uid, e.uid))
	}
	mkdirFixture(t, e.work+"/rmdir-me", 0o755)
	noErr(t, os.Chown(e.work+"/rmdir-me", e.uid, e.uid))

	// A descriptor this process holds on alice's notes, for the sandbox to
	// try through /proc/<pid>/fd.
	fd, err := unix.Open(e.home+"/notes", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	noErr(t, err)
	e.heldFD = fd
	t.Cleanup(func() { unix.Close(fd) })
}

// services are the host's: loopback listeners, a resolver, unix sockets,
// and a daemon running as the sandbox's own uid.
func (e *escapeEnv) services(t *testing.T) {
	e.tcpGranted = listenTCP(t, "127.0.0.1:0")
	e.tcpUngranted = listenTCP(t, "127.0.0.1:0")
	if ln, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		ln.Close()
		e.tcp6Granted = listenTCP(t, "[::1]:0")
		e.tcp6Ungranted = listenTCP(t, "[::1]:0")
	}
	e.bindGranted, e.bindUngranted = freePort(t), freePort(t)
	e.resolver = serveDNS(t)
	e.hostSocket = listenUnix(t, e.root+"/run/host.sock")
	e.grantedSocket = listenUnix(t, e.root+"/run/granted.sock")
	e.hostAbstract = fmt.Sprintf("kairo-escape-%d-%d", os.Getpid(), e.uid)
	listenUnix(t, "@"+e.hostAbstract)

	d := exec.Command(e.probe, "sleep", "1h")
	d.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(e.uid), Gid: uint32(e.uid)},
		Setsid:     true,
		Pdeathsig:  syscall.SIGKILL,
	}
	noErr(t, d.Start())
	e.daemon = d.Process.Pid
	t.Cleanup(func() {
		d.Process.Kill()
		d.Wait()
	})
}

// policy is the default profile for the sandbox's folders, with the probe's
// folders granted exec, run as the sandbox's uid, changed by tweak.
func (e *escapeEnv) policy(tweak func(*Policy)) *Policy {
	p := Default(e.work, e.tmp, []string{"KAIRO_GRANTED=yes"})
	p.Exec = append(p.Exec, e.bin, e.xbin)
	p.UID, p.GID = e.uid, e.uid
	if tweak != nil {
		tweak(p)
	}
	return p
}

// run runs the probe under p and returns what it answered: its line, or
// "signal NAME" when a signal killed it. setup, when not nil, changes the
// command before it starts.
func (e *escapeEnv) run(t *testing.T, p *Policy, setup func(*testing.T, *Cmd), args ...string) string {
	t.Helper()
	c, err := Command(os.Args[0], p, append([]string{e.probe}, args...))
	if err != nil {
		t.Fatalf("probe %v: %v", args, err)
	}
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if setup != nil {
		setup(t, c)
	}
	err = c.Start()
	if serr := c.Started(); serr != nil {
		if c.Process != nil {
			c.Wait()
		}
		t.Fatalf("probe %v: the sandbox did not start: %v", args, serr)
	}
	if err != nil {
		t.Fatalf("probe %v: %v", args, err)
	}
	// The helper leads its own session: a probe that hangs goes with
	// whatever it forked.
	var timedOut atomic.Bool
	timer := time.AfterFunc(probeTimeout, func() {
		timedOut.Store(true)
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	})
	defer timer.Stop()
	c.Wait()
	ws := c.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case timedOut.Load():
		// Not a signal of the sandbox's: a limit that should have killed
		// the probe did not.
		return fmt.Sprintf("still running after %v", probeTimeout)
	case ws.Signaled():
		return "signal " + unix.SignalName(ws.Signal())
	case ws.ExitStatus() != 0:
		return fmt.Sprintf("exit %d: %s", ws.ExitStatus(), strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String())
}

// escape is one attempt and its granted neighbour.
type escape struct {
	name   string
	policy func(*Policy)          // grants beyond the base profile; nil for none
	setup  func(*testing.T, *Cmd) // changes to the command (a terminal on stdin); nil for none
	try    []string               // the probe's arguments for the escape
	want   string                 // what the kernel must answer: "errno EACCES", "signal SIGSYS"
	// near is the granted neighbour, run under the same policy unless
	// nearPolicy says otherwise; it must answer nearWant ("" is "ok").
	near       []string
	nearWant   string
	nearPolicy func(*Policy)
	// after, when not nil, checks the host after both runs.
	after func(t *testing.T)
}

// check runs each escape and its neighbour as a parallel subtest.
func (e *escapeEnv) check(t *testing.T, escapes []escape) {
	t.Helper()
	seen := map[string]bool{}
	for _, x := range escapes {
		if seen[x.name] {
			t.Fatalf("two escapes are named %s", x.name)
		}
		seen[x.name] = true
		t.Run(x.name, func(t *testing.T) {
			t.Parallel()
			if got := e.run(t, e.policy(x.policy), x.setup, x.try...); got != x.want {
				t.Errorf("escape %q: the sandbox answered %q, want %q", strings.Join(x.try, " "), got, x.want)
			}
			nearPolicy, nearWant := x.policy, x.nearWant
			if x.nearPolicy != nil {
				nearPolicy = x.nearPolicy
			}
			if nearWant == "" {
				nearWant = "ok"
			}
			if got := e.run(t, e.policy(nearPolicy), x.setup, x.near...); got != nearWant {
				t.Errorf("granted neighbour %q: the sandbox answered %q, want %q", strings.Join(x.near, " "), got, nearWant)
			}
			if x.after != nil {
				x.after(t)
			}
		})
	}
}

// probeBinary is the probe, built once per test run, static.
var probeBinary = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "kairo-probe-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "probe")
	// go test puts its own go first in the PATH of the tests.
	cmd := exec.Command("go", "build", "-o", out, "./testdata/probe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the probe: %v\n%s", err, msg)
	}
	return os.ReadFile(out)
})

// killUID kills every process whose real uid is uid.
func killUID(uid int) {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if u, ok := procUID(pid); ok && u == uid {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func procUID(pid int) (int, bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
			fields := strings.Fields(v)
			if len(fields) == 0 {
				return 0, false
			}
			u, err := strconv.Atoi(fields[0])
			return u, err == nil
		}
	}
	return 0, false
}

// alive reports whether pid is a process that has not exited.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

func listenTCP(t *testing.T, addr string) int {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	noErr(t, err)
	serve(t, ln)
	return ln.Addr().(*net.TCPAddr).Port
}

// listenUnix listens on a unix socket that every uid may connect to, as
// far as file permissions go.
func listenUnix(t *testing.T, path string) string {
	t.Helper()
	ln, err := net.Listen("unix", path)
	noErr(t, err)
	if !strings.HasPrefix(path, "@") {
		noErr(t, os.Chmod(path, 0o777))
	}
	serve(t, ln)
	return path
}

// serve accepts and drops connections until t ends.
func serve(t *testing.T, ln net.Listener) {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	noErr(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// serveDNS answers every datagram with itself marked as a response: enough
// of a resolver for a probe that checks the id.
func serveDNS(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	noErr(t, err)
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil || n < 3 {
				continue
			}
			buf[2] |= 0x80 // QR: a response
			pc.WriteTo(buf[:n], from)
		}
	}()
	return pc.LocalAddr().String()
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mkdirFixture(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	noErr(t, os.Mkdir(path, mode))
	noErr(t, os.Chmod(path, mode)) // past the umask
}

func writeFixture(t *testing.T, path string, mode os.FileMode, data string) {
	t.Helper()
	noErr(t, os.WriteFile(path, []byte(data), mode))
	noErr(t, os.Chmod(path, mode))
}

// ia32 reports whether this kernel runs i386 code: with ia32_emulation off,
// int 0x80 faults before any filter is asked, and the Int80 escapes have
// nothing to show.
var ia32 = sync.OnceValue(func() bool {
	bin, err := probeBinary()
	if err != nil {
		return true // the escape tests report the build failure
	}
	dir, err := os.MkdirTemp("", "kairo-probe-ia32-")
	if err != nil {
		return true
	}
	defer os.RemoveAll(dir)
	f := filepath.Join(dir, "probe")
	if err := os.WriteFile(f, bin, 0o700); err != nil {
		return true
	}
	out, _ := exec.Command(f, "int80").CombinedOutput()
	return !strings.Contains(string(out), "SIGSEGV")
})
