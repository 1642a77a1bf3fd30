package host

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
)

// What a plugin's call import starts: a kernel method, run on a goroutine of
// the plugin's unit with the plugin as the caller, or another plugin's
// service, delivered to that plugin as a ServiceCall. Either way the answer
// comes back as a CallResult in a later batch, so a plugin never waits in
// a call and a slow method never holds up a tick.

// maxServiceDepth bounds chains of service calls: a service that calls a
// service that calls... back into the first is cut off here, with an error
// the plugin sees, instead of ping-ponging for ever.
const maxServiceDepth = 8

// serviceDepth is how deep in a chain of service calls a batch is handled:
// 0 for events and results, n for a service call made at depth n-1.
type serviceDepth struct {
	n     int
	chain string // "a → b → c", for the error that cuts it off
}

// serviceCalls are the service calls delivered and not yet answered.
type serviceCalls struct {
	next    int64
	pending map[int64]*pendingService
}

type pendingService struct {
	caller   *unit
	gen      int // the caller's instance
	token    int64
	provider *unit
	pgen     int // the provider's instance
}

// queuedService is a service call waiting in its provider's inbox.
type queuedService struct {
	call  abi.ServiceCall
	depth serviceDepth
}

// call starts one call import of the plugin's instance gen.
func (u *unit) call(ctx context.Context, gen int, sess *pluginSession, c Call, depth serviceDepth) {
	m := u.m
	fail := func(code, format string, args ...any) {
		u.pushResult(gen, abi.CallResult{Token: c.Token, Error: abi.Errorf(code, format, args...)}, false)
	}
	m.mu.Lock()
	provider, isService := m.services[c.Method]
	if isService {
		chain := depth.chain
		if chain == "" {
			chain = u.name
		}
		chain += " → " + provider.name
		if depth.n+1 > maxServiceDepth {
			m.mu.Unlock()
			fail(abi.CodePermissionDenied, "call %s: service calls nested deeper than %d (%s): recursive host calls are cut off here", c.Method, maxServiceDepth, chain)
			return
		}
		m.svc.next++
		id := m.svc.next
		provider.inMu.Lock()
		pgen := provider.gen
		provider.calls = append(provider.calls, queuedService{
			call:  abi.ServiceCall{ID: id, Method: c.Method, Args: c.Args, From: u.name},
			depth: serviceDepth{n: depth.n + 1, chain: chain},
		})
		provider.inMu.Unlock()
		m.svc.pending[id] = &pendingService{caller: u, gen: gen, token: c.Token, provider: provider, pgen: pgen}
		m.mu.Unlock()
		provider.signal()
		return
	}
	m.mu.Unlock()

	u.inMu.Lock()
	if u.inFlight >= maxInFlight {
		u.inMu.Unlock()
		fail(abi.CodeUnavailable, "call %s: %d calls of this plugin are still running; wait for their results", c.Method, maxInFlight)
		return
	}
	u.inFlight++
	u.inMu.Unlock()
	m.wg.Add(1)
	go func() { // owned by the manager; ctx ends with the instance
		defer m.wg.Done()
		res, aerr := m.cfg.Kernel.Invoke(ctx, c.Method, &kernel.Call{Session: sess, Params: c.Args})
		u.pushResult(gen, abi.CallResult{Token: c.Token, Result: res, Error: aerr}, true)
	}()
}

// registerServices makes u the provider of its services.
func (m *Manager) registerServices(u *unit, services []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range services {
		if other, ok := m.services[s]; ok && other != u {
			return fmt.Errorf("plugin %s: service %s is already served by %s", u.name, s, other.name)
		}
	}
	for _, s := range services {
		m.services[s] = u
	}
	return nil
}

// unregisterServices withdraws u's services when its instance gen ends, and
// answers every call of them still unanswered with an error.
func (m *Manager) unregisterServices(u *unit, gen int) {
	m.mu.Lock()
	for s, p := range m.services {
		if p == u {
			delete(m.services, s)
		}
	}
	var orphans []*pendingService
	for id, p := range m.svc.pending {
		if p.provider == u && p.pgen <= gen {
			orphans = append(orphans, p)
			delete(m.svc.pending, id)
		}
	}
	m.mu.Unlock()
	u.inMu.Lock()
	u.calls = nil
	u.inMu.Unlock()
	for _, p := range orphans {
		p.caller.pushResult(p.gen, abi.CallResult{Token: p.token, Error: abi.Errorf(abi.CodeUnavailable, "plugin %s stopped before it answered", u.name)}, false)
	}
}

// answerService routes a provider's answer to the caller.
func (m *Manager) answerService(provider *unit, r abi.CallResult) {
	m.mu.Lock()
	p, ok := m.svc.pending[r.Token]
	if ok && p.provider == provider {
		delete(m.svc.pending, r.Token)
	}
	m.mu.Unlock()
	if !ok || p.provider != provider {
		m.log.Warn("a plugin answered a service call it was not given", "plugin", provider.name, "id", r.Token)
		return
	}
	p.caller.pushResult(p.gen, abi.CallResult{Token: p.token, Result: r.Result, Error: r.Error}, false)
}

// failServices answers the service calls of a batch whose plugin failed.
func (m *Manager) failServices(calls []abi.ServiceCall, provider string, err error) {
	for _, c := range calls {
		msg := err.Error()
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		m.mu.Lock()
		p, ok := m.svc.pending[c.ID]
		delete(m.svc.pending, c.ID)
		m.mu.Unlock()
		if ok {
			p.caller.pushResult(p.gen, abi.CallResult{Token: p.token, Error: abi.Errorf(abi.CodeUnavailable, "plugin %s failed handling %s: %s", provider, c.Method, msg)}, false)
		}
	}
}

// pluginSession is a plugin as a caller of the kernel. What it opens —
// subscriptions, processes — ends with the instance. Its uid is no real
// user's, so it sees and steers only what it spawned or attached to.
type pluginSession struct {
	ctx    context.Context
	caller kernel.Caller
}

func newPluginSession(ctx context.Context, name string) *pluginSession {
	return &pluginSession{ctx: ctx, caller: kernel.Caller{
		Kind: kernel.KindPlugin, Name: name, UID: math.MaxUint32, GID: math.MaxUint32,
		// What the operator granted the plugin: installed skills by name
		// and commands under the default profile, in workspaces Kairo makes.
		Spawn: &kernel.SpawnAuthority{Skills: []string{"*"}, Commands: true},
	}}
}

func (s *pluginSession) Caller() kernel.Caller              { return s.caller }
func (s *pluginSession) Context() context.Context           { return s.ctx }
func (s *pluginSession) PushChunks([]abi.StreamChunk) error { return nil }
func (s *pluginSession) EndStream(uint64, *abi.Error) error { return nil }

// PushEvents drops the events of a kernel subscription or replay: a plugin
// receives events through its declared subscriptions, in its batches.
func (s *pluginSession) PushEvents(uint64, []abi.Event) error { return nil }
