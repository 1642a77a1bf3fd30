package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kairo-os/kairo/internal/pipes"
)

// HelperArg is the helper's argv[1]: a binary that calls [HelperMain] when it
// sees it (kairo does, first thing in main) can confine and exec a target.
const HelperArg = "__kairo_sandbox_exec"

// The helper's descriptors: its policy, the pipe it reports a failure on,
// and the kernel connection it hands the target (as ipcTargetFD).
const (
	policyFD    = 3
	statusFD    = 4
	ipcFD       = 5
	ipcTargetFD = 3
)

// maxPolicy bounds an encoded policy so that it fits a pipe's buffer and the
// kernel never blocks writing it.
const maxPolicy = 60 << 10

// IsHelper reports whether this process was started as the sandbox helper.
func IsHelper() bool { return len(os.Args) > 1 && os.Args[1] == HelperArg }

// Cmd is a sandboxed command: Cmd.Cmd starts the helper, which confines
// itself and execs the target.
type Cmd struct {
	*exec.Cmd
	// Target is the absolute path of the binary the helper execs.
	Target string
	status *os.File // read end of the helper's failure report

	plan      []byte      // for a warm helper (Handoff)
	filter    *WarmFilter // the plan's seccomp filter (Fits)
	argv      []string    // the target's, argv[0] its path
	handedOff bool
}

// helperEnv is a helper's environment: one P and no collector, so that its
// runtime starts and leaves with the fewest threads.
var helperEnv = []string{"GOMAXPROCS=1", "GOGC=off"}

// Command returns a command that runs argv under p: helper (the path of a
// binary that calls [HelperMain]) started in a new session with the
// parent-death signal set and p on an inherited pipe; it confines itself
// and execs argv[0], looked up in p's PATH when it has no slash. A target
// that does not exist or that p does not let execute is refused here, with
// the reason. Stdin, stdout and stderr are the caller's to set; after
// Cmd.Start (or an attempt at it) the caller calls Started.
func Command(helper string, p *Policy, argv []string) (*Cmd, error) {
	return command(helper, p, argv, false)
}

// HandoffCommand is [Command] for a spawn that a warm helper runs: the
// caller hands it over with [Cmd.Handoff] and then calls Started. It
// makes no policy pipe, as the plan travels in the handoff, and its
// Cmd.Cmd refuses to start.
func HandoffCommand(helper string, p *Policy, argv []string) (*Cmd, error) {
	return command(helper, p, argv, true)
}

// errHandoffOnly is what Start says of a HandoffCommand's Cmd.
var errHandoffOnly = errors.New("sandbox: this command was made for a warm helper's handoff (HandoffCommand): it has no policy pipe and cannot be started; use Command to start a helper")

func command(helper string, p *Policy, argv []string, handoff bool) (*Cmd, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("argv is empty: give the program and its arguments")
	}
	target, err := lookPath(argv[0], p.Env)
	if err != nil {
		return nil, err
	}
	if real := realPath(target); !under(real, realPaths(p.Exec)) {
		if real != target {
			return nil, fmt.Errorf("%s (which is %s) is not granted execute: add %s (or its folder) to fs.exec", target, real, real)
		}
		return nil, fmt.Errorf("%s is not granted execute: add it (or its folder) to fs.exec", target)
	}
	p = p.withLoaders(target)
	if p.IPC {
		p.Env = MergeEnv(p.Env, []string{"KAIRO_IPC_FD=" + strconv.Itoa(ipcTargetFD)})
	}
	if err := checkEnforceable(p); err != nil {
		return nil, err
	}
	pl, err := makePlan(p)
	if err != nil {
		return nil, err
	}
	enc := pl.encode()
	if len(enc) > maxPolicy {
		return nil, fmt.Errorf("sandbox: policy is %d bytes encoded, over the limit of %d: grant folders, not every file in them", len(enc), maxPolicy)
	}
	var pr *os.File // nil for a handoff: the child's descriptor 3 is the control socket
	if !handoff {
		var pw *os.File
		if pr, pw, err = pipe("policy", false); err != nil {
			return nil, err
		}
		_, err = pw.Write(enc) // within the pipe's buffer: maxPolicy
		pw.Close()
		if err != nil {
			pr.Close()
			return nil, fmt.Errorf("sandbox: hand over policy: %w", err)
		}
	}
	sr, sw, err := pipe("status", true)
	if err != nil {
		if pr != nil {
			pr.Close()
		}
		return nil, err
	}
	args := append([]string{helper, HelperArg, target}, argv[1:]...)
	cmd := &exec.Cmd{
		Path:       helper,
		Args:       args,
		Env:        helperEnv,
		Dir:        p.Dir,
		ExtraFiles: []*os.File{pr, sw},
		SysProcAttr: &syscall.SysProcAttr{
			Setsid:    true,
			Pdeathsig: syscall.SIGKILL,
		},
	}
	if handoff {
		cmd.Err = errHandoffOnly
	}
	return &Cmd{Cmd: cmd, Target: target, status: sr, plan: enc, filter: WarmFilterOf(p), argv: args[2:]}, nil
}

// pipe is a close-on-exec pipe whose ends stay out of the runtime's
// poller, but for the read end when pollRead is set ([pipes.Open]). The
// policy, which fits the pipe's buffer, is written at once and only a
// child reads it, so registering its ends (os.Pipe: four system calls, and
// two more to close them) bought nothing on a spawn's path; the status
// pipe's read end is in the poller for Started's deadline.
func pipe(name string, pollRead bool) (r, w *os.File, err error) {
	if r, w, err = pipes.Open(name, pollRead, false); err != nil {
		return nil, nil, fmt.Errorf("sandbox: %s pipe: %w", name, err)
	}
	return r, w, nil
}

// SetIPC gives the target f, a connection to the kernel, as descriptor 3
// (the policy must have IPC set). Call it before Start; Started closes the
// parent's copy.
func (c *Cmd) SetIPC(f *os.File) {
	c.ExtraFiles = append(c.ExtraFiles, f) // descriptor ipcFD in the helper
}

// startTimeout bounds the wait for a started helper to exec its target.
const startTimeout = 10 * time.Second

// Started closes the parent's copies of the helper's descriptors and, when
// the helper started, waits until it has exec'd the target or says why it
// could not; then the error is the helper's reason. Call it once after
// Start, whether Start succeeded or not.
func (c *Cmd) Started() error {
	// The helper has the policy: an ended process the kernel still lists
	// need not keep it.
	c.plan = nil
	for _, f := range c.ExtraFiles {
		if f != nil { // a HandoffCommand's policy pipe
			f.Close()
		}
	}
	defer c.status.Close()
	if c.Process == nil && !c.handedOff {
		return nil
	}
	c.status.SetReadDeadline(time.Now().Add(startTimeout))
	msg, err := io.ReadAll(io.LimitReader(c.status, 4096))
	if len(msg) > 0 {
		return errors.New(string(msg))
	}
	if err != nil {
		return fmt.Errorf("sandbox: waiting for the helper to start %s: %w", c.Target, err)
	}
	return nil
}

// lookPath finds file as execve would for a process with environment env:
// as given when it has a slash, else in env's PATH.
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		if !filepath.IsAbs(file) {
			return "", fmt.Errorf("%q: give the program as an absolute path or a bare name looked up in PATH", file)
		}
		return file, checkExecutable(file)
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		if f := filepath.Join(dir, file); checkExecutable(f) == nil {
			return f, nil
		}
	}
	return "", fmt.Errorf("%q: executable file not found in the sandbox's PATH %q", file, path)
}

func checkExecutable(file string) error {
	fi, err := os.Stat(file)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", file)
	}
	return nil
}

func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

func realPaths(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = factsOf(p).real
	}
	return out
}

// under reports whether path is one of roots or inside one.
func under(path string, roots []string) bool {
	for _, r := range roots {
		if path == r || strings.HasPrefix(path, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}
