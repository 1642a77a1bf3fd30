package mcp

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kairo-os/kairo/kernel/proc"
)

// stop ends the server process the way MCP asks of a client, then makes
// sure: stdin closed; after grace, SIGTERM to the process group; after
// grace again, SIGKILL to the group — and SIGKILL to the group in any case
// once the server is gone, for whatever it left running. hurry cuts the
// waits short. It returns once the process has exited and its group is
// gone.
func stop(p *proc.Session, grace time.Duration, hurry <-chan struct{}, log *slog.Logger) {
	pgid := p.Info().PID // the kernel starts each process as its group's leader
	p.CloseStdin()
	exited := func() bool {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.Done():
			return true
		case <-hurry:
		case <-t.C:
		}
		return false
	}
	if !exited() {
		signalGroup(pgid, syscall.SIGCONT, log) // a paused server could not act on SIGTERM
		signalGroup(pgid, syscall.SIGTERM, log)
		exited()
	}
	signalGroup(pgid, syscall.SIGKILL, log)
	<-p.Done()
	groupGone(pgid, log)
}

// groupGone waits, a short while, until no process of group pgid runs: a
// SIGKILL is sent at once, but a process takes a moment to die.
func groupGone(pgid int, log *slog.Logger) {
	deadline := time.Now().Add(2 * time.Second)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		if syscall.Kill(-pgid, 0) != nil || !groupRuns(pgid) {
			return
		}
		if time.Now().After(deadline) {
			log.Warn("processes of a killed mcp server still run", "pgid", pgid)
			return
		}
		time.Sleep(wait)
	}
}

// groupRuns reports whether a process of group pgid runs.
func groupRuns(pgid int) bool {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if pid, err := strconv.Atoi(d.Name()); err == nil {
			if runs, group := procState(pid); runs && group == pgid {
				return true
			}
		}
	}
	return false
}

// procState reports whether process pid runs (it exists and is not a
// zombie, dead but not yet reaped by whoever inherited it), and its group.
func procState(pid int) (runs bool, pgrp int) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false, 0
	}
	// pid (comm) state ppid pgrp ...; comm may hold anything.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 3 {
		return false, 0
	}
	pgrp, _ = strconv.Atoi(f[2])
	return f[0] != "Z" && f[0] != "X", pgrp
}

func signalGroup(pgid int, sig syscall.Signal, log *slog.Logger) {
	if pgid <= 1 {
		return
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		log.Warn("signal the process group of an mcp server", "pgid", pgid, "signal", sig, "err", err)
	}
}
