package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/sdk/client"
	"golang.org/x/sys/unix"
)

func runSpawn(ctx context.Context, args []string) error {
	f := newFlags("spawn", "kairo spawn [flags] [--] COMMAND [ARGS...] | kairo spawn --skill NAME [ARGS...]", `
Run COMMAND as a process of the kernel, attached to this terminal: its
stdout and stderr come here, this stdin goes to it (end of file closes its
stdin), and SIGINT, SIGTERM and SIGHUP are passed on to it; a second one
kills it. kairo exits with the process's exit code, or 128 + the number of
the signal that ended it, as a shell does.

kairo prints "kairo: spawned ID (pid N)" on stderr first: other clients of
the same user use ID with kairo attach and kairo kill. The process runs in
the kernel's sandbox with the default profile: it reads the system folders,
writes only its working folder and a temp folder of its own, has no network
and a minimal environment (PATH, HOME, TMPDIR, LANG). Flags end at COMMAND,
so COMMAND's own flags need no "--".`)
	usePTY := f.Bool("pty", false, "run the process on a pseudo-terminal, stderr merged into stdout; when stdin is a terminal, keys pass through raw and its size follows this one's")
	cwd := f.String("cwd", "", "the process's working `DIR` (default: the current directory)")
	mode := f.String("mode", "chunk", "stream output as it is read (`chunk`) or in whole lines (line)")
	corr := f.String("correlation", "", "the correlation `ID`: the run loop the process belongs to, which intent.cancel ends")
	skill := f.String("skill", "", "run the installed skill `NAME` (of $KAIRO_HOME/skills) under its manifest instead; ARGS are NAME=VALUE params, the rest appended")
	var argv []string
	var err error
	if err = f.parseFlags(args); err != nil {
		return err
	}
	if argv = f.Args(); len(argv) == 0 && *skill == "" {
		return &usageError{msg: "missing the command to run", synopsis: f.synopsis}
	}
	if *mode != "chunk" && *mode != "line" {
		return &usageError{msg: fmt.Sprintf("--mode %q: want chunk or line", *mode), synopsis: f.synopsis}
	}
	dir := *cwd
	switch {
	case dir == "" && os.Getenv(client.EnvIPCFD) != "":
		// Inside a skill: a workspace Kairo makes, the one folder a
		// skill's spawn may always work in.
	case dir == "":
		dir, _ = os.Getwd() // on failure, the kernel's
	default:
		dir, err = filepath.Abs(dir)
	}
	if err != nil {
		return fmt.Errorf("--cwd: %w", err)
	}
	params := abi.SpawnParams{Argv: argv, Cwd: dir, PTY: *usePTY, Mode: *mode, CorrelationID: *corr}
	if *skill != "" {
		params.Skill, params.Params, params.Argv = *skill, map[string]string{}, nil
		for _, a := range argv {
			if k, v, ok := strings.Cut(a, "="); ok && k != "" && !strings.HasPrefix(k, "-") && len(params.Argv) == 0 {
				params.Params[k] = v
			} else {
				params.Argv = append(params.Argv, a)
			}
		}
	}
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return spawnAttached(ctx, c, params)
}

// spawnAttached spawns params through c with this terminal attached: output
// here, stdin there, signals passed on; it returns the process's exit as an
// exitCode.
func spawnAttached(ctx context.Context, c *client.Client, params abi.SpawnParams) error {
	stdin := int(os.Stdin.Fd())
	interactive := params.PTY && isTerminal(stdin)
	if interactive {
		params.Cols, params.Rows, _ = termSize(stdin)
	}
	out := &output{}
	out.hold() // until the spawn's reply: "spawned pN" comes first
	c.OnChunk(out.chunk)
	// From here on signals are the process's: they are caught before the
	// spawn so that none is lost, and the calls use a context they do not
	// cancel.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	if interactive {
		signal.Notify(sigs, syscall.SIGWINCH)
	}
	defer signal.Stop(sigs)
	ctx = context.WithoutCancel(ctx)

	var info abi.ProcessInfo
	if err := c.Call(ctx, abi.MethodProcessSpawn, params, &info); err != nil {
		out.release()
		return callError("start the process", err)
	}
	fmt.Fprintf(os.Stderr, "kairo: spawned %s (pid %d)\n", termLine(info.ID), info.PID)
	out.release()
	var tty *terminal
	if interactive {
		var err error
		if tty, err = rawTerminal(stdin); err != nil {
			fmt.Fprintf(os.Stderr, "kairo: cannot put the terminal in raw mode, so keys are read a line at a time: %v\n", err)
		}
		defer tty.restore()
	}
	forwardStdin(c, info.ID)
	end, err := follow(ctx, c, info.ID, sigs, true, tty)
	tty.restore()
	if err != nil {
		return callError("wait for the process", err)
	}
	return processExit(end)
}

func runAttach(ctx context.Context, args []string) error {
	f := newFlags("attach", "kairo attach [--json] [--stdin] ID", `
Follow process ID, which a client of the same user spawned: its output from
now on comes here (what it wrote before is gone), until it exits; kairo then
exits with its exit code, as kairo spawn does. Ctrl-C stops following and
leaves the process running. A process that has ended prints the last lines
the kernel kept of it and how it ended.

With --json, each chunk of output is one JSON object on stdout:
{"type":"chunk","processId","stream","seq","encoding","chunk","truncated"},
with the chunk as text (encoding "utf8") or base64 (encoding "base64"); the
last line is {"type":"exit", ...} with the process as kairo ps --json shows
it. Without --stdin, what is typed at the terminal while kairo follows is
discarded when it ends, not left for the shell.`)
	asJSON := f.Bool("json", false, "print output and exit as JSON objects, one per line")
	withStdin := f.Bool("stdin", false, "pass this stdin to the process (end of file closes its stdin); on a PTY from a terminal, raw")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	id := pos[0]
	if !*withStdin {
		defer dropTypedInput(int(os.Stdin.Fd()))
	}
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	out := &output{json: *asJSON}
	c.OnChunk(out.chunk)
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	ctx = context.WithoutCancel(ctx) // a signal detaches, below

	var info abi.ProcessInfo
	if err := c.Call(ctx, abi.MethodProcessAttach, abi.ProcessRef{ProcessID: id}, &info); err != nil {
		return processError(abi.MethodProcessAttach, id, err)
	}
	if info.Status != abi.ProcessRunning {
		// It has ended: what it wrote last is all there is to follow.
		printEnded(info, *asJSON)
		return processExit(info)
	}
	var tty *terminal
	if stdin := int(os.Stdin.Fd()); *withStdin && info.PTY && isTerminal(stdin) && info.Status == abi.ProcessRunning {
		signal.Notify(sigs, syscall.SIGWINCH)
		if tty, err = rawTerminal(stdin); err != nil {
			fmt.Fprintf(os.Stderr, "kairo: cannot put the terminal in raw mode, so keys are read a line at a time: %v\n", err)
		}
		defer tty.restore()
		// The process's terminal takes this one's size, as after a SIGWINCH.
		if cols, rows, ok := termSize(stdin); ok {
			c.Call(ctx, abi.MethodProcessResize, abi.ResizeParams{ProcessID: id, Cols: cols, Rows: rows}, nil)
		}
	}
	if *withStdin {
		forwardStdin(c, id)
	}
	end, err := follow(ctx, c, id, sigs, false, tty)
	tty.restore()
	switch {
	case errors.Is(err, errDetached):
		fmt.Fprintf(os.Stderr, "kairo: stopped following %s; it runs on\n", termLine(id))
		return nil
	case err != nil:
		return callError("kairo attach", err)
	}
	if *asJSON {
		fmt.Printf("%s\n", marshalJSON(struct {
			Type string `json:"type"`
			processJSON
		}{"exit", newProcessJSON(end)}))
	}
	return processExit(end)
}

// dropTypedInput discards what was typed at the terminal fd and not read:
// kairo attach without --stdin reads nothing, and the keys typed while it
// followed a process would run in the shell once it exits. Only the
// foreground's to do: from the background, the flush would stop kairo
// (SIGTTOU), and the keys are the shell's anyway.
func dropTypedInput(fd int) {
	if !isTerminal(fd) {
		return
	}
	if pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP); err != nil || pgrp != unix.Getpgrp() {
		return
	}
	unix.IoctlSetInt(fd, unix.TCFLSH, unix.TCIFLUSH)
}

func runKill(ctx context.Context, args []string) error {
	f := newFlags("kill", "kairo kill [--signal SIG] [--wait DURATION] ID", `
Send a signal to process ID and its whole process tree, then print how it
stands. The process may belong to another client of the same user: kairo
attaches to it first, which is what lets a client steer it.`)
	sig := f.String("signal", "KILL", "the `SIG`nal: a name such as TERM or SIGINT, or a number")
	wait := f.Duration("wait", 5*time.Second, "wait up to `DURATION` for the process to exit before printing; 0 prints at once")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if *wait < 0 {
		return &usageError{msg: "--wait must not be negative", synopsis: f.synopsis}
	}
	id := pos[0]
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var info abi.ProcessInfo
	if err := c.Call(ctx, abi.MethodProcessAttach, abi.ProcessRef{ProcessID: id}, &info); err != nil {
		return processError(abi.MethodProcessAttach, id, err)
	}
	if info.Status != abi.ProcessRunning {
		return fmt.Errorf("nothing to signal: %s", describe(info))
	}
	if err := c.Call(ctx, abi.MethodProcessSignal, abi.SignalParams{ProcessID: id, Signal: *sig}, &info); err != nil {
		return processError(abi.MethodProcessSignal, id, err)
	}
	if *wait > 0 && endsProcess(*sig) {
		var res abi.WaitResult
		if err := c.Call(ctx, abi.MethodProcessWait, abi.WaitParams{ProcessID: id, Timeout: *wait}, &res); err != nil {
			return callError("kairo kill", err)
		}
		info = res.Process
	}
	fmt.Println(describe(info))
	return nil
}

// endsProcess reports whether sig, by default, ends a process: waiting for
// the exit after SIGSTOP or SIGCONT would only wait out --wait.
func endsProcess(sig string) bool {
	name := strings.TrimPrefix(strings.ToUpper(sig), "SIG")
	if n, err := strconv.Atoi(sig); err == nil {
		name = strings.TrimPrefix(unix.SignalName(syscall.Signal(n)), "SIG")
	}
	switch name {
	case "STOP", "TSTP", "TTIN", "TTOU", "CONT", "CHLD", "URG", "WINCH":
		return false
	}
	return true
}

func runPs(ctx context.Context, args []string) error {
	f := newFlags("ps", "kairo ps [--json]", `
List processes, running and ended, in the order they started
(process.status): those your user's clients spawned, from this connection
or any other, which kairo attach and kairo kill reach. The processes of
the agent, a skill or a plugin are listed to root only, who sees every
process.

EXIT is the exit code, or the signal that ended the process. With --json,
one JSON object per process: id, pid, argv, cwd, pty, status, exitCode,
signal, startedAt, exitedAt, correlationId, causationId.`)
	asJSON := f.Bool("json", false, "print one JSON object per process")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	var list []abi.ProcessInfo
	if err := callKernel(ctx, "kairo ps", abi.MethodProcessStatus, nil, &list); err != nil {
		return err
	}
	if *asJSON {
		for _, p := range list {
			fmt.Printf("%s\n", marshalJSON(newProcessJSON(p)))
		}
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprint(w, "ID\tPID\tSTATUS\tEXIT\tSTARTED\tARGV\n")
	for _, p := range list {
		exit := "-"
		switch {
		case p.ExitCode != nil:
			exit = strconv.Itoa(*p.ExitCode)
		case p.Signal != "":
			exit = p.Signal
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\n", termLine(p.ID), p.PID, termLine(p.Status), termLine(exit),
			p.StartedAt.Local().Format("2006-01-02 15:04:05"), termLine(shellJoin(p.Argv)))
	}
	return w.Flush()
}

// processJSON is the --json form of a process; the keys are the wire names
// of abi.ProcessInfo, and every key is always there.
type processJSON struct {
	ID            string     `json:"id"`
	PID           int        `json:"pid"`
	Argv          []string   `json:"argv"`
	Cwd           string     `json:"cwd"`
	PTY           bool       `json:"pty"`
	Status        string     `json:"status"`
	ExitCode      *int       `json:"exitCode"` // null unless it exited
	Signal        string     `json:"signal"`   // what ended it, if a signal did
	StartedAt     time.Time  `json:"startedAt"`
	ExitedAt      *time.Time `json:"exitedAt"` // null while it runs
	CorrelationID string     `json:"correlationId"`
	CausationID   string     `json:"causationId"`
}

func newProcessJSON(p abi.ProcessInfo) processJSON {
	o := processJSON{
		ID: p.ID, PID: p.PID, Argv: p.Argv, Cwd: p.Cwd, PTY: p.PTY, Status: p.Status,
		ExitCode: p.ExitCode, Signal: p.Signal, StartedAt: p.StartedAt,
		CorrelationID: p.CorrelationID, CausationID: p.CausationID,
	}
	if !p.ExitedAt.IsZero() {
		o.ExitedAt = &p.ExitedAt
	}
	return o
}

// shellJoin writes argv as a shell would read it back.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

// processError is callError, but a process the kernel does not know is
// named as the user wrote it, with where to look; one of another host
// keeps the kernel's word on which host runs it.
func processError(what, id string, err error) error {
	var ae *abi.Error
	if errors.As(err, &ae) && ae.Code == abi.CodeNotFound {
		if _, ok := proc.IDHost(id); ok && !strings.HasPrefix(ae.Message, "no process") {
			return errors.New(ae.Message)
		}
		return fmt.Errorf("no process %s; `kairo ps` lists yours", id)
	}
	return callError(what, err)
}
