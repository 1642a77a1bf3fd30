package wasm

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

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

// What one plugin's calls may hold of the host. A plugin that calls a
// service (its own, say) that never answers made the host keep every call
// for ever; now each waits at most serviceDeadline, a caller has at most
// maxPendingServices waiting and a provider at most maxQueuedServices
// queued, and past them a call fails at once with an error that names the
// bound. An instance's calls are dropped when it ends.
const (
	maxPendingServices = 64
	maxQueuedServices  = 256
	// maxCallResult caps the bytes of one call's result handed to a
	// plugin; a larger one is replaced by an error that says so.
	maxCallResult = 4 << 20
)

// serviceDeadline bounds how long a service call waits for its answer; a
// variable so that tests can shorten it before a manager starts.
var serviceDeadline = 30 * time.Second

// serviceDepth is how deep in a chain of service calls a batch is handled:
// 0 for events and results, n for a service call made at depth n-1.
type serviceDepth struct {
	n     int
	chain string // "a → b → c", for the error that cuts it off
	// writer is the writer of the batch the call was made in (writer.go):
	// a service a skill's event set off answers for the skill.
	writer string
}

// serviceCalls are the service calls delivered and not yet answered.
type serviceCalls struct {
	next     int64
	pending  map[int64]*pendingService
	byCaller map[*unit]int // how many of pending each caller has
}

type pendingService struct {
	caller   *unit
	gen      int // the caller's instance
	token    int64
	method   string
	provider *unit
	pgen     int         // the provider's instance
	timer    *time.Timer // answers the call with an error after wait
	wait     time.Duration
}

// dropPendingLocked removes the pending call id and stops its deadline;
// the caller holds m.mu.
func (m *Manager) dropPendingLocked(id int64) (*pendingService, bool) {
	p, ok := m.svc.pending[id]
	if !ok {
		return nil, false
	}
	delete(m.svc.pending, id)
	if m.svc.byCaller[p.caller]--; m.svc.byCaller[p.caller] <= 0 {
		delete(m.svc.byCaller, p.caller)
	}
	p.timer.Stop()
	return p, true
}

// expireService answers the service call id with an error once its
// deadline passed, and takes it out of its provider's inbox if it still
// waits there.
func (m *Manager) expireService(id int64, p *pendingService) {
	m.mu.Lock()
	if m.svc.pending[id] != p {
		m.mu.Unlock()
		return
	}
	m.dropPendingLocked(id)
	m.mu.Unlock()
	p.provider.dropQueued(map[int64]bool{id: true})
	p.caller.pushResult(p.gen, abi.CallResult{Token: p.token, Error: abi.Errorf(abi.CodeUnavailable,
		"call %s: plugin %s did not answer within %v (host serviceDeadline); the call is dropped", p.method, p.provider.name, p.wait)}, false)
}

// dropQueued takes the service calls of ids out of u's inbox.
func (u *unit) dropQueued(ids map[int64]bool) {
	u.inMu.Lock()
	u.calls = slices.DeleteFunc(u.calls, func(c queuedService) bool { return ids[c.call.ID] })
	u.inMu.Unlock()
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
		if n := m.svc.byCaller[u]; n >= maxPendingServices {
			m.mu.Unlock()
			fail(abi.CodeUnavailable, "call %s: %d service calls of this plugin wait for their answers, the most the host keeps (maxPendingServices); wait for their results", c.Method, n)
			return
		}
		provider.inMu.Lock()
		if n := len(provider.calls); n >= maxQueuedServices {
			provider.inMu.Unlock()
			m.mu.Unlock()
			fail(abi.CodeUnavailable, "call %s: plugin %s has %d service calls waiting, the most the host queues (maxQueuedServices); call again later", c.Method, provider.name, n)
			return
		}
		m.svc.next++
		id := m.svc.next
		pgen := provider.gen
		provider.calls = append(provider.calls, queuedService{
			call:  abi.ServiceCall{ID: id, Method: c.Method, Args: c.Args, From: u.name},
			depth: serviceDepth{n: depth.n + 1, chain: chain, writer: depth.writer},
		})
		provider.inMu.Unlock()
		ps := &pendingService{caller: u, gen: gen, token: c.Token, method: c.Method, provider: provider, pgen: pgen, wait: serviceDeadline}
		ps.timer = time.AfterFunc(ps.wait, func() { m.expireService(id, ps) })
		m.svc.pending[id] = ps
		if m.svc.byCaller == nil {
			m.svc.byCaller = map[*unit]int{}
		}
		m.svc.byCaller[u]++
		m.mu.Unlock()
		provider.signal()
		return
	}
	m.mu.Unlock()

	if depth.writer != "" && c.Method == abi.MethodEventsPublish {
		// events.publish stamps the plugin's own source: the publish
		// import is the door that names the writer.
		fail(abi.CodePermissionDenied, "call %s: permission denied while handling events of %s: the kernel would stamp them as the plugin's own; publish them with the publish import, which names their writer", c.Method, depth.writer)
		return
	}
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
		r := abi.CallResult{Token: c.Token, Result: res, Error: aerr}
		capResult(c.Method, &r)
		u.pushResult(gen, r, true)
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

// capResult replaces a result over maxCallResult by an error that says so.
func capResult(method string, r *abi.CallResult) {
	if len(r.Result) > maxCallResult {
		r.Error = abi.Errorf(abi.CodeUnavailable, "call %s: its result of %d bytes is over the %d bytes the host hands a plugin (maxCallResult)", method, len(r.Result), maxCallResult)
		r.Result = nil
	}
}

// unregisterServices withdraws u's services when its instance gen ends, and
// answers every call of them still unanswered with an error. The service
// calls the instance made and still waited for are dropped, from the
// providers' inboxes too: nobody is left to read their answers.
func (m *Manager) unregisterServices(u *unit, gen int) {
	m.mu.Lock()
	for s, p := range m.services {
		if p == u {
			delete(m.services, s)
		}
	}
	var orphans []*pendingService
	dropped := map[*unit]map[int64]bool{}
	for id, p := range m.svc.pending {
		switch {
		case p.provider == u && p.pgen <= gen:
			orphans = append(orphans, p)
			m.dropPendingLocked(id)
		case p.caller == u && p.gen <= gen:
			if dropped[p.provider] == nil {
				dropped[p.provider] = map[int64]bool{}
			}
			dropped[p.provider][id] = true
			m.dropPendingLocked(id)
		}
	}
	m.mu.Unlock()
	for provider, ids := range dropped {
		provider.dropQueued(ids)
	}
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
		m.dropPendingLocked(r.Token)
	}
	m.mu.Unlock()
	if !ok || p.provider != provider {
		// Past its deadline, its caller gone, or never given.
		m.log.Debug("a service answer nobody waits for", "plugin", provider.name, "id", r.Token)
		return
	}
	res := abi.CallResult{Token: p.token, Result: r.Result, Error: r.Error}
	capResult(p.method, &res)
	p.caller.pushResult(p.gen, res, false)
}

// failServices answers the service calls of a batch whose plugin failed.
func (m *Manager) failServices(calls []abi.ServiceCall, provider string, err error) {
	for _, c := range calls {
		msg := err.Error()
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		m.mu.Lock()
		p, ok := m.dropPendingLocked(c.ID)
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

// Its calls carry the plugin's grants, so the kernel holds it to the lists
// its imports are checked against (nil: the host's own code, ungranted).
func newPluginSession(ctx context.Context, name string, grants *Grants) *pluginSession {
	s := &pluginSession{ctx: ctx, caller: kernel.Caller{
		Kind: kernel.KindPlugin, Name: name, UID: math.MaxUint32, GID: math.MaxUint32,
		// What the operator granted the plugin: installed skills by name
		// and commands under the default profile, in workspaces Kairo makes.
		Spawn: &kernel.SpawnAuthority{Skills: []string{"*"}, Commands: true},
	}}
	if grants != nil {
		s.caller.Grants = &grants.Grants
	}
	return s
}

func (s *pluginSession) Caller() kernel.Caller              { return s.caller }
func (s *pluginSession) Context() context.Context           { return s.ctx }
func (s *pluginSession) PushChunks([]abi.StreamChunk) error { return nil }
func (s *pluginSession) EndStream(uint64, *abi.Error) error { return nil }

// PushEvents drops the events of a kernel subscription or replay: a plugin
// receives events through its declared subscriptions, in its batches.
func (s *pluginSession) PushEvents(uint64, []abi.Event) error { return nil }
