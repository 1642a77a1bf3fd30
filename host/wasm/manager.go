package wasm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sdk/plugin"
)

// Folder is a folder of plugins: every NAME.wasm in it, with its manifest.
//
// A plugin of a drop-in folder (neither Builtin nor Granted) runs with
// what the operator granted, whatever its manifest asks: see
// [ManagerConfig.Public] and
// docs/RATIONALE.md#authority-comes-from-the-operator.
type Folder struct {
	Path string
	// Builtin plugins ship with Kairo and run trusted, with their
	// manifests' grants.
	Builtin bool
	// Granted plugins run with their manifests' grants, untrusted: the
	// embedder vouches for the manifests of a folder only it writes.
	Granted bool
}

// ManagerConfig configures a [Manager]. [Engine] and Kernel are required; zero
// values of the rest take the defaults the fields name.
type ManagerConfig struct {
	Engine *Engine
	Kernel *kernel.Kernel
	// Folders are scanned in order; a plugin name found again in a later
	// folder is refused.
	Folders []Folder
	// Builtins are plugins compiled into the host (native.go). They come
	// after the Builtin folders and before the others: a module of a
	// built-in folder replaces the built-in plugin of its name, and a
	// drop-in of that name is refused.
	Builtins []plugin.Builtin
	// Overrides are kairo.toml's [plugins.NAME].
	Overrides map[string]manifests.PluginOverride
	// Deadline and MemoryPages apply to a plugin whose manifest and
	// override leave them out; default 1 s and 1024 pages (64 MiB).
	Deadline    time.Duration
	MemoryPages uint32
	// MaxDeadline and MaxMemoryPages are ceilings no manifest and no
	// override exceeds; default 5 s and 4096 pages (256 MiB), and never
	// below Deadline and MemoryPages.
	MaxDeadline    time.Duration
	MaxMemoryPages uint32
	// Public are the subjects every drop-in plugin may subscribe to and
	// publish on besides its own namespace, plugin.NAME.> ([plugin_limits] public).
	Public []string
	// MaxFailures failures within FailureWindow leave a plugin stopped;
	// default 5 in 1 minute. Before that, a failed plugin restarts after
	// a pause that doubles from BackoffMin up to BackoffMax (default
	// 100 ms and 30 s).
	MaxFailures            int
	FailureWindow          time.Duration
	BackoffMin, BackoffMax time.Duration
	// Only, when set, names the plugins to load; the folders' others are
	// left alone (a replay loads its policy alone).
	Only []string
	// Watch reloads a plugin whose files change, loads new ones and
	// unloads removed ones, without restarting the host.
	Watch bool
	// LookupEnv reads the environment a plugin's wasi env grant copies
	// from; default os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// OnReply, when set, is given every reply of every plugin with what it
	// decided (the agent runtime reads policies' actions there). It runs
	// on the plugin's goroutine.
	OnReply func(plugin string, reply *abi.Reply)
	// Checkpoints is the folder of the grants' checkpoint, in the data
	// folder; "": none, each start folds the whole log.
	Checkpoints string
	Logger      *slog.Logger
}

func (c *ManagerConfig) defaults() {
	if c.Deadline <= 0 {
		c.Deadline = time.Second
	}
	if c.MemoryPages == 0 {
		c.MemoryPages = 1024
	}
	if c.MaxDeadline <= 0 {
		c.MaxDeadline = 5 * time.Second
	}
	if c.MaxMemoryPages == 0 {
		c.MaxMemoryPages = 4096
	}
	c.MaxDeadline = max(c.MaxDeadline, c.Deadline)
	c.MaxMemoryPages = max(c.MaxMemoryPages, c.MemoryPages)
	if c.MaxFailures <= 0 {
		c.MaxFailures = 5
	}
	if c.FailureWindow <= 0 {
		c.FailureWindow = time.Minute
	}
	if c.BackoffMin <= 0 {
		c.BackoffMin = 100 * time.Millisecond
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 30 * time.Second
	}
	if c.LookupEnv == nil {
		c.LookupEnv = os.LookupEnv
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Manager runs the plugins of its folders: each one loaded with the grants
// its manifest asks for and the operator allows, set up (init, services,
// subscriptions), fed batches of the events it subscribed to and the
// results of its calls, and supervised — a plugin that fails is reported
// as kairo.plugin.failed and restarted with backoff, and one that fails
// too often stays stopped. Every plugin runs on a goroutine of its own;
// none can stop the others.
type Manager struct {
	cfg ManagerConfig
	log *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the units' goroutines and the watcher

	scanMu sync.Mutex // one scan at a time

	natives []nativePlugin // cfg.Builtins whose manifests parse

	mu       sync.Mutex
	units    map[string]*unit
	services map[string]*unit // method → the running plugin serving it
	svc      serviceCalls

	// granted are the operator's grants recorded in the log
	// (plugins.grant, plugins.revoke), by plugin.
	grantMu    sync.Mutex
	granted    map[string]*abi.PluginGrant
	keepGrants func() // stops the grants' checkpoint's saves; nil without one
	grantsRead uint64 // events the start's fold read

	// hints are the modules of the units a scan or a reload stopped, held
	// for the units that replace them (unit_module.go).
	hintMu sync.Mutex
	hints  map[string]*unitModule
}

// NewManager returns a [Manager]; Start loads the plugins.
func NewManager(cfg ManagerConfig) *Manager {
	cfg.defaults()
	m := &Manager{cfg: cfg, log: cfg.Logger, units: map[string]*unit{}, services: map[string]*unit{}, granted: map[string]*abi.PluginGrant{}}
	m.svc.pending = map[int64]*pendingService{}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	for i := range cfg.Builtins {
		b := &cfg.Builtins[i]
		man, err := manifests.ParsePlugin("a built-in plugin's manifest", b.Manifest)
		if err != nil || b.New == nil {
			m.log.Error("a built-in plugin cannot run; it is left out", "err", cmp.Or[error](err, errors.New("no constructor")))
			continue
		}
		m.natives = append(m.natives, nativePlugin{name: man.Plugin.Name, Builtin: b})
	}
	return m
}

// Start folds the operator's grants of the log, registers the plugins.*
// methods in the kernel's table, loads every plugin of the folders and,
// with Watch, follows the folders. It returns once each plugin has started
// or failed its first start; a plugin that fails does not make Start fail.
func (m *Manager) Start() error {
	if err := m.foldLog(m.ctx); err != nil {
		// Without them the plugins run with less, never more.
		m.log.Error("plugins run without the grants of the log", "err", err)
	}
	m.cfg.Kernel.Register(kernel.Method{Name: abi.MethodPluginsList, Summary: "the plugins: state, grants, failures", Handler: m.listMethod})
	m.cfg.Kernel.Register(kernel.Method{Name: abi.MethodPluginsRestart, Summary: "start a stopped or failed plugin again", Handler: m.restartMethod})
	m.cfg.Kernel.Register(kernel.Method{Name: abi.MethodPluginsGrant, Summary: "grant a plugin methods and subjects (operator only; recorded in the log)", Handler: m.grantMethod(false)})
	m.cfg.Kernel.Register(kernel.Method{Name: abi.MethodPluginsRevoke, Summary: "take back what plugins.grant granted (operator only; recorded in the log)", Handler: m.grantMethod(true)})
	var watchErr error
	if m.cfg.Watch {
		watchErr = m.watch()
	}
	m.Rescan()
	// Every unit, not only those this scan started: the watcher's first
	// scan may have started some, and a start that returned with a plugin
	// still starting let the daemon judge [agent] policy too early.
	for _, u := range m.all() {
		u.waitStarted(m.ctx)
	}
	return watchErr
}

// Stop stops every plugin and waits for their goroutines.
func (m *Manager) Stop() {
	m.cancel()
	// A rescan under way finishes first, so no unit starts after this.
	m.scanMu.Lock()
	//lint:ignore SA2001 an empty critical section: a barrier
	m.scanMu.Unlock()
	units := m.all()
	for _, u := range units {
		u.stop()
	}
	m.wg.Wait()
	if m.keepGrants != nil {
		m.keepGrants() // saves it a last time: the bus is still open
	}
}

// Rescan compares the folders with the plugins loaded: it loads new ones,
// reloads changed ones and unloads removed ones. It returns the units it
// started. The watcher calls it; so may a test.
func (m *Manager) Rescan() []*unit {
	m.scanMu.Lock()
	defer m.scanMu.Unlock()
	if m.ctx.Err() != nil {
		return nil
	}
	found := map[string]pluginFiles{}
	add := func(name string, files pluginFiles) {
		if len(m.cfg.Only) > 0 && !slices.Contains(m.cfg.Only, name) {
			return
		}
		if prev, dup := found[name]; dup {
			m.log.Warn("two plugins have one name; the first is loaded", "plugin", name, "loaded", prev.source(), "ignored", files.source())
			return
		}
		found[name] = files
	}
	natives := func() {
		for _, b := range m.natives {
			add(b.name, pluginFiles{folder: Folder{Builtin: true}, native: b.Builtin})
		}
	}
	nativesAdded := false
	for _, f := range m.cfg.Folders {
		if !f.Builtin && !nativesAdded {
			natives()
			nativesAdded = true
		}
		entries, err := os.ReadDir(f.Path)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				m.log.Warn("cannot read a plugin folder", "folder", f.Path, "err", err)
			}
			continue
		}
		for _, e := range entries {
			name, ok := strings.CutSuffix(e.Name(), ".wasm")
			if !ok || e.IsDir() {
				continue
			}
			path := filepath.Join(f.Path, e.Name())
			add(name, pluginFiles{folder: f, wasm: path, stamp: stampOf(path)})
		}
	}
	if !nativesAdded {
		natives()
	}

	// The units to replace stop first, outside m.mu: a stopping unit
	// withdraws its services under it.
	var gone []*unit
	m.mu.Lock()
	for name, u := range m.units {
		if f, ok := found[name]; !ok || f.wasm != u.files.wasm || f.stamp != u.files.stamp {
			delete(m.units, name)
			gone = append(gone, u)
		}
	}
	m.mu.Unlock()
	for _, u := range gone {
		if f, ok := found[u.name]; ok {
			m.holdModule(u, &f)
		} else {
			m.holdModule(u, nil)
		}
	}
	for _, u := range gone {
		u.stop()
		if _, ok := found[u.name]; !ok {
			u.publishState(abi.SubjectPluginUnloaded, "its file was removed")
		}
	}

	var started []*unit
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(found)) {
		if _, ok := m.units[name]; ok {
			continue
		}
		u := m.newUnit(name, found[name])
		m.units[name] = u
		started = append(started, u)
	}
	m.dropHints()
	return started
}

// pluginFiles is where a plugin comes from and what its files looked like
// when it was loaded.
type pluginFiles struct {
	folder Folder
	wasm   string
	stamp  fileStamp
	// native is the plugin when it is built into the host; then wasm is
	// empty.
	native *plugin.Builtin
}

// source names where the plugin comes from, for a person.
func (f pluginFiles) source() string {
	if f.native != nil {
		return "built into kairo"
	}
	return f.wasm
}

// nativePlugin is a built-in plugin and the name its manifest gives it.
type nativePlugin struct {
	name string
	*plugin.Builtin
}

// fileStamp tells a changed file: the module's and the manifest's size and
// modification time.
type fileStamp struct {
	wasmSize, tomlSize int64
	wasmTime, tomlTime time.Time
}

func stampOf(wasm string) fileStamp {
	var s fileStamp
	if fi, err := os.Stat(wasm); err == nil {
		s.wasmSize, s.wasmTime = fi.Size(), fi.ModTime()
	}
	if fi, err := os.Stat(strings.TrimSuffix(wasm, ".wasm") + ".toml"); err == nil {
		s.tomlSize, s.tomlTime = fi.Size(), fi.ModTime()
	}
	return s
}

// List reports every plugin, sorted by name.
func (m *Manager) List() []abi.PluginStatus {
	units := m.all()
	out := make([]abi.PluginStatus, 0, len(units))
	for _, u := range units {
		out = append(out, u.status())
	}
	slices.SortFunc(out, func(a, b abi.PluginStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Restart starts a stopped, refused or failing plugin again at once, its
// failure count cleared.
func (m *Manager) Restart(name string) error {
	u, ok := m.unit(name)
	if !ok {
		return abi.Errorf(abi.CodeNotFound, "no plugin %q; plugins.list lists them", name)
	}
	u.restart()
	return nil
}

// Decide runs one tick of the policy plugin name: it hands the plugin batch
// (with the results of its earlier calls added) and returns its reply, once
// what it published is durable and its calls have started. From its first
// tick on, the plugin is driven by ticks alone.
func (m *Manager) Decide(ctx context.Context, name string, batch *abi.Batch) (*abi.Reply, error) {
	u, ok := m.unit(name)
	if !ok {
		return nil, fmt.Errorf("no policy plugin %q is installed; `kairo plugins` lists the plugins", name)
	}
	reply := make(chan decideResp, 1)
	select {
	case u.decide <- decideReq{batch: batch, reply: reply}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(decideWait):
		s := u.status()
		return nil, fmt.Errorf("policy plugin %s is not serving (%s%s)", name, s.State, suffix(s.Error))
	}
	select {
	case r := <-reply:
		return &r.reply, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Waiting reports whether the plugin name has call results, service calls
// or tool calls waiting for its next batch: a tick-driven policy whose
// model has answered needs a tick even when nothing else happened.
func (m *Manager) Waiting(name string) bool {
	u, ok := m.unit(name)
	if !ok {
		return false
	}
	u.inMu.Lock()
	defer u.inMu.Unlock()
	return len(u.results) > 0 || len(u.calls) > 0 || len(u.toolQueue) > 0
}

// Busy reports whether the plugin name has calls out that have not
// answered, or answers it has not been given yet: a policy still deciding.
func (m *Manager) Busy(name string) bool {
	u, ok := m.unit(name)
	if !ok {
		return false
	}
	u.inMu.Lock()
	defer u.inMu.Unlock()
	return u.inFlight > 0 || len(u.results) > 0
}

// InFlight reports how many calls of the plugin name have not answered
// yet.
func (m *Manager) InFlight(name string) int {
	u, ok := m.unit(name)
	if !ok {
		return 0
	}
	u.inMu.Lock()
	defer u.inMu.Unlock()
	return u.inFlight
}

// unit returns the plugin name's unit.
func (m *Manager) unit(name string) (*unit, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.units[name]
	return u, ok
}

// all returns every unit, as they are now.
func (m *Manager) all() []*unit {
	m.mu.Lock()
	defer m.mu.Unlock()
	units := make([]*unit, 0, len(m.units))
	for _, u := range m.units {
		units = append(units, u)
	}
	return units
}

// decideWait is how long a tick waits for a policy that is busy or
// restarting before it gives up on this tick.
const decideWait = 100 * time.Millisecond

func suffix(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

func (m *Manager) listMethod(ctx context.Context, c *kernel.Call) (any, error) {
	return abi.PluginsListResult{Plugins: m.List()}, nil
}

func (m *Manager) restartMethod(ctx context.Context, c *kernel.Call) (any, error) {
	var p abi.PluginRef
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	if err := m.Restart(p.Name); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// grantMethod is plugins.grant, or plugins.revoke: the operator grants a
// plugin more (or takes back what it granted). The grant is recorded in the
// log as kairo.plugin.granted (kairo.plugin.revoked), durable before it
// applies, and the plugin reloads with it. Only the operator may: a
// plugin, a skill or the agent asking for authority is refused whatever
// its own grants list.
func (m *Manager) grantMethod(revoke bool) kernel.Handler {
	method, subject := abi.MethodPluginsGrant, subjectGranted
	if revoke {
		method, subject = abi.MethodPluginsRevoke, subjectRevoked
	}
	return func(ctx context.Context, c *kernel.Call) (any, error) {
		caller := c.Session.Caller()
		if caller.Kind != kernel.KindOperator {
			return nil, abi.Errorf(abi.CodePermissionDenied, "%s is the operator's alone; %s may not change what a plugin is granted", method, caller)
		}
		var g abi.PluginGrant
		if err := c.Decode(&g); err != nil {
			return nil, err
		}
		g.By = caller.Source()
		if _, ok := m.unit(g.Plugin); !ok {
			return nil, abi.Errorf(abi.CodeNotFound, "no plugin %q; plugins.list lists them", g.Plugin)
		}
		og := manifests.OperatorGrants{Call: g.Call, Publish: g.Publish, Subscribe: g.Subscribe, WASIFS: g.WASIFS, WASIEnv: g.WASIEnv}
		if probs := og.Check(); len(probs) > 0 {
			return nil, abi.Errorf(abi.CodeInvalidParams, "%s %s: %s", method, g.Plugin, strings.Join(probs, "; "))
		}
		if len(g.Call)+len(g.Publish)+len(g.Subscribe)+len(g.WASIFS)+len(g.WASIEnv) == 0 {
			return nil, abi.Errorf(abi.CodeInvalidParams, "%s %s: nothing to grant; name methods (call) or subjects (publish, subscribe)", method, g.Plugin)
		}
		raw, err := msgpack.Marshal(&g)
		if err != nil {
			return nil, err
		}
		// Durable first: a grant applied but not recorded would be lost
		// at the next start.
		if _, err := m.cfg.Kernel.Bus.Publish(ctx, &abi.Event{Type: subject, Source: abi.PrincipalHost, Data: raw}); err != nil {
			return nil, fmt.Errorf("record %s: %w", subject, err)
		}
		m.foldGrant(&g, revoke)
		m.log.Info("plugin grants changed by the operator", "plugin", g.Plugin, "revoke", revoke, "call", g.Call, "publish", g.Publish, "subscribe", g.Subscribe)
		m.reload(ctx, g.Plugin)
		u, ok := m.unit(g.Plugin)
		if !ok {
			return nil, abi.Errorf(abi.CodeNotFound, "plugin %q was unloaded meanwhile", g.Plugin)
		}
		return u.status(), nil
	}
}

// reload replaces the unit of the plugin name with a new one, which reads
// its grants again, and waits for its first start.
func (m *Manager) reload(ctx context.Context, name string) {
	m.scanMu.Lock()
	defer m.scanMu.Unlock()
	if m.ctx.Err() != nil {
		return
	}
	m.mu.Lock()
	old, ok := m.units[name]
	delete(m.units, name)
	m.mu.Unlock()
	if !ok {
		return
	}
	m.holdModule(old, nil)
	old.stop()
	m.mu.Lock()
	u := m.newUnit(name, old.files)
	m.units[name] = u
	m.mu.Unlock()
	m.dropHints()
	u.waitStarted(ctx)
}

// publish appends a kairo.plugin.* event without waiting for it to be
// durable: the events report what happened and must never hold a plugin up.
func (m *Manager) publish(subject string, data any) {
	raw, err := msgpack.Marshal(data)
	if err != nil {
		m.log.Error("encode event", "subject", subject, "err", err)
		return
	}
	if _, err := m.cfg.Kernel.Bus.PublishAsync(&abi.Event{Type: subject, Source: "host", Data: raw}); err != nil && m.ctx.Err() == nil {
		m.log.Warn("publish", "subject", subject, "err", err)
	}
}

// options are the load options of a plugin whose manifest, as authorized
// (its grants and limits decided), is n.
func (m *Manager) options(n *manifests.Plugin, builtin bool, grants *Grants) InstanceConfig {
	o := InstanceConfig{
		Name:        n.Plugin.Name,
		Trusted:     builtin || n.Trusted,
		Deadline:    n.Limits.DeadlineDuration(),
		MemoryPages: n.Limits.MemoryPages(),
		Grants:      grants,
		WASI:        WASI{FS: n.Grants.WASI.FS, Env: n.Grants.WASI.Env, LookupEnv: m.cfg.LookupEnv},
		BusHost:     m.cfg.Kernel.Bus.Host(),
	}
	if o.Deadline == 0 {
		o.Deadline = min(m.cfg.Deadline, m.cfg.MaxDeadline)
	}
	if o.MemoryPages == 0 {
		o.MemoryPages = min(m.cfg.MemoryPages, m.cfg.MaxMemoryPages)
	}
	// init may do more than one batch's work, but not unboundedly more.
	o.StartDeadline = max(5*time.Second, o.Deadline)
	return o
}

// errRefused marks a plugin that cannot run as its files are: restarting
// it would fail the same way.
type errRefused struct{ err error }

func (e errRefused) Error() string { return e.err.Error() }
func (e errRefused) Unwrap() error { return e.err }
