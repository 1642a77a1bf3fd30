package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/sqlite"
	"github.com/kairo-os/kairo/kernel/ipc"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/manifests"
)

// Mode is what a [Daemon] runs: the whole of `kairo up`, or one of the
// smaller kernels a command needs. Whatever the mode, the daemon is the
// one place the parts are put together.
type Mode int

const (
	// Full is `kairo up`: the data folder's store, the kernel and its
	// socket, the sandbox, the plugins, the LLM provider, the tools, MCP,
	// memory and the agent.
	Full Mode = iota
	// Private is the kernel `kairo run` starts when no daemon runs: an
	// in-memory bus, the sandbox, and a socket in a temp folder of its
	// own, removed at Stop; no data folder, plugins or agent. Config's
	// [sandbox] best_effort is honoured; Home is not used.
	Private
	// Replaying opens the data folder's log without serving it, for
	// [Daemon.Replay]: no socket, no processes, no agent. The caller
	// holds the data folder's lock ([Config.Lock]), so no daemon runs on it.
	Replaying
)

// String names the mode in errors.
func (m Mode) String() string {
	switch m {
	case Full:
		return "full"
	case Private:
		return "private"
	case Replaying:
		return "replaying"
	}
	return "mode " + strconv.Itoa(int(m))
}

// startPrivate starts the kernel of a Private daemon.
func (d *Daemon) startPrivate() error {
	log := d.log
	helper, err := sandboxHelper()
	if err != nil {
		return err
	}
	dir, err := proc.ScratchRoot("run-" + strconv.Itoa(os.Getpid()))
	if err != nil {
		return err
	}
	d.scratch = dir
	launcher := &proc.Sandboxed{
		Helper: helper, Root: filepath.Join(dir, "sandbox"), BestEffort: d.cfg.Config.Sandbox.BestEffort,
		ServeIPC: d.serveSkill,
	}
	if os.Geteuid() == 0 {
		// The run's tree in a cgroup of its own, ended with this process
		// even if it is killed.
		if err := startCgroups(launcher, "kairo-run-"+strconv.Itoa(os.Getpid()), filepath.Join(dir, "watchdog.lock"), log); err != nil {
			return err // d.stop removes dir
		}
	}
	b := bus.New(bus.NewMemoryStore(1<<12), bus.Config{})
	vault, err := openSecrets(d.cfg.Home, d.cfg.Config)
	if err != nil {
		b.Close()
		launcher.Close()
		return err
	}
	k := kernel.New(b, kernel.Config{Version: d.cfg.Version, Logger: log, Launcher: launcher, Secrets: vault, Masker: d.cfg.Masker})
	srv, err := ipc.Listen(k, ipc.Config{Path: filepath.Join(dir, "kernel.sock"), Logger: log})
	if err != nil {
		k.Close()
		launcher.Close()
		b.Close()
		return err
	}
	d.kernel, d.bus, d.srv, d.served, d.launcher, d.sock = k, b, srv, make(chan error, 1), launcher, srv.Addr()
	// The run's refusals, as `kairo up` learns them: a client prints them
	// at the run's end. Started before the socket serves, as in startFull.
	d.audit = d.startAudit(k, launcher, manifests.SandboxConfig{Audit: manifests.SandboxAuditAuto})
	go func() { d.served <- srv.Serve() }()
	return nil
}

// startReplaying opens the log of a Replaying daemon, and the plugin
// runtime and the tools its replays load the policy with.
func (d *Daemon) startReplaying() error {
	home, cfg := d.cfg.Home, d.cfg.Config
	if cfg.Store.Kind == manifests.StoreMemory || cfg.Store.Kind == manifests.StoreJetStream {
		return fmt.Errorf("replay: the event store is kept in %s, which kairo replay does not open on its own: start kairo up and replay the run loop then", cfg.Store.Kind)
	}
	path := cfg.StorePath(home)
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("replay: no event log at %s: is --home the data folder kairo up ran on?", path)
	}
	store, err := sqlite.Open(path, sqlite.Config{})
	if err != nil {
		return err
	}
	d.bus = bus.New(store, bus.Config{})
	if err := d.startEngine(home, cfg); err != nil {
		return err
	}
	// The tools the agent would have without its plugins and MCP servers,
	// which run only with the daemon; on a bus of their own, as nothing a
	// replay does may reach the log.
	scratch := bus.New(bus.NewMemoryStore(16), bus.Config{})
	d.kernel = kernel.New(scratch, kernel.Config{Logger: d.log})
	d.scratchBus = scratch
	return d.startTools(home, cfg, false)
}
