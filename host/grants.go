package host

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/manifests"
)

// Grants are what a plugin may reach through the host module: the methods
// it may call and the subjects it may publish on and subscribe to, from its
// manifest as the operator narrowed it (manifests.Plugin.Narrow). An empty
// list grants nothing. Options.Grants nil grants everything: that is for
// code the host runs as its own (tests, benchmarks); the kernel passes every
// plugin its grants.
//
// A Grants may be shared by several instances of a plugin; do not change it
// after the first Load that uses it.
type Grants struct {
	Call      []string // exact method names
	Publish   []string // subjects or patterns: "*" is one token, ">" the rest
	Subscribe []string // patterns; see CheckSubscriptions
	// OnDenied, when set, is told of every call or publish the grants
	// refused, as it happens: the kernel turns each into a
	// kairo.plugin.denied event. It runs inside the plugin's call, so it
	// must return quickly and must not call the plugin.
	OnDenied func(Denial)

	once    sync.Once
	err     error
	methods map[string]struct{}
	publish []*bus.Pattern
}

// Denial is a call or publish the grants refused. The plugin sees
// abi.ErrnoNotGranted.
type Denial struct {
	Plugin string // the name given at load
	Import string // abi.ImportCall or abi.ImportPublish
	Target string // the method or the subject asked for
}

func (d Denial) Error() string {
	return fmt.Sprintf("plugin %s: %s: not granted: %s", d.Plugin, d.Import, d.Target)
}

// GrantsFor returns the grants of a plugin manifest, narrowed or not.
func GrantsFor(m *manifests.Plugin, onDenied func(Denial)) *Grants {
	return &Grants{Call: m.Grants.Call, Publish: m.Grants.Publish, Subscribe: m.Grants.Subscribe, OnDenied: onDenied}
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
			pt, err := bus.CompilePattern(s)
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
			if err := bus.ValidatePattern(s); err != nil {
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
// plugin's Init asked for in abi.PluginInfo.Subscriptions) that the
// Subscribe grants do not cover. nil grants everything.
func (g *Grants) CheckSubscriptions(subs []string) error {
	if g == nil {
		return nil
	}
	var refused []string
	for _, s := range subs {
		ok := bus.ValidatePattern(s) == nil
		if ok {
			ok = false
			for _, grant := range g.Subscribe {
				if bus.ValidatePattern(grant) == nil && bus.Covers(grant, s) {
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

// deny reports a refused call or publish to OnDenied.
func (p *Plugin) deny(imp, target string) {
	g := p.opts.Grants
	p.logger.Debug("not granted", "import", imp, "target", target)
	if g != nil && g.OnDenied != nil {
		g.OnDenied(Denial{Plugin: p.opts.Name, Import: imp, Target: target})
	}
}
