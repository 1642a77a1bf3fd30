package host

import (
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/audit"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sandbox"
)

// auditWatch reads the refusals the audit subsystem logs for this
// daemon's process trees and reports each to its tree (proc.Tree.Deny),
// which publishes kairo.sandbox.denied. It owns its Hold on audit and its
// Reader, whose goroutine calls route.
type auditWatch struct {
	procs  *proc.Manager
	log    *slog.Logger
	hold   *audit.Hold
	reader *audit.Reader

	// Owned by the Reader's goroutine: lost records are logged at most
	// once per lostEvery, with the count since.
	lost     int
	lostSaid time.Time
}

const lostEvery = 10 * time.Second

// startAudit starts reporting the sandbox's refusals when the daemon runs
// as root with the sandbox on and [sandbox] audit is not "off": it turns
// audit on if it is off (see audit.Hold) and publishes
// kairo.sandbox.audit. It never fails the start: when audit cannot be
// read, it says why once and the refusals are not reported.
func (d *Daemon) startAudit(k *kernel.Kernel, l proc.Launcher, cfg manifests.SandboxConfig) *auditWatch {
	return startAudit(k, l, cfg.Audit, d.log, d.publishSystem)
}

func startAudit(k *kernel.Kernel, l proc.Launcher, mode string, log *slog.Logger, publishSystem func(string, any) (uint64, error)) *auditWatch {
	if _, ok := l.(*proc.Sandboxed); !ok || mode == manifests.SandboxAuditOff {
		return nil
	}
	if os.Geteuid() != 0 {
		// Each tree runs as the kernel's own uid; audit is root's.
		log.Info("the sandbox's refusals are not reported: reading them from the audit subsystem needs a kernel run as root")
		return nil
	}
	data := abi.SandboxAudit{}
	say := func(reason string) {
		data.Reason = reason
		if !data.Reporting { // as it is now, whatever the Hold did
			st, err := audit.GetStatus()
			data.Enabled = err == nil && st.Enabled != audit.Off
		}
		if _, err := publishSystem(abi.SubjectSandboxAudit, data); err != nil {
			log.Warn("publish kairo.sandbox.audit", "err", err)
		}
	}
	hold, err := audit.Acquire(audit.DefaultDir, true)
	if err != nil {
		log.Warn("the sandbox's refusals are not reported: the audit subsystem cannot be used", "err", err)
		say(err.Error())
		return nil
	}
	st := hold.State
	data.Enabled, data.ByKairo, data.TurnedOn, data.Previous = st.Enabled, st.ByKairo, st.TurnedOn, st.Previous
	if st.TurnedOn {
		log.Warn("turned the audit subsystem on to learn the sandbox's refusals; it is turned off again when kairo stops")
	}
	w := &auditWatch{procs: k.Proc, log: log, hold: hold}
	w.reader, err = audit.Open(audit.Config{OnDenial: w.route, OnLost: w.lostRecords})
	if err != nil {
		hold.Release()
		log.Warn("the sandbox's refusals are not reported", "err", err)
		say(err.Error())
		return nil
	}
	data.Reporting = true
	// The sandboxes log their refusals from now on; without a reader they
	// would only fill the audit log.
	l.(*proc.Sandboxed).LogDenials = true
	reason := ""
	if v := sandbox.LandlockABI(); v < 7 {
		reason = "Landlock logs the refusals of the programs a sandbox runs from ABI 7 on; this kernel has ABI " + strconv.Itoa(v) + ": only the seccomp filter's refusals are reported"
		log.Info("the sandbox's refusals: " + reason)
	}
	say(reason)
	return w
}

// route hands d to the tree it belongs to: by the sandbox uid each tree
// has of its own, else by the refused process or the process that made
// its Landlock domain (the tree's first). A refusal of no tree of this
// daemon's — another kairo's, a program of the host's own — is dropped.
func (w *auditWatch) route(d audit.Denial) {
	var t *proc.Tree
	if d.UID > 0 {
		t = w.procs.TreeOfUID(d.UID)
	}
	if t == nil && d.PID > 0 {
		t = w.procs.TreeOfPID(d.PID)
	}
	if t == nil && d.DomainPID > 0 {
		t = w.procs.TreeOfPID(d.DomainPID)
	}
	if t == nil {
		w.log.Debug("a refusal of no tree of this daemon's", "uid", d.UID, "pid", d.PID, "domainPid", d.DomainPID, "op", d.Op, "object", d.Object)
		return
	}
	t.Deny(abi.SandboxDenied{PID: d.PID, Op: d.Op, Object: d.Object, Detail: d.Detail, Reporter: d.Reporter})
}

// lostRecords says that records were lost: some refusals went
// unreported.
func (w *auditWatch) lostRecords(n int, reason string) {
	w.lost += n
	if time.Since(w.lostSaid) < lostEvery {
		return
	}
	w.log.Warn("audit records were lost: some of the sandbox's refusals are not reported", "count", w.lost, "why", reason)
	w.lost, w.lostSaid = 0, time.Now()
}

// stop stops reading and gives the daemon's share of audit up: the last
// kairo of the machine to stop turns it off again, if a kairo turned it
// on. w may be nil.
func (w *auditWatch) stop() {
	if w == nil {
		return
	}
	w.reader.Close()
	if w.lost > 0 { // the count since the last warning; the goroutine has ended
		w.log.Warn("audit records were lost: some of the sandbox's refusals are not reported", "count", w.lost)
	}
	if err := w.hold.Release(); err != nil {
		w.log.Warn("the audit subsystem could not be restored", "err", err)
	}
}
