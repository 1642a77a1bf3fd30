package host

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/kairo-os/kairo/internal/tools"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/sqlite"
	"github.com/kairo-os/kairo/kernel/ipc"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/plugins"
	"github.com/kairo-os/kairo/sandbox"
	"github.com/kairo-os/kairo/sdk/plugin"
)

// maxSocketPath is what fits in sockaddr_un.sun_path with its NUL.
const maxSocketPath = 107

// Config configures a Daemon.
type Config struct {
	// Mode is what the daemon runs; the zero value is Full, `kairo up`.
	Mode Mode
	// Home is the data folder, an absolute path: the store, the socket,
	// the lock, the skills and the plugins folder. Created 0700.
	Home string
	// Config is what kairo.toml decodes into over the embedded defaults
	// (manifests.Load, or manifests.Defaults()).
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
// sorted — abi.Methods, once it is up.
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
	agent   *agent.Runtime
	tools   *tools.Registry
	mcp     *mcpServers
	memory  *memory.Store
	console *console.Server // nil when [console] listen is ""

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
	b := bus.New(store, bus.Options{Host: hostName, Logger: log})
	k := kernel.New(b, kernel.Options{Version: d.cfg.Version, Host: hostName, Logger: log, Launcher: launcher, ApprovalTimeout: cfg.Approval.TimeoutDuration()})
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
	srv, err := ipc.Listen(k, ipc.ServerOptions{Path: sock, MaxFrame: uint32(cfg.Kernel.MaxFrame), Logger: log})
	if err != nil {
		b.Close()
		return err
	}
	d.kernel, d.bus, d.srv, d.served, d.launcher, d.sock = k, b, srv, make(chan error, 1), launcher, sock
	go func() { d.served <- srv.Serve() }()

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
	d.audit = d.startAudit(k, launcher, cfg.Sandbox) // before the first spawn
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
	if err := d.startAgent(home, cfg); err != nil {
		// The open checks what it can afford of a large store; the
		// agent's rebuild reads the rest.
		return sqlite.ExplainDamage(err, cfg.StorePath(home))
	}
	if err := d.startConsole(home, cfg); err != nil {
		return err
	}
	up := []any{"version", d.cfg.Version, "pid", os.Getpid(), "socket", sock, "store", store.Describe(), "lastSeq", seq}
	if hostName != "" {
		up = append(up, "host", hostName)
	}
	log.Info("kairo is up", up...)
	return nil
}

// startConsole starts the web console when [console] listen is set, last,
// so it serves a daemon that is up; console.url tells the operator where.
func (d *Daemon) startConsole(home string, cfg manifests.Config) error {
	if cfg.Console.Listen != "" {
		c, err := console.New(console.Config{
			Listen: cfg.Console.Listen, AllowRemote: cfg.Console.AllowRemote,
			Home: home, Socket: d.sock, Kernel: d.kernel, Logger: d.log,
		})
		if err != nil {
			return err
		}
		if err := c.Start(); err != nil {
			return err
		}
		d.console = c
	}
	// Registered once d.console is set: the table's lock orders the two.
	d.kernel.Register(kernel.Method{Name: abi.MethodConsoleURL, Summary: "the console's address with its token, for the operator", Quick: true, Handler: d.consoleURL})
	return nil
}

// consoleURL answers console.url: to the operator alone, as the URL holds
// the token.
func (d *Daemon) consoleURL(ctx context.Context, c *kernel.Call) (any, error) {
	if caller := c.Session.Caller(); caller.Kind != kernel.KindOperator || caller.Grants != nil {
		return nil, abi.Errorf(abi.CodePermissionDenied, "permission denied: %s may not read the console's token; only the operator may", caller)
	}
	if d.console == nil {
		return nil, abi.Errorf(abi.CodeUnavailable, "the console is off: set [console] listen = \"127.0.0.1:8765\" in kairo.toml and restart kairo up")
	}
	return abi.ConsoleURLResult{URL: d.console.URL()}, nil
}

// ConsoleURL is the console's address with its token; "" when the console
// is off ([console] listen) or the daemon is not up.
func (d *Daemon) ConsoleURL() string {
	if d.console == nil {
		return ""
	}
	return d.console.URL()
}

// startPlugins loads the plugins: the built-ins beside the kairo binary, then
// the drop-in folder, and follows the drop-in folder for changes.
func (d *Daemon) startPlugins(home string, cfg manifests.Config) error {
	folders := pluginFolders(home, cfg)
	builtins := builtinsOf(cfg, d.cfg.Builtins)
	d.plugins = wasm.NewManager(wasm.ManagerConfig{
		Engine: d.engine, Kernel: d.kernel, Folders: folders, Builtins: builtins, Overrides: cfg.Plugins,
		Deadline: cfg.PluginLimits.DeadlineDuration(), MemoryPages: uint32(cfg.PluginLimits.Memory / manifests.WasmPageSize),
		MaxDeadline: cfg.PluginLimits.MaxDeadlineDuration(), MaxMemoryPages: uint32(cfg.PluginLimits.MaxMemory / manifests.WasmPageSize), Public: cfg.PluginLimits.Public,
		MaxFailures: cfg.PluginLimits.MaxFailures, FailureWindow: cfg.PluginLimits.FailureWindowDuration(),
		Watch: true, Logger: d.log,
	})
	d.progress(Progress{Step: StepPlugins, Folders: folders, Cache: cfg.CachePath(home)})
	if err := d.plugins.Start(); err != nil {
		d.log.Warn("plugins load, but changes to their files need a restart", "err", err)
	}
	// The manager has a unit for every plugin it found, built in or in a
	// folder, running or not: an override of none of them names nothing.
	list := d.plugins.List()
	installed := map[string]bool{}
	n := 0
	for _, p := range list {
		installed[p.Name] = true
		if p.State == abi.PluginRunning {
			n++
		}
	}
	for name := range cfg.Plugins {
		if !installed[name] {
			d.log.Warn("kairo.toml has [plugins."+name+"], but no plugin of that name is installed", "folders", folders)
		}
	}
	d.log.Info("plugins loaded", "running", n, "of", len(list))
	d.progress(Progress{Step: StepAgent})
	return nil
}

// startEngine starts the plugin engine, which compiles the modules
// through the data folder's cache.
func (d *Daemon) startEngine(home string, cfg manifests.Config) error {
	h, err := wasm.NewEngine(wasm.EngineConfig{CacheDir: cfg.CachePath(home), Logger: d.log})
	if err != nil {
		return err
	}
	d.engine = h
	return nil
}

// openMemory opens the long-term memory [memory] describes; nil when it is
// off.
func (d *Daemon) openMemory(home string, cfg manifests.Config) (*agent.MemoryConfig, error) {
	m := cfg.Memory
	mc := &agent.MemoryConfig{KeepReasoning: m.KeepReasoning, Recall: m.Recall}
	if m.Recall == 0 || !m.Enabled {
		mc.Recall = -1 // none
	}
	if cfg.LLM.Configured() {
		mc.ShortTerm.Summarizer = agent.LLMSummarizer{Chat: d.llm}
	}
	if !m.Enabled {
		return mc, nil
	}
	opts := memory.Options{KeepReasoning: m.KeepReasoning, Logger: d.log}
	if e := m.Embeddings; e.BaseURL != "" {
		emb, err := memory.NewOpenAIEmbedder(memory.OpenAIConfig{BaseURL: e.BaseURL, Model: e.Model, APIKey: os.Getenv(e.APIKeyEnv), Dimensions: e.Dimensions})
		if err != nil {
			return nil, fmt.Errorf("[memory.embeddings]: %w", err)
		}
		opts.Embedder = emb
	}
	store, err := memory.Open(cfg.MemoryPath(home), opts)
	if err != nil {
		return nil, fmt.Errorf("open the memory: %w", err)
	}
	d.memory, mc.Store = store, store
	return mc, nil
}

// builtinsOf are the plugins compiled in that cfg runs: own, or nil for
// Kairo's; none with [host] builtins = false.
func builtinsOf(cfg manifests.Config, own []plugin.Builtin) []plugin.Builtin {
	switch {
	case !cfg.Host.Builtins:
		return nil
	case own != nil:
		return own
	}
	return plugins.Builtins()
}

// pluginFolders are where the plugins of a daemon on home are: the
// built-ins beside the running binary, then the drop-in folder.
func pluginFolders(home string, cfg manifests.Config) []wasm.Folder {
	var folders []wasm.Folder
	if cfg.Host.Builtins {
		if exe, err := os.Executable(); err == nil {
			folders = append(folders, wasm.Folder{Path: filepath.Join(filepath.Dir(exe), "plugins"), Builtin: true})
		}
	}
	return append(folders, wasm.Folder{Path: cfg.PluginsPath(home)})
}

// startAgent starts the agent: it rebuilds what it knows from the event log
// and starts ticking.
func (d *Daemon) startAgent(home string, cfg manifests.Config) error {
	a := cfg.Agent
	if err := d.startTools(home, cfg, true); err != nil {
		return err
	}
	reg := d.tools
	d.startMCP(cfg)
	mem, err := d.openMemory(home, cfg)
	if err != nil {
		return err
	}
	r, err := agent.New(agent.Config{
		Tools: reg, Memory: mem,
		Kernel: d.kernel, Policy: agent.PluginPolicy(d.plugins, a.Policy), Agent: a.ID,
		Hz: a.Hz, Overrun: agent.Overrun(a.Overrun), MaxIterations: a.MaxIterations,
		MaxToolCalls: a.MaxToolCalls, QueryBackoff: a.QueryBackoff, MinHz: a.MinHz, BargeIn: a.BargeIn, Spin: spinOf(a.TickSpinDuration()), Logger: d.log,
		Spawn: &kernel.SpawnAuthority{Skills: a.Grants.Skills, Commands: a.Grants.Commands, Folders: a.Grants.Folders},
		// The operator's [approval] rules and a skill's own [approval]:
		// the stricter of the two.
		Approval: func(tool string) string {
			return manifests.StricterApproval(cfg.Approval.ModeFor(tool), reg.ApprovalMode(tool))
		},
	})
	if err != nil {
		return err
	}
	if err := r.Start(); err != nil {
		return err
	}
	d.agent = r
	d.registerReplay()
	d.log.Info("agent up", "id", a.ID, "policy", a.Policy, "hz", a.Hz, "skills", len(reg.SkillNames()))
	return nil
}

// startTools starts the tool registry: with serve, the daemon's, whose
// kernel methods are registered, which calls the plugins' tools and
// follows the skills folder; without, a replay's, which knows the skills
// installed now.
func (d *Daemon) startTools(home string, cfg manifests.Config, serve bool) error {
	tc := tools.Config{Kernel: d.kernel, ResultDir: filepath.Join(home, "results"), Logger: d.log}
	if d.plugins != nil {
		tc.Plugins = d.plugins
	}
	if !serve {
		tc.Skills = findSkills(cfg.SkillsPath(home), d.log)
	}
	reg, err := tools.New(tc)
	if err != nil {
		return err
	}
	if serve {
		reg.Register()
		// The skills folder, followed as the plugins folder is: the
		// registry tells the kernel and the agent which skills are
		// installed now.
		if err := reg.WatchSkills(tools.SkillsFolder{Dir: cfg.SkillsPath(home), Stage: skillsStage(d.launcher)}); err != nil {
			reg.Close()
			return err
		}
	}
	d.tools = reg
	return nil
}

// skillsStage is where the daemon copies the installed skills for the
// sandboxes to run: as root they run as uids that may not pass through the
// home (mode 0700), so the copies go beside the workspaces, on a path they
// may pass. "" runs the skills in place: the sandboxes run as the daemon's
// own uid, or not at all.
func skillsStage(l proc.Launcher) string {
	if sl, ok := l.(*proc.Sandboxed); ok && os.Geteuid() == 0 && sl.Root != "" {
		return filepath.Join(sl.Root, "skills")
	}
	return ""
}

// installedSkills finds a skill of dir by name when it is asked for, so a
// skill added while the daemon runs is found, and one is found before the
// agent's tools are up.
func installedSkills(dir string) func(name string) (string, bool) {
	quiet := slog.New(slog.DiscardHandler)
	return func(name string) (string, bool) {
		// Most skills live in a folder of their name: that one manifest
		// is read, not the whole folder's.
		if filepath.Base(name) == name && name != "." && name != ".." {
			path := filepath.Join(dir, name, "skill.toml")
			if sk, err := manifests.LoadSkill(path); err == nil && sk.Skill.Name == name {
				return path, true
			}
		}
		path, ok := findSkills(dir, quiet)[name]
		return path, ok
	}
}

// findSkills lists the skills of dir: each folder with a valid
// skill.toml, by the name its manifest gives. A broken one is logged and
// left out.
func findSkills(dir string, log *slog.Logger) map[string]string {
	skills := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.Warn("cannot read the skills folder", "dir", dir, "err", err)
		}
		return skills
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name(), "skill.toml")
		if !e.IsDir() {
			continue
		}
		sk, err := manifests.LoadSkill(path)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				log.Warn("a skill the agent cannot run", "manifest", path, "err", err)
			}
			continue
		}
		skills[sk.Skill.Name] = path
	}
	return skills
}

// spinOf is the runtime's Spin for a configured duration: 0 means none.
func spinOf(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

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
		startCgroups(l, "kairo-"+name, log)
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

// startCgroups gives l this home's cgroups, once what an earlier run left
// in them is dead, and their watchdog; without cgroups the trees are
// killed by process group and uid, as `kairo sandbox check` says.
func startCgroups(l *proc.Sandboxed, name string, log *slog.Logger) {
	cgs, err := proc.FindCgroups()
	if err == nil {
		var h *proc.CgroupHome
		if h, err = cgs.Home(name); err == nil {
			if n := h.Sweep(); n > 0 {
				log.Warn("killed processes a previous run of this home left in its cgroups", "count", n)
			}
			var exe string
			if exe, err = os.Executable(); err == nil {
				if l.Watchdog, err = h.StartWatchdog(exe, l.Scratch()...); err == nil {
					l.Cgroups = h
					wd := l.Watchdog
					go func() { // ends with the watchdog, which the launcher's Close stops
						<-wd.Done()
						if !wd.Stopping() {
							log.Error("the cgroup watchdog exited: the process trees would outlive a daemon killed with SIGKILL", "pid", wd.PID())
						}
					}()
					log.Info("process trees in cgroups", "layout", cgs.String(), "home", h.Dirs())
					return
				}
			}
		}
	}
	log.Warn("no cgroups for the process trees: they are killed by process group and uid, not bounded as a whole, and may outlive a daemon killed with SIGKILL", "err", err)
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
	if d.agent != nil {
		d.agent.Stop()
	}
	if d.memory != nil {
		if err := d.memory.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close the memory: %w", err))
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
