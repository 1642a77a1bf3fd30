package proc

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"syscall"

	"github.com/kairo-os/kairo/sandbox"
)

// Launcher turns a [Spec] into a command ready to start. It is the one seam
// every spawn goes through: [Sandboxed] confines the binary; [Exec] runs it as
// it is (for tests and an operator who turned the sandbox off).
type Launcher interface {
	Launch(spec *Spec) (*Launch, error)
}

// Launch is a command ready to start, and what the manager does around it.
type Launch struct {
	Cmd *exec.Cmd
	// Started, when set, runs once right after the start was attempted,
	// whether it worked or not. An error means the process did not get to
	// run its program: the manager kills and reaps it and the spawn fails
	// with that error.
	Started func() error
	// Handoff, when set, means Cmd is running already — a helper started
	// ahead of time — and gives it the process's stdio instead of a
	// Start (all three the terminal when ctty).
	Handoff func(stdin, stdout, stderr *os.File, ctty bool) error
	// Cleanup, when set, runs once after the process has exited and its
	// exit was published: it sweeps what is left of the tree and frees
	// what the launch took.
	Cleanup func()
	// Work is the process's workspace, when the launcher chose one.
	Work string
	// Policy is the sandbox the process runs in, when the launcher
	// confines it: the ceiling of what the process may start.
	Policy *sandbox.Policy

	cg      *cgroup        // the session's cgroup: its tree's for a root
	started func(*Session) // told the session once the spawn worked
}

// Exec is the plain launcher: the argv as given, in its own process group
// so that the whole tree can be signalled, killed when the kernel dies.
type Exec struct{}

// Launch builds the command of spec unconfined: its argv, folder and
// environment, a process group of its own and SIGKILL when the kernel dies.
func (Exec) Launch(spec *Spec) (*Launch, error) {
	if s := spec.Secrets; s != nil && len(s.Files) > 0 {
		// Unconfined, no folder is the spawn's alone to put them in.
		return nil, errors.New("secret files need the sandbox, which is off ([sandbox] mode); give the secrets as [secrets] env instead")
	}
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.Cwd
	cmd.Env = spec.Env
	if s := spec.Secrets; s != nil && len(s.Env) > 0 {
		base := cmd.Env
		if base == nil {
			base = os.Environ()
		}
		cmd.Env = append(slices.Clone(base), s.Env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	return &Launch{Cmd: cmd}, nil
}
