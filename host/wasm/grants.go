package wasm

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/manifests"
)

// Grants are what a plugin may reach through the host module: the methods
// it may call and the subjects it may publish on and subscribe to, from its
// manifest as the operator narrowed it ([manifests.Plugin.Narrow]). An empty
// list grants nothing. [InstanceConfig.Grants] nil grants everything: that is for
// code the host runs as its own (tests, benchmarks); the kernel passes every
// plugin its grants.
//
// The lists are a [kernel.Grants], the one idea of what a principal may
// call, publish and subscribe to — a sandboxed skill's [ipc] grants are
// another — and the plugin's calls of kernel methods carry them, so the
// kernel holds the plugin to the same lists the host module does.
//
// A Grants may be shared by several instances of a plugin; do not change it
// after the first Load that uses it.
type Grants struct {
	kernel.Grants
	// OnDenied, when set, is told of every call or publish the grants
	// refused, as it happens: the manager counts them and reports a
	// batch's as one kairo.plugin.denied event. It runs inside the
	// plugin's call, so it must return quickly and must not call the
	// plugin.
	OnDenied func(Denial)

	// dropIn grants come from the operator, not from the manifest: a
	// module may import call or publish with nothing granted and is
	// refused at each use (see checkImports).
	dropIn bool

	once    sync.Once
	err     error
	methods map[string]struct{}
	publish []*abi.Pattern
}

// Denial is a call or publish the grants refused. The plugin sees
// [abi.ErrnoNotGranted].
type Denial struct {
	Plugin string // the name given at load
	Import string // abi.ImportCall or abi.ImportPublish
	Target string // the method or the subject asked for
}

// Error names the plugin, the import and what it was refused.
func (d Denial) Error() string {
	return fmt.Sprintf("plugin %s: %s: not granted: %s", d.Plugin, d.Import, d.Target)
}

// GrantsFor returns the grants of a plugin manifest, narrowed or not.
func GrantsFor(m *manifests.Plugin, onDenied func(Denial)) *Grants {
	return &Grants{Grants: kernel.Grants{Call: m.Grants.Call, Publish: m.Grants.Publish, Subscribe: m.Grants.Subscribe}, OnDenied: onDenied}
}

// compile validates the lists once and prepares them for the imports.
func (g *Grants) compile() error {
	g.once.Do(func() {
		var errs []error
		g.methods = make(map[string]struct{}, len(g.Call))
		for _, m := range g.Call {
			g.methods[m] = struct{}{}
		}
		for _, s := range g.Publish {
			pt, err := abi.CompilePattern(s)
			if s == "" {
				err = errors.New("an empty publish grant; list subjects or patterns such as \"kairo.agent.>\"")
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("grants: publish: %w", err))
				continue
			}
			g.publish = append(g.publish, pt)
		}
		for _, s := range g.Subscribe {
			if err := abi.ValidatePattern(s); err != nil {
				errs = append(errs, fmt.Errorf("grants: subscribe: %w", err))
			}
		}
		g.err = errors.Join(errs...)
	})
	return g.err
}

// checkImports refuses a module that imports call or publish when the
// grants grant no method or no subject at all: such a module could only be
// refused at every use. A module that imports call and is granted some
// methods loads, and each call of one not granted is refused as it happens.
func (g *Grants) checkImports(m wazero.CompiledModule) error {
	if g == nil {
		return nil
	}
	if g.dropIn {
		// What it may call is the operator's to grant, not its author's
		// to declare: until granted, each use is refused.
		return g.compile()
	}
	if err := g.compile(); err != nil {
		return err
	}
	for _, f := range m.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod != abi.HostModule {
			continue
		}
		switch {
		case name == abi.ImportCall && len(g.methods) == 0:
			return fmt.Errorf("the module imports %s.%s, but its manifest grants no method to call: list the methods it calls in [grants] call", mod, name)
		case name == abi.ImportPublish && len(g.publish) == 0:
			return fmt.Errorf("the module imports %s.%s, but its manifest grants no subject to publish on: list them in [grants] publish", mod, name)
		}
	}
	return nil
}

// allowCall reports whether method is granted; nil grants everything.
func (g *Grants) allowCall(method string) bool {
	if g == nil {
		return true
	}
	_, ok := g.methods[method]
	return ok
}

// allowPublish reports whether subject, a valid subject, is granted.
func (g *Grants) allowPublish(subject string) bool {
	if g == nil {
		return true
	}
	if bus.KernelOwned(subject) {
		return false // no grant covers a kernel subject
	}
	for _, pt := range g.publish {
		if pt.Match(subject) {
			return true
		}
	}
	return false
}

// CheckSubscriptions returns an error naming each pattern of subs (what a
// plugin's Init asked for in [abi.PluginInfo.Subscriptions]) that the
// Subscribe grants do not cover. nil grants everything.
func (g *Grants) CheckSubscriptions(subs []string) error {
	if g == nil {
		return nil
	}
	var refused []string
	for _, s := range subs {
		ok := abi.ValidatePattern(s) == nil
		if ok {
			ok = false
			for _, grant := range g.Subscribe {
				if abi.ValidatePattern(grant) == nil && abi.Covers(grant, s) {
					ok = true
					break
				}
			}
		}
		if !ok {
			refused = append(refused, fmt.Sprintf("%q", s))
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("not granted: subscribe %s (the grants cover %q)", strings.Join(refused, ", "), g.Subscribe)
	}
	return nil
}

// deny reports a refused call or publish to OnDenied. It is not logged
// here: a plugin can be refused 100,000 times a batch, and the manager
// reports the batch's refusals as one event.
func (p *Plugin) deny(imp, target string) {
	g := p.opts.Grants
	if g != nil && g.OnDenied != nil {
		g.OnDenied(Denial{Plugin: p.opts.Name, Import: imp, Target: target})
	}
}

// ImportSubscribe names a subscription refused for want of a grant in a
// [Denial]; the plugin's other subscriptions still run.
const ImportSubscribe = "subscribe"

// authority is what a plugin runs with: its manifest with the grants and
// limits the operator allows (what the host loads), what the manifest asked
// beyond them, and which of its limits a ceiling lowered.
type authority struct {
	plugin    *manifests.Plugin
	requested *abi.PluginGrant // nil: nothing beyond its grants
	capped    []string
	dropIn    bool
}

// grants returns the host grants of the authority, reporting refusals to
// onDenied.
func (a *authority) grants(onDenied func(Denial)) *Grants {
	g := GrantsFor(a.plugin, onDenied)
	g.dropIn = a.dropIn
	return g
}

// authorize decides what the plugin of manifest man, found in folder, runs
// with. See docs/RATIONALE.md#authority-comes-from-the-operator: a
// built-in (or a folder the embedder vouches for) gets its manifest's
// grants as the operator narrowed them; a drop-in gets its baseline (its
// own namespace, [plugin_limits] public, no method); both get what the operator
// granted in [plugins.NAME.grants] and with plugins.grant. Limits are
// capped by the ceilings.
func (m *Manager) authorize(man *manifests.Plugin, folder Folder) (*authority, error) {
	name := man.Plugin.Name
	op := m.cfg.Overrides[name]
	n, err := man.Narrow(op)
	if err != nil {
		return nil, err
	}
	a := &authority{plugin: n, dropIn: !folder.Builtin && !folder.Granted}
	asked := n.Grants
	base := asked
	if a.dropIn {
		base = manifests.PluginGrants{Subscribe: m.baseline(name), Publish: m.baseline(name)}
	}
	g := m.operatorGrants(name)
	n.Grants = manifests.PluginGrants{
		Subscribe: union(base.Subscribe, g.Subscribe),
		Publish:   union(base.Publish, g.Publish),
		Call:      union(base.Call, g.Call),
		WASI: manifests.WASIGrants{
			FS:  union(base.WASI.FS, g.WASIFS),
			Env: union(base.WASI.Env, g.WASIEnv),
		},
	}
	if a.dropIn {
		a.requested = beyond(name, asked, n.Grants)
	}
	a.capLimits(&m.cfg)
	return a, nil
}

// baseline is what a drop-in may subscribe to and publish on without a
// grant: its own namespace and the operator's public subjects.
func (m *Manager) baseline(name string) []string {
	return union([]string{"plugin." + name + ".>"}, m.cfg.Public)
}

// operatorGrants are the operator's grants to the plugin name:
// [plugins.NAME.grants] and those of the log (plugins.grant).
func (m *Manager) operatorGrants(name string) abi.PluginGrant {
	c := m.cfg.Overrides[name].Grants
	g := abi.PluginGrant{Plugin: name, Call: c.Call, Publish: c.Publish, Subscribe: c.Subscribe, WASIFS: c.WASIFS, WASIEnv: c.WASIEnv}
	m.grantMu.Lock()
	defer m.grantMu.Unlock()
	if l := m.granted[name]; l != nil {
		g.Call, g.Publish, g.Subscribe = union(g.Call, l.Call), union(g.Publish, l.Publish), union(g.Subscribe, l.Subscribe)
		g.WASIFS, g.WASIEnv = union(g.WASIFS, l.WASIFS), union(g.WASIEnv, l.WASIEnv)
	}
	return g
}

// capLimits fills in the plugin's memory and deadline, the host's defaults
// where its manifest and override leave them out, and lowers them to the
// ceilings, noting each it lowered.
func (a *authority) capLimits(cfg *ManagerConfig) {
	l := &a.plugin.Limits
	pages := l.MemoryPages()
	if pages == 0 {
		pages = cfg.MemoryPages
	}
	if pages > cfg.MaxMemoryPages {
		a.capped = append(a.capped, fmt.Sprintf("memory %s capped to %s", manifests.Size(pages)*manifests.WasmPageSize, manifests.Size(cfg.MaxMemoryPages)*manifests.WasmPageSize))
		pages = cfg.MaxMemoryPages
	}
	l.Memory = manifests.Size(pages) * manifests.WasmPageSize
	d := l.DeadlineDuration()
	if d == 0 {
		d = cfg.Deadline
	}
	if d > cfg.MaxDeadline {
		a.capped = append(a.capped, fmt.Sprintf("deadline %v capped to %v", d, cfg.MaxDeadline))
		d = cfg.MaxDeadline
	}
	l.Deadline = d.String()
}

// beyond returns what asked holds that granted does not cover, or nil.
func beyond(name string, asked, granted manifests.PluginGrants) *abi.PluginGrant {
	covers := func(g, p string) bool { return abi.ValidatePattern(p) == nil && abi.Covers(g, p) }
	same := func(g, e string) bool { return g == e }
	under := func(g, e string) bool {
		rel, err := filepath.Rel(g, e)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
	}
	left := func(want, have []string, ok func(g, e string) bool, kernelOwned bool) []string {
		var out []string
		for _, e := range want {
			if !slices.ContainsFunc(have, func(g string) bool { return ok(g, e) }) || (kernelOwned && bus.KernelOwned(e)) {
				out = append(out, e)
			}
		}
		return out
	}
	r := &abi.PluginGrant{
		Plugin:    name,
		Subscribe: left(asked.Subscribe, granted.Subscribe, covers, false),
		Publish:   left(asked.Publish, granted.Publish, covers, true),
		Call:      left(asked.Call, granted.Call, same, false),
		WASIFS:    left(asked.WASI.FS, granted.WASI.FS, under, false),
		WASIEnv:   left(asked.WASI.Env, granted.WASI.Env, same, false),
	}
	if len(r.Subscribe)+len(r.Publish)+len(r.Call)+len(r.WASIFS)+len(r.WASIEnv) == 0 {
		return nil
	}
	return r
}

// union returns a followed by the entries of b it does not hold.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, e := range b {
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// without returns a without the entries of b.
func without(a, b []string) []string {
	return slices.DeleteFunc(slices.Clone(a), func(e string) bool { return slices.Contains(b, e) })
}

// foldGrant applies one kairo.plugin.granted (revoke false) or
// kairo.plugin.revoked event to the grants of the log.
func (m *Manager) foldGrant(g *abi.PluginGrant, revoke bool) {
	m.grantMu.Lock()
	defer m.grantMu.Unlock()
	foldGrant(m.granted, g, revoke)
}

// foldGrant applies g, granted or revoked, to the grants by plugin.
func foldGrant(granted map[string]*abi.PluginGrant, g *abi.PluginGrant, revoke bool) {
	cur := granted[g.Plugin]
	if cur == nil {
		cur = &abi.PluginGrant{Plugin: g.Plugin}
		granted[g.Plugin] = cur
	}
	op := union
	if revoke {
		op = without
	}
	cur.Call, cur.Publish, cur.Subscribe = op(cur.Call, g.Call), op(cur.Publish, g.Publish), op(cur.Subscribe, g.Subscribe)
	cur.WASIFS, cur.WASIEnv = op(cur.WASIFS, g.WASIFS), op(cur.WASIEnv, g.WASIEnv)
}

// Subjects of the operator's grants, published by the host.
const (
	subjectGranted = abi.SubjectPluginGranted
	subjectRevoked = abi.SubjectPluginRevoked
)

// foldLog reads the log's kairo.plugin.granted and kairo.plugin.revoked
// events, in order, into the grants — from the grants' checkpoint and the
// events after it when there is one the log agrees with: what the operator
// granted survives a restart because it is in the log.
func (m *Manager) foldLog(ctx context.Context) error {
	f := m.grantFold()
	if err := f.Start(ctx); err != nil {
		return fmt.Errorf("fold the operator's plugin grants from the log: %w", err)
	}
	m.grantMu.Lock()
	m.grantsRead = f.Read()
	f.State(func(l *grantLog) {
		for name, g := range l.Plugins {
			c := *g
			c.Call, c.Publish, c.Subscribe = slices.Clone(g.Call), slices.Clone(g.Publish), slices.Clone(g.Subscribe)
			c.WASIFS, c.WASIEnv = slices.Clone(g.WASIFS), slices.Clone(g.WASIEnv)
			m.granted[name] = &c
		}
	})
	m.grantMu.Unlock()
	if f.Path != "" {
		m.keepGrants = f.Keep(grantCheckpointEvery)
	}
	return nil
}

// maxDeniedTargets bounds the distinct refusals a kairo.plugin.denied event
// names; Count counts them all.
const maxDeniedTargets = 8

// deniedBatch gathers the refusals of one batch into the one event that
// reports them: a plugin refused 100,000 times costs one event, not
// 100,000.
type deniedBatch struct{ ev abi.PluginDenied }

func (b *deniedBatch) add(d Denial) {
	if b.ev.Count == 0 {
		b.ev.Import, b.ev.Target = d.Import, d.Target
	}
	b.ev.Count++
	if len(b.ev.Targets) < maxDeniedTargets {
		if t := d.Import + " " + d.Target; !slices.Contains(b.ev.Targets, t) {
			b.ev.Targets = append(b.ev.Targets, t)
		}
	}
}

// grantedSubscriptions returns the subscriptions of subs (what the
// plugin's init asked for) its grants cover. A built-in asking for one its
// manifest does not grant is refused, as its manifest is wrong; a drop-in
// runs with the ones granted, and the others are reported as denied.
func (u *unit) grantedSubscriptions(g *Grants, a *authority, subs []string) ([]string, error) {
	if !a.dropIn {
		if err := g.CheckSubscriptions(subs); err != nil {
			return nil, fmt.Errorf("plugin %s asks for events its manifest does not grant: %w", u.name, err)
		}
		return subs, nil
	}
	var ok []string
	for _, s := range subs {
		if g.CheckSubscriptions([]string{s}) == nil {
			ok = append(ok, s)
		} else {
			u.onDenied(Denial{Plugin: u.name, Import: ImportSubscribe, Target: s})
		}
	}
	u.flushDenied()
	return ok, nil
}

// waitingGrant is what a drop-in asked for and was not granted: what its
// manifest asks beyond its grants (requested) and the subscriptions its
// init asked for that its grants refused; nil when nothing waits.
func waitingGrant(name string, requested *abi.PluginGrant, refusedSubs []string) *abi.PluginGrant {
	w := &abi.PluginGrant{Plugin: name}
	if requested != nil {
		*w = *requested
		w.Plugin = name
	}
	w.Subscribe = union(w.Subscribe, refusedSubs)
	if len(w.Subscribe)+len(w.Publish)+len(w.Call)+len(w.WASIFS)+len(w.WASIEnv) == 0 {
		return nil
	}
	return w
}

// grantArgs are the KEY=VALUE arguments of `kairo plugins grant` that
// grant g, in the order the command lists its keys.
func grantArgs(g *abi.PluginGrant) []string {
	var args []string
	add := func(key string, l []string) {
		if len(l) > 0 {
			args = append(args, key+"="+strings.Join(l, ","))
		}
	}
	add("call", g.Call)
	add("publish", g.Publish)
	add("subscribe", g.Subscribe)
	add("fs", g.WASIFS)
	add("env", g.WASIEnv)
	return args
}

// grantCommand is the shell command that grants g:
// `kairo plugins grant NAME KEY=VALUE...`, each word quoted where a shell
// would read it otherwise ("subscribe=demo.>").
func grantCommand(g *abi.PluginGrant) string {
	words := append([]string{"kairo", "plugins", "grant", g.Plugin}, grantArgs(g)...)
	for i, w := range words {
		words[i] = shellQuote(w)
	}
	return strings.Join(words, " ")
}

// shellQuote is w as a POSIX shell reads it back: as it is when it holds
// only characters no shell treats specially, else in single quotes.
func shellQuote(w string) string {
	plain := w != "" && !strings.ContainsFunc(w, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./,=:@+%", r))
	})
	if plain {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

// warnWaiting tells the operator what the drop-in u asked for and was not
// granted, and the command that grants it: the plugin runs without it,
// receiving and reaching nothing of it, and would otherwise wait unseen.
// Said once per unit for what waits, not on every restart.
func (u *unit) warnWaiting(w *abi.PluginGrant) {
	if w == nil {
		return
	}
	cmd := grantCommand(w)
	u.mu.Lock()
	again := u.warned == cmd
	u.warned = cmd
	u.mu.Unlock()
	if again {
		return
	}
	asked := strings.Join(grantArgs(w), " ")
	u.m.log.Warn(fmt.Sprintf("plugin %s runs without what it asked for and was not granted (%s); to grant it: %s", u.name, asked, cmd),
		"plugin", u.name, "grant", cmd)
}
