package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A warm helper is a helper started ahead of time, waiting on a control
// socket (descriptor 3) for the one spawn it will become: the Go runtime's
// start — most of a helper's cost — is then paid before the spawn is asked
// for. It gets its plan, argv, working folder and stdio in one message,
// the descriptors passed along, and goes on as a helper started for the
// spawn would.

// WarmArg follows [HelperArg] in a warm helper's argv.
const WarmArg = "--wait"

// maxRequest bounds a warm helper's request: the plan and the command line.
const maxRequest = maxPolicy + 256<<10

// warmReady is what a warm helper sends on its control socket once its
// runtime has started and it waits for a spawn.
const warmReady = 'r'

// StartWarm starts a warm helper: in a new session, with the parent-death
// signal set, waiting on the returned control socket. It returns once the
// helper says it is ready, so that a spawn handed to it never waits for
// its runtime to start. With filter set, the helper installs that seccomp
// filter while it waits, and runs only a spawn that [Cmd.Fits] it.
func StartWarm(helper string, filter *WarmFilter) (*exec.Cmd, *os.File, error) {
	cmd, ctl, err := BeginWarm(helper, filter)
	if err != nil {
		return nil, nil, err
	}
	if err := WaitWarm(cmd, ctl); err != nil {
		return nil, nil, err
	}
	return cmd, ctl, nil
}

// BeginWarm is the first half of [StartWarm]: it starts the helper and
// returns at once, before the helper is ready, which [WaitWarm] waits
// for. A caller that must note the helper's pid before anything can reap
// it (a subreaper's registry of the children it leaves to their
// exec.Cmd) holds its lock across BeginWarm alone: the helper's start,
// its Go runtime's, takes milliseconds on a loaded machine.
func BeginWarm(helper string, filter *WarmFilter) (*exec.Cmd, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: control socket: %w", err)
	}
	unix.SetNonblock(fds[0], true) // in the poller, so that waiting for ready has a deadline
	ctl, child := os.NewFile(uintptr(fds[0]), "warm-ctl"), os.NewFile(uintptr(fds[1]), "warm-ctl-child")
	defer child.Close()
	args := []string{helper, HelperArg, WarmArg}
	if filter != nil {
		args = append(args, filter.arg())
	}
	cmd := &exec.Cmd{
		Path:        helper,
		Args:        args,
		Env:         helperEnv,
		ExtraFiles:  []*os.File{child},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL},
	}
	if err := cmd.Start(); err != nil {
		ctl.Close()
		return nil, nil, err
	}
	return cmd, ctl, nil
}

// WaitWarm waits until the helper cmd, started by [BeginWarm], says on
// ctl that it is ready. When it does not within the helper's start
// timeout, WaitWarm closes ctl, kills the helper and waits for its exit.
func WaitWarm(cmd *exec.Cmd, ctl *os.File) error {
	var b [1]byte
	ctl.SetReadDeadline(time.Now().Add(startTimeout))
	if n, err := ctl.Read(b[:]); err != nil || n != 1 || b[0] != warmReady {
		ctl.Close()
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("sandbox: a warm helper did not get ready: %v", err)
	}
	ctl.SetReadDeadline(time.Time{})
	return nil
}

// Handoff gives c's spawn to the warm helper behind ctl, with stdin, stdout
// and stderr (all three the terminal when ctty, which becomes the
// helper's controlling terminal). Then Started says whether the target
// runs, as after Start.
func (c *Cmd) Handoff(ctl *os.File, stdin, stdout, stderr *os.File, ctty bool) error {
	msg := binary.AppendUvarint(nil, uint64(len(c.plan)))
	msg = append(msg, c.plan...)
	msg = binary.AppendUvarint(msg, uint64(len(c.argv)))
	for _, a := range append(c.argv, c.Dir) {
		msg = binary.AppendUvarint(msg, uint64(len(a)))
		msg = append(msg, a...)
	}
	if ctty {
		msg = append(msg, 1)
	} else {
		msg = append(msg, 0)
	}
	files := []*os.File{stdin, stdout, stderr, c.ExtraFiles[1]} // the status pipe
	if len(c.ExtraFiles) > 2 {
		files = append(files, c.ExtraFiles[2]) // the kernel connection
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	if err := unix.Sendmsg(int(ctl.Fd()), msg, unix.UnixRights(fds...), nil, 0); err != nil {
		return fmt.Errorf("sandbox: hand the spawn to a warm helper: %w", err)
	}
	c.handedOff = true
	return nil
}

// receive waits for a warm helper's spawn: it puts the descriptors where a
// helper started for the spawn has them, enters the working folder, takes
// the terminal, and returns the plan and argv.
func receive() (*plan, []string, error) {
	if _, err := unix.Write(policyFD, []byte{warmReady}); err != nil {
		return nil, nil, fmt.Errorf("say ready: %w", err)
	}
	buf := make([]byte, maxRequest)
	oob := make([]byte, unix.CmsgSpace(5*4))
	n, oobn, _, _, err := unix.Recvmsg(policyFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, nil, fmt.Errorf("wait for a spawn: %w", err)
	}
	if n == 0 {
		return nil, nil, errors.New("the kernel closed the control socket")
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, nil, fmt.Errorf("the spawn came without its descriptors")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) < 4 {
		return nil, nil, fmt.Errorf("the spawn came with %d descriptors, want 4 or 5", len(fds))
	}
	b := buf[:n]
	bad := errors.New("the spawn request is cut short")
	next := func() []byte {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			b = nil
			return nil
		}
		v := b[k : k+int(l)]
		b = b[k+int(l):]
		return v
	}
	raw := next()
	count, k := binary.Uvarint(b)
	if raw == nil || k <= 0 || count == 0 || count > uint64(len(b)) {
		return nil, nil, bad
	}
	b = b[k:]
	argv := make([]string, count)
	for i := range argv {
		argv[i] = string(next())
	}
	dir := string(next())
	if len(b) != 1 {
		return nil, nil, bad
	}
	ctty := b[0] == 1
	// Where a started helper has them: stdio, status, kernel connection.
	for i, target := range []int{0, 1, 2, statusFD, ipcFD}[:len(fds)] {
		if err := unix.Dup3(fds[i], target, 0); err != nil {
			return nil, nil, fmt.Errorf("take descriptor %d: %w", target, err)
		}
	}
	if dir != "" {
		if err := unix.Chdir(dir); err != nil {
			return nil, nil, fmt.Errorf("enter %s: %w", dir, err)
		}
	}
	if ctty {
		if err := unix.IoctlSetInt(0, unix.TIOCSCTTY, 0); err != nil {
			return nil, nil, fmt.Errorf("take the terminal: %w", err)
		}
	}
	p, err := decodePlan(raw)
	return p, argv, err
}
