package host

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host/wasm"
	"github.com/kairo-os/kairo/internal/agent"
	"github.com/kairo-os/kairo/internal/console"
	"github.com/kairo-os/kairo/internal/llm"
	"github.com/kairo-os/kairo/internal/memory"
	"github.com/kairo-os/kairo/internal/telemetry"
	"github.com/kairo-os/kairo/internal/tools"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/sqlite"
	"github.com/kairo-os/kairo/kernel/ipc"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sdk/plugin"

	"github.com/kairo-os/kairo/kernel/secrets"
)

// maxSocketPath is what fits in sockaddr_un.sun_path with its NUL.
const maxSocketPath = 107

// Config configures a [Daemon].
type Config struct {
	// Mode is what the daemon runs; the zero value is Full, `kairo up`.
	Mode Mode
	// Home is the data folder, an absolute path: the store, the socket,
	// the lock, the skills and the plugins folder. Created 0700.
	Home string
	// Config is what kairo.toml decodes into over the embedded defaults
	// (manifests.Load, or manifests.Default()).
	Config manifests.Config
	// Logger gets the daemon's structured log; nil discards it.
	Logger *slog.Logger
	// Version is the version kairo.system.started and `kairo status`
	// report.
	Version string
	// Progress, when set, is told each step of the start as it begins,
	// for a person watching a terminal.
	Progress func(Progress)
	// Lock is the home's lock when the caller took it ([LockHome]); the
	// daemon then owns it. Nil: Start takes it (a Replaying daemon needs
	// it given).
	Lock *os.File
	// Builtins are the plugins compiled into the daemon; nil is Kairo's
	// own (plugins.Builtins). [host] builtins = false in kairo.toml
	// leaves them out, as it does the built-in folder.
	Builtins []plugin.Builtin
	// Masker masks the secrets the daemon gives; the caller's log masks
	// with it too. nil: the kernel's own.
	Masker *secrets.Masker
}

// Progress is a step of a daemon's start.
type Progress struct {
	Step string // StepPlugins, StepAgent
	// Folders and Cache, for StepPlugins: the plugin folders it loads
	// and the compilation cache it loads them through.
	Folders []wasm.Folder
	Cache   string
}

// The steps of a start that take long enough to tell.
const (
	StepPlugins = "plugins" // loading (and compiling) the plugins
	StepAgent   = "agent"   // rebuilding the agent's state from the log
)

// New returns a daemon for cfg, not started.
func New(cfg Config) *Daemon {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	return &Daemon{cfg: cfg, log: cfg.Logger, ready: make(chan struct{})}
}

// Start brings the daemon up: it locks the data folder, opens the event
// store, starts the sandbox, the kernel and its socket, the LLM provider,
// the plugins, the tools and MCP servers, memory and the agent, in that
// order. It returns once the daemon serves, or with why it cannot, what it
// started stopped again. A daemon starts once.
func (d *Daemon) Start() error {
	select {
	case <-d.ready:
		return errors.New("host: the daemon was started before")
	default:
	}
	d.err = d.start()
	if d.err != nil {
		d.stop(context.Background())
	} else {
		// What kernel.ping answers: clients wait on it (client.WaitReady).
		d.kernel.SetReady(true)
	}
	close(d.ready)
	return d.err
}

// Ready waits until Start has returned, and returns its error; or ctx's.
func (d *Daemon) Ready(ctx context.Context) error {
	select {
	case <-d.ready:
		return d.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run starts the daemon and serves until ctx is done or the socket server
// fails, then stops it.
func (d *Daemon) Run(ctx context.Context) error {
	if err := d.Start(); err != nil {
		return err
	}
	var served error
	select {
	case <-ctx.Done():
	case served = <-d.served:
		d.log.Error("the socket server failed; stopping", "err", served)
	}
	return errors.Join(served, d.Stop(context.WithoutCancel(ctx)))
}

// Failed is where the socket server's error comes, should it stop serving
// before Stop; the daemon should then be stopped.
func (d *Daemon) Failed() <-chan error { return d.served }

// Socket is the path of the kernel's socket.
func (d *Daemon) Socket() string { return d.sock }

// Kernel is the daemon's kernel: its method table, bus and processes.
func (d *Daemon) Kernel() *kernel.Kernel { return d.kernel }

// Methods is the daemon's method table: every method its kernel serves,
// sorted — [abi.Methods], once it is up.
func (d *Daemon) Methods() []string { return d.kernel.Methods() }

// Plugins lists the daemon's plugins and their states.
func (d *Daemon) Plugins() []abi.PluginStatus {
	if d.plugins == nil {
		return nil
	}
	return d.plugins.List()
}

func (d *Daemon) progress(p Progress) {
	if d.cfg.Progress != nil {
		d.cfg.Progress(p)
	}
}

// Daemon is Kairo on one data folder: the event store, the kernel and its
// socket, the sandbox, the plugins, the LLM provider, the tools, the MCP
// servers, memory and the agent — what `kairo up` runs. Start brings the
// parts up in dependency order; Stop ends them in reverse, and the last
// event it stores is kairo.system.stopping.
type Daemon struct {
	cfg   Config
	lock  *os.File
	ready chan struct{} // closed once Start returned
	err   error         // Start's error, once ready is closed

	log    *slog.Logger
	kernel *kernel.Kernel
	bus    *bus.Bus
	srv    *ipc.Server
	served chan error // Serve's result
	sock   string

	engine  *wasm.Engine
	plugins *wasm.Manager
	llm     *llm.Mux
	agents  []*agent.Runtime
	router  *agent.Router
	tools   *tools.Registry
	mcp     *mcpServers
	// memories are the agents' memory stores, by file: two agents that
	// share one share the store.
	memories map[string]*memory.Store
	console  *console.Server    // nil when [console] listen is ""
	metrics  *telemetry.Metrics // nil when [telemetry] metrics_listen is ""
	// traces follows the log and exports its run loops ([telemetry]
	// otlp_endpoint); nil when off.
	traces *telemetry.Exporter
	vault  *secrets.Store

	launcher proc.Launcher
	audit    *auditWatch // nil when the sandbox's refusals are not read

	scratch    string   // a Private daemon's temp folder, removed at Stop
	scratchBus *bus.Bus // a Replaying daemon's tools' bus; d.bus is the log

	stopOnce sync.Once
	stopErr  error
}

// start brings the daemon up in its mode, or returns why it cannot; Start
// then stops what it started.
func (d *Daemon) start() error {
	switch d.cfg.Mode {
	case Full:
		return d.startFull()
	case Private:
		return d.startPrivate()
	case Replaying:
		if d.cfg.Lock == nil {
			return errors.New("host: a replaying daemon needs the data folder's lock (Config.Lock): a daemon that runs on it replays instead")
		}
		d.lock = d.cfg.Lock
		return d.startReplaying()
	}
	return fmt.Errorf("host: no such mode: %v", d.cfg.Mode)
}

// startFull brings up what `kairo up` runs.
func (d *Daemon) startFull() error {
	home, cfg, log := d.cfg.Home, d.cfg.Config, d.log
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("create the data folder: %w", err)
	}
	d.lock = d.cfg.Lock
	if d.lock == nil {
		lock, err := LockHome(home)
		if err != nil {
			return err
		}
		d.lock = lock
	}
	if fi, err := os.Stat(home); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("the data folder is open to other users; chmod 700 it", "home", home, "mode", fi.Mode().Perm())
	}
	sock := cfg.SocketPath(home)
	if len(sock) > maxSocketPath {
		return fmt.Errorf("the socket path %s is %d bytes, over the %d a Unix socket allows; set KAIRO_SOCKET or kernel.socket in kairo.toml to a shorter path", sock, len(sock), maxSocketPath)
	}
	hostName := cfg.HostName()
	// Stores other than memory are drivers (kernel/bus/sqlite is linked
	// here; cmd/kairo links kernel/bus/jetstream): an embedder links only
	// the stores it imports.
	var store bus.Store
	if cfg.Store.Kind == manifests.StoreMemory {
		store = bus.NewMemoryStore(cfg.Store.RingSize)
	} else {
		kind := cmp.Or(cfg.Store.Kind, manifests.StoreSQLite)
		s, err := bus.OpenStore(kind, bus.OpenConfig{Home: home, Settings: &cfg, Logger: log})
		if err != nil {
			return err
		}
		store = s
	}
	launcher, err := d.sandboxLauncher(home, cfg)
	if err != nil {
		store.Close()
		return err
	}
	b := bus.New(store, bus.Config{Host: hostName, Logger: log})
	vault, err := openSecrets(home, cfg)
	if err != nil {
		b.Close()
		return err
	}
	d.vault = vault
	k := kernel.New(b, kernel.Config{Version: d.cfg.Version, Host: hostName, Logger: log, Launcher: launcher, ApprovalTimeout: cfg.Approval.TimeoutDuration(),
		Checkpoints: cfg.CheckpointsDir(home), Secrets: vault, Masker: d.cfg.Masker})
	k.SetSkills(installedSkills(cfg.SkillsPath(home)))
	// What waited for a person when the daemon stopped waits again, with
	// what is left of its time.
	if err := k.LoadApprovals(context.Background()); err != nil {
		b.Close()
		return sqlite.ExplainDamage(err, cfg.StorePath(home))
	}
	if n := len(k.Approvals(false)); n > 0 {
		log.Warn("approvals wait for a decision: kairo approvals lists them", "pending", n)
	}
	srv, err := ipc.Listen(k, ipc.Config{Path: sock, MaxFrame: uint32(cfg.Kernel.MaxFrame), Logger: log})
	if err != nil {
		b.Close()
		return err
	}
	d.kernel, d.bus, d.srv, d.served, d.launcher, d.sock = k, b, srv, make(chan error, 1), launcher, sock

	seq, err := d.publishSystem(abi.SubjectSystemStarted, abi.SystemLifecycle{Version: d.cfg.Version, PID: os.Getpid()})
	var full *bus.DiskFullError
	switch {
	case errors.As(err, &full):
		// A full disk degrades the daemon, never stops it: it serves reads
		// and subscriptions, and publishes again once space is freed.
		log.Warn("the disk of the event store is full: kairo serves reads, refuses new events until space is freed, and records kairo.system.store.writable then", "store", store.Describe())
		seq = store.LastSeq()
	case err != nil:
		return err
	}
	// Before the socket serves, so before the first spawn: whether the
	// sandboxes log their refusals is part of their seccomp filter, which
	// the launcher's waiting helpers install ahead of a spawn.
	d.audit = d.startAudit(k, launcher, cfg.Sandbox)
	go func() { d.served <- srv.Serve() }()
	chat, err := llm.Open(cfg.LLM, b)
	if err != nil {
		return err
	}
	// One run loop at a time can be switched to its recorded answers.
	d.llm = llm.NewMux(chat)
	llm.Register(k, d.llm)
	if err := d.startEngine(home, cfg); err != nil {
		return err
	}
	if err := d.startPlugins(home, cfg); err != nil {
		return err
	}
	if err := d.startAgents(home, cfg); err != nil {
		// The open checks what it can afford of a large store; the
		// agent's rebuild reads the rest.
		return sqlite.ExplainDamage(err, cfg.StorePath(home))
	}
	if err := d.startConsole(home, cfg); err != nil {
		return err
	}
	if err := d.startTelemetry(home, cfg); err != nil {
		return err
	}
	up := []any{"version", d.cfg.Version, "pid", os.Getpid(), "socket", sock, "store", store.Describe(), "lastSeq", seq}
	if hostName != "" {
		up = append(up, "host", hostName)
	}
	log.Info("kairo is up", up...)
	return nil
}

func (d *Daemon) publishSystem(subject string, data any) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return d.publishSystemCtx(ctx, subject, data)
}

func (d *Daemon) publishSystemCtx(ctx context.Context, subject string, data any) (uint64, error) {
	raw, err := msgpack.Marshal(data)
	if err != nil {
		return 0, err
	}
	res, err := d.bus.Publish(ctx, &abi.Event{Type: subject, Source: "kernel", Data: raw})
	if err != nil {
		return 0, fmt.Errorf("publish %s: %w", subject, err)
	}
	return res.Seq, nil
}

// Stop closes the socket server first (its connections end, in-flight
// calls finish), then ends every process the kernel runs, so that
// kairo.system.stopping is the last event stored: a reader that finds
// another event last knows the daemon did not stop cleanly. Closing the bus
// then flushes every queued event and closes the store. ctx bounds the
// waits that have a bound (the console's requests, the last event); the
// processes get their grace whatever ctx says. A second Stop returns the
// first's error.
func (d *Daemon) Stop(ctx context.Context) error {
	d.stopOnce.Do(func() { d.stopErr = d.stop(ctx) })
	return d.stopErr
}

func (d *Daemon) stop(ctx context.Context) error {
	var errs []error
	if d.kernel != nil {
		d.kernel.SetReady(false) // a client that still pings learns it stops
	}
	if d.console != nil {
		// First: its streams end and its requests finish while the
		// kernel still serves them.
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := d.console.Close(cctx); err != nil {
			errs = append(errs, fmt.Errorf("close the console: %w", err))
		}
		cancel()
	}
	if d.srv != nil {
		if err := d.srv.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close the socket server: %w", err))
		}
	}
	d.stopTelemetry()
	// Each agent stops before the memory it writes to is closed.
	for _, r := range d.agents {
		r.Stop()
	}
	for path, m := range d.memories {
		if err := m.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close the memory %s: %w", path, err))
		}
	}
	if d.mcp != nil {
		d.mcp.stop() // before the kernel: stdin, SIGTERM, then SIGKILL
	}
	if d.tools != nil {
		d.tools.Close()
	}
	if d.plugins != nil {
		d.plugins.Stop() // before the kernel: their calls and processes end first
	}
	if d.engine != nil {
		d.engine.Close(context.WithoutCancel(ctx))
	}
	if d.kernel != nil {
		// Each tree gets SIGTERM and a grace to end on its own, then its
		// cgroup is killed: no process outlives the daemon; their exits
		// are stored.
		grace := proc.DefaultStopGrace
		if sl, ok := d.launcher.(*proc.Sandboxed); ok {
			grace = sl.StopGrace
		}
		d.kernel.Proc.Stop(grace)
	}
	d.audit.stop() // after the trees: their last refusals are still reported
	if d.kernel != nil {
		d.kernel.Close()
	}
	if sl, ok := d.launcher.(*proc.Sandboxed); ok {
		sl.Close()         // the helpers waiting for spawns, the watchdog
		sl.RemoveScratch() // temp folders and workspaces, but those kept
		// The home's folder itself, when no workspace is kept in it.
		os.Remove(filepath.Join(sl.Root, "keep"))
		os.Remove(sl.Root)
	}
	if d.srv != nil {
		// The log a daemon served ends with its stop; a replay's is read
		// only.
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if _, err := d.publishSystemCtx(pctx, abi.SubjectSystemStopping, abi.SystemLifecycle{Version: d.cfg.Version, PID: os.Getpid()}); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	if d.scratchBus != nil {
		d.scratchBus.Close()
	}
	if d.bus != nil {
		if err := d.bus.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close the event store: %w", err))
		}
	}
	if d.scratch != "" {
		os.RemoveAll(d.scratch)
	}
	if d.lock != nil {
		d.lock.Close()
	}
	return errors.Join(errs...)
}
