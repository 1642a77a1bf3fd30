package proc

import (
	"os/exec"
	"syscall"
)

// Launcher turns a Spec into a command ready to start. It is the one seam
// every spawn goes through: the sandbox fills it with a launcher that
// confines the binary; until then Exec runs it as it is.
type Launcher interface {
	Command(spec *Spec) (*exec.Cmd, error)
}

// Exec is the plain launcher: the argv as given, in its own process group
// so that the whole tree can be signalled, killed when the kernel dies.
type Exec struct{}

func (Exec) Command(spec *Spec) (*exec.Cmd, error) {
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.Cwd
	cmd.Env = spec.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	return cmd, nil
}
