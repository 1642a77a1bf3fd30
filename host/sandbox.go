package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sandbox"
)

// sandboxLauncher is how the kernel starts binaries: confined, unless the
// operator turned the sandbox off. As root each tree gets a uid of its own
// and, where the host has cgroups, a cgroup under this home's; what an
// earlier run of this home left running is killed first, and a watchdog
// kills this home's trees should the daemon die without stopping.
func (d *Daemon) sandboxLauncher(home string, cfg manifests.Config) (proc.Launcher, error) {
	log := d.log
	if cfg.Sandbox.Mode == manifests.SandboxOff {
		log.Warn("the sandbox is off: spawned binaries run with the kernel's rights (sandbox.mode = \"off\")")
		return proc.Exec{}, nil
	}
	helper, err := sandboxHelper()
	if err != nil {
		return nil, err
	}
	// Temp folders and workspaces, one set per home (a home has one
	// kernel at a time), on disk: what a workspace holds must not take
	// memory. The home itself is 0700, which the sandboxes' uids may not
	// pass, so the folder is named after it in /var/tmp.
	sum := sha256.Sum256([]byte(home))
	name := hex.EncodeToString(sum[:8])
	root, err := proc.DiskRoot(name)
	if err != nil {
		return nil, err
	}
	sc := cfg.Sandbox
	limits := sandbox.Limits{
		CPUSeconds: uint64(sc.Limits.CPUSeconds), Memory: uint64(sc.Limits.Memory), Processes: uint64(sc.Limits.Processes),
		FileSize: uint64(sc.Limits.FileSize), OpenFiles: uint64(sc.Limits.OpenFiles),
		Wall: time.Duration(sc.Limits.WallSeconds) * time.Second, OutputBytes: uint64(sc.Limits.OutputBytes), OutputRate: uint64(sc.Limits.OutputRate),
	}
	l := &proc.Sandboxed{
		Helper: helper, Root: root, BestEffort: sc.BestEffort, Warm: 2, // two helpers wait for the next spawns
		UIDBase: int(sc.UIDBase), UIDCount: int(sc.UIDCount), Home: home, Limits: limits,
		KeepWorkspaces: sc.KeepWorkspaces, WorkspaceMax: int64(sc.WorkspaceMax), StopGrace: sc.StopGraceDuration(),
		ServeIPC: d.serveSkill,
	}
	if os.Geteuid() == 0 {
		if err := startCgroups(l, "kairo-"+name, filepath.Join(home, "watchdog.lock"), log); err != nil {
			return nil, err
		}
		if n := proc.SweepSandboxUIDs(home, int(sc.UIDBase), int(sc.UIDCount)); n > 0 {
			log.Warn("killed processes a previous run of this home left running in sandboxes", "count", n)
		}
	}
	l.RemoveScratch() // what an earlier run left, but the workspaces kept
	abi := sandbox.LandlockABI()
	if abi == 0 && !sc.BestEffort {
		log.Warn("this kernel has no Landlock: every spawn will be refused (set sandbox.best_effort to run them with seccomp and rlimits only)")
	}
	log.Info("sandbox on", "landlockABI", abi, "bestEffort", sc.BestEffort, "workspaces", root)
	if sandbox.CgoWarning != "" {
		log.Warn(sandbox.CgoWarning)
	}
	if sc.BestEffort {
		// What the default profile loses here; a skill's own grants may
		// lose more, and `kairo run --explain` says what.
		for _, miss := range sandbox.Unenforced(sandbox.Default(root, root, nil), abi) {
			log.Warn("best effort: not enforced on this kernel", "what", miss)
		}
	}
	return l, nil
}

// watchdogWait bounds how long a start waits for the cgroup watchdog of
// the home's previous run to clean up (it takes about 100 ms).
const watchdogWait = 10 * time.Second

// startCgroups gives l this home's cgroups, once what an earlier run left
// in them is dead, and their watchdog; without cgroups the trees are
// killed by process group and uid, as `kairo sandbox check` says. First
// it waits for the watchdog of the home's previous run, which would
// remove the cgroups and folders made before it is done; lockPath is the
// home's watchdog lock. It fails only when that watchdog does not exit.
func startCgroups(l *proc.Sandboxed, name, lockPath string, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), watchdogWait)
	lock, err := proc.LockWatchdog(ctx, lockPath)
	cancel()
	if err != nil {
		return err
	}
	if lock.Waited > 0 {
		log.Info("waited for the cgroup watchdog of the previous run of this home to clean up", "waited", lock.Waited)
	}
	cgs, err := proc.FindCgroups()
	if err == nil {
		var h *proc.CgroupHome
		if h, err = cgs.Home(name); err == nil {
			if n := h.Sweep(); n > 0 {
				log.Warn("killed processes a previous run of this home left in its cgroups", "count", n)
			}
			var exe string
			if exe, err = os.Executable(); err == nil {
				l.Watchdog, err = h.StartWatchdog(exe, lock, l.Scratch()...)
				lock = nil // the watchdog's, or given up
				if err == nil {
					l.Cgroups = h
					wd := l.Watchdog
					go func() { // ends with the watchdog, which the launcher's Close stops
						<-wd.Done()
						if !wd.Stopping() {
							log.Error("the cgroup watchdog exited: the process trees would outlive a daemon killed with SIGKILL", "pid", wd.PID())
						}
					}()
					log.Info("process trees in cgroups", "layout", cgs.String(), "home", h.Dirs())
					return nil
				}
			}
		}
	}
	if lock != nil {
		lock.Close()
	}
	log.Warn("no cgroups for the process trees: they are killed by process group and uid, not bounded as a whole, and may outlive a daemon killed with SIGKILL", "err", err)
	return nil
}

// sandboxHelper is the binary that confines and execs each spawn:
// kairo-sandbox beside the running binary when it is there (it links the
// helper alone, so it starts faster), else the running binary itself,
// which must then run sandbox.HelperMain when sandbox.IsHelper says it
// was started as the helper.
func sandboxHelper() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the kairo binary, the sandbox helper: %w", err)
	}
	small := filepath.Join(filepath.Dir(exe), "kairo-sandbox")
	if fi, err := os.Stat(small); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return small, nil
	}
	return exe, nil
}

// serveSkill is the launcher's proc.Sandboxed.ServeIPC: it serves conn,
// the kernel's end of a socket pair, to a skill whose manifest grants
// [ipc] scopes, with those scopes only. The launcher is made before the
// socket server, but no skill spawns before the server is up.
func (d *Daemon) serveSkill(conn *os.File, uid int, g manifests.IPCGrants, tree *proc.Tree, skill string) error {
	return d.srv.ServeFile(conn, kernel.Caller{
		Kind: kernel.KindSkill, Name: skill, UID: uint32(uid), GID: uint32(uid), Tree: tree,
		Grants: &kernel.Grants{Call: g.Call, Publish: g.Publish, Subscribe: g.Subscribe},
		// Installed skills by name and commands, within its own sandbox
		// (the kernel bounds them by its tree's policy).
		Spawn: &kernel.SpawnAuthority{Skills: []string{"*"}, Commands: true},
	})
}
