package wasm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/manifests"
)

// The bounds of a plugin's inbox: events wait for the plugin's next batch
// here, and a full inbox holds its subscription back (the bus then catches
// it up from the store), so a slow plugin costs memory only up to these.
const (
	maxInboxEvents = 1024
	maxBatchEvents = 256
	// maxInFlight bounds the kernel calls of one plugin that have not
	// answered yet; past it, a call is answered at once with an error.
	maxInFlight = 256
)

// unit is one plugin under supervision: its files, its state, and the
// goroutine that loads, serves and restarts it. A reload replaces the unit.
type unit struct {
	m     *Manager
	name  string
	files pluginFiles

	ctx     context.Context // the unit's life; cancelled by stop
	cancel  context.CancelFunc
	done    chan struct{}
	started chan struct{} // closed once the first start succeeded or failed
	kick    chan struct{} // restart now

	mu       sync.Mutex
	state    string
	since    time.Time
	lastErr  string
	failures []time.Time // within the window
	restarts int
	denied   int
	manifest *manifests.Plugin // as authorized
	trusted  bool
	info     abi.PluginInfo
	// requested is what the manifest asks beyond the grants; capped the
	// limits a ceiling lowered; refused the denials of the batch under
	// way, reported once it ends (flushDenied).
	requested *abi.PluginGrant
	capped    []string
	refused   deniedBatch
	// warned is the grant command the operator was last told (warnWaiting).
	warned string

	// The inbox, filled by the subscription, the kernel calls and other
	// plugins' service calls; the serving goroutine drains it.
	inMu     sync.Mutex
	gen      int // the instance generation; results for an older one are dropped
	events   []abi.Event
	results  []abi.CallResult
	calls    []queuedService
	inFlight int
	wake     chan struct{}
	room     chan struct{} // signalled when the inbox has room for events
	// decide carries the agent runtime's ticks to a policy plugin. Once it
	// has had one, the plugin is tick-driven: its inbox waits for the next
	// tick instead of waking it, so every reply it makes is a tick's.
	decide     chan decideReq
	tickDriven bool
	// nextSeq is where a restarted instance's subscription starts: after
	// the last batch handed to the plugin, so the events that were waiting
	// in the inbox when it failed are read again from the store.
	nextSeq uint64
	// Tool calls (toolcalls.go): queued for the next batch, and waiting
	// for their results by ID while an instance takes them (toolsOpen).
	toolQueue []abi.ToolCall
	toolWait  map[string]*toolWait
	toolsOpen bool

	// held is the module the unit's instances are made of (unit_module.go),
	// under mu.
	held unitModule
}

func (m *Manager) newUnit(name string, files pluginFiles) *unit {
	u := &unit{
		m: m, name: name, files: files,
		done: make(chan struct{}), started: make(chan struct{}), kick: make(chan struct{}, 1),
		wake: make(chan struct{}, 1), room: make(chan struct{}, 1), decide: make(chan decideReq),
		state: abi.PluginStarting, since: time.Now(),
	}
	u.ctx, u.cancel = context.WithCancel(m.ctx)
	u.held = m.takeHeld(name)
	if r := u.held.ready; r != nil {
		r.to.Store(u)
	}
	m.wg.Add(1)
	go u.run()
	return u
}

func (u *unit) stop() {
	u.cancel()
	<-u.done
}

func (u *unit) restart() {
	select {
	case u.kick <- struct{}{}:
	default:
	}
}

func (u *unit) waitStarted(ctx context.Context) {
	select {
	case <-u.started:
	case <-ctx.Done():
	}
}

func (u *unit) setState(state, msg string) {
	u.mu.Lock()
	u.state, u.since, u.lastErr = state, time.Now(), msg
	u.mu.Unlock()
}

func (u *unit) status() abi.PluginStatus {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := abi.PluginStatus{
		Name: u.name, File: u.files.wasm, Builtin: u.files.folder.Builtin, Native: u.files.native != nil, Trusted: u.trusted,
		State: u.state, Error: u.lastErr, Since: u.since,
		Failures: len(u.failures), Restarts: u.restarts, Denied: u.denied,
		Version: u.info.Version, Kinds: u.info.Kinds, Services: u.info.Services,
	}
	for _, t := range u.info.Tools {
		s.Tools = append(s.Tools, t.Name)
	}
	if n := u.manifest; n != nil {
		if s.Version == "" {
			s.Version = n.Plugin.Version
		}
		if len(s.Kinds) == 0 {
			s.Kinds = n.Plugin.Kinds
		}
		g := n.Grants
		s.Subscribe, s.Publish, s.Call, s.WASIFS, s.WASIEnv = g.Subscribe, g.Publish, g.Call, g.WASI.FS, g.WASI.Env
	}
	s.Requested, s.Capped = u.requested, u.capped
	return s
}

// run is the unit's goroutine: start, serve until the instance fails, then
// restart it after a pause, until the unit is stopped.
func (u *unit) run() {
	defer u.m.wg.Done()
	defer close(u.done)
	defer u.dropModules()
	startedOnce := sync.OnceFunc(func() { close(u.started) })
	defer startedOnce()
	envTries := 0
	for {
		err := u.serve(startedOnce)
		if u.ctx.Err() != nil {
			return
		}
		var pause time.Duration
		var rf errRefused
		switch {
		case errors.As(err, &rf):
			// It waits for its files to change or an operator: what it
			// holds is of no use meanwhile.
			u.dropModules()
			reason := err.Error()
			if environmental(err) {
				// Not the plugin's fault: it is tried again, less often
				// each time, until the machine has what it lacked.
				pause = min(envRetryMin<<min(envTries, 8), envRetryMax)
				envTries++
				reason = fmt.Sprintf("%s (a want of the machine, not of the plugin: tried again in %v)", reason, pause)
			}
			u.setState(abi.PluginRefused, reason)
			u.m.log.Error("plugin refused", "plugin", u.name, "err", reason)
			u.publishState(abi.SubjectPluginRefused, reason)
		default:
			pause = u.recordFailure(err)
		}
		// Its first start has ended, and its state says how: a Start
		// waiting for it reads refused or failed, never starting.
		startedOnce()
		if pause == 0 {
			// Stays as it is until its files change (a new unit) or an
			// operator restarts it: what it holds is of no use meanwhile.
			u.dropModules()
			select {
			case <-u.ctx.Done():
				return
			case <-u.kick:
				u.mu.Lock()
				u.failures = nil
				u.mu.Unlock()
				continue
			}
		}
		select {
		case <-u.ctx.Done():
			return
		case <-u.kick:
		case <-time.After(pause):
		}
		u.mu.Lock()
		u.restarts++
		u.mu.Unlock()
	}
}

// The pauses before a plugin refused for a want of the machine is tried
// again.
var envRetryMin, envRetryMax = 2 * time.Second, time.Minute

// environmental reports whether err is a want of the machine — disk space,
// memory, descriptors — rather than something wrong with the plugin.
// Errors that crossed a library as text are matched by their words.
func environmental(err error) bool {
	for _, e := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.ENOMEM, syscall.EMFILE, syscall.ENFILE, syscall.EAGAIN} {
		if errors.Is(err, e) || strings.Contains(err.Error(), e.Error()) {
			return true
		}
	}
	return false
}

// recordFailure counts a failure, reports it and returns the pause before
// the restart, or 0 when the plugin failed too often and stays stopped.
func (u *unit) recordFailure(err error) time.Duration {
	cfg := &u.m.cfg
	now := time.Now()
	u.mu.Lock()
	u.failures = slices.DeleteFunc(u.failures, func(t time.Time) bool { return now.Sub(t) > cfg.FailureWindow })
	u.failures = append(u.failures, now)
	n := len(u.failures)
	u.mu.Unlock()

	ev := abi.PluginFailed{Plugin: u.name, Op: "start", Reason: "error", Error: err.Error(), Failures: n}
	var f *Failure
	if errors.As(err, &f) {
		ev.Op, ev.Reason, ev.Error, ev.Stderr = f.Op, string(f.Reason), f.Err.Error(), f.Stderr
	}
	var pause time.Duration
	if n < cfg.MaxFailures {
		pause = cfg.BackoffMin << (n - 1)
		if pause > cfg.BackoffMax || pause <= 0 {
			pause = cfg.BackoffMax
		}
		ev.RestartIn = pause
		u.setState(abi.PluginBackoff, err.Error())
		u.m.log.Warn("plugin failed; restarting", "plugin", u.name, "op", ev.Op, "reason", ev.Reason, "err", ev.Error, "failures", n, "in", pause)
	} else {
		u.setState(abi.PluginStopped, fmt.Sprintf("failed %d times within %v; last: %v", n, cfg.FailureWindow, err))
		u.m.log.Error("plugin failed too often; it stays stopped", "plugin", u.name, "failures", n, "window", cfg.FailureWindow, "err", ev.Error)
	}
	u.m.publish(abi.SubjectPluginFailed, ev)
	if pause == 0 {
		u.publishState(abi.SubjectPluginStopped, fmt.Sprintf("failed %d times within %v", n, cfg.FailureWindow))
	}
	return pause
}

func (u *unit) publishState(subject, reason string) {
	u.mu.Lock()
	ev := abi.PluginState{Plugin: u.name, Version: u.info.Version, File: u.files.wasm, Reason: reason}
	u.mu.Unlock()
	u.m.publish(subject, ev)
}

// onDenied counts a call, publish or subscription the grants refused. It
// runs inside the plugin's call, so it only counts: flushDenied reports
// the batch's refusals as one event.
func (u *unit) onDenied(d Denial) {
	u.mu.Lock()
	u.denied++
	u.refused.add(d)
	u.mu.Unlock()
}

// flushDenied reports the refusals since the last flush as one
// kairo.plugin.denied event, if there were any.
func (u *unit) flushDenied() {
	u.mu.Lock()
	b := u.refused
	u.refused = deniedBatch{}
	u.mu.Unlock()
	if b.ev.Count > 0 {
		b.ev.Plugin = u.name
		u.m.publish(abi.SubjectPluginDenied, b.ev)
	}
}

// serve runs one instance: load, init, register its services, subscribe,
// then handle batches until the instance fails or the unit stops.
func (u *unit) serve(started func()) error {
	m := u.m
	man, wasm, err := u.readFiles()
	if err != nil {
		return errRefused{err}
	}
	// The instance the rescan made while it compared the module file, if
	// it was made of what was read.
	u.mu.Lock()
	ready := u.held.ready
	u.held.ready = nil
	u.mu.Unlock()
	if ready != nil && ready.man != man {
		ready.discard()
		ready = nil
	}
	var auth *authority
	if ready != nil {
		auth = ready.auth
	} else if auth, err = m.authorize(man, u.files.folder); err != nil {
		return errRefused{err}
	}
	n := auth.plugin
	u.mu.Lock()
	u.requested, u.capped = auth.requested, auth.capped
	u.mu.Unlock()
	if m.cfg.Overrides[u.name].Disabled() {
		u.mu.Lock()
		u.manifest = n
		u.mu.Unlock()
		u.setState(abi.PluginDisabled, "")
		started()
		<-u.ctx.Done()
		return nil
	}
	var grants *Grants
	var opts InstanceConfig
	if ready != nil {
		grants, opts = ready.grants, ready.opts
	} else {
		grants = auth.grants(u.onDenied)
		opts = m.options(n, u.files.folder.Builtin, grants)
	}
	u.mu.Lock()
	u.manifest, u.trusted = n, opts.Trusted
	u.state, u.since = abi.PluginStarting, time.Now()
	u.mu.Unlock()

	ctx, cancel := context.WithCancel(u.ctx)
	defer cancel()
	var p *Plugin
	var info abi.PluginInfo
	if ready != nil {
		// The unit holds the module it was made of, as instance does.
		if _, err = u.module(ctx, wasm, opts); err == nil {
			p, info, err = ready.take()
		} else {
			ready.discard()
		}
	} else {
		p, err = u.instance(ctx, wasm, opts)
	}
	if p == nil {
		var f *Failure
		if errors.As(err, &f) && f.Reason == ReasonRefused {
			return errRefused{err}
		}
		return err
	}
	defer p.Close(context.Background())
	if ready == nil {
		info, err = p.Init(ctx, abi.PluginConfig{Config: n.Config})
	}
	u.flushDenied()
	if err != nil {
		return err
	}
	if err := checkInfo(n, &info); err != nil {
		return errRefused{err}
	}
	asked := info.Subscriptions
	if info.Subscriptions, err = u.grantedSubscriptions(grants, auth, info.Subscriptions); err != nil {
		return errRefused{err}
	}
	u.mu.Lock()
	u.info = info
	u.mu.Unlock()

	u.inMu.Lock()
	u.gen++
	gen := u.gen
	u.events, u.results, u.inFlight = nil, nil, 0
	u.inMu.Unlock()

	if err := m.registerServices(u, info.Services); err != nil {
		return errRefused{err}
	}
	defer m.unregisterServices(u, gen)

	sess := newPluginSession(ctx, u.name, grants)
	if len(info.Subscriptions) > 0 {
		sub, err := u.subscribe(ctx, info.Subscriptions)
		if err != nil {
			return err
		}
		defer sub.Close()
	}
	u.openTools()
	u.setState(abi.PluginRunning, "")
	u.publishState(abi.SubjectPluginStarted, "")
	u.m.log.Info("plugin started", "plugin", u.name, "version", info.Version, "trusted", opts.Trusted, "file", u.files.source())
	if auth.dropIn {
		u.warnWaiting(waitingGrant(u.name, auth.requested, without(asked, info.Subscriptions)))
	}
	started()
	err = u.loop(ctx, p, gen, sess)
	u.closeTools(err)
	return err
}

// checkInfo refuses a plugin whose init describes something its manifest
// does not: another name, a kind it does not declare, a service outside
// its name.
func checkInfo(n *manifests.Plugin, info *abi.PluginInfo) error {
	name := n.Plugin.Name
	if info.Name != name {
		return fmt.Errorf("plugin %s: its init says it is %q; the module and its manifest must agree on the name", name, info.Name)
	}
	if info.Version == "" {
		info.Version = n.Plugin.Version
	}
	if len(info.Kinds) == 0 {
		info.Kinds = n.Plugin.Kinds
	}
	for _, k := range info.Kinds {
		if !slices.Contains(n.Plugin.Kinds, k) {
			return fmt.Errorf("plugin %s: its init says it is of kind %q, which its manifest does not declare (%q)", name, k, n.Plugin.Kinds)
		}
	}
	for _, s := range info.Services {
		if rest, ok := strings.CutPrefix(s, name+"."); !ok || rest == "" || len(s) > maxMethodLen {
			return fmt.Errorf("plugin %s: service %q must be named %s.METHOD, after the plugin", name, s, name)
		}
	}
	return nil
}

// subscribe delivers the events matching pats into the inbox, from where
// the last instance stopped (or from now). One bus subscription serves
// every pattern, so events arrive once each and in order.
func (u *unit) subscribe(ctx context.Context, pats []string) (*bus.Subscription, error) {
	compiled := make([]*abi.Pattern, len(pats))
	for i, s := range pats {
		p, err := abi.CompilePattern(s)
		if err != nil {
			return nil, errRefused{err}
		}
		compiled[i] = p
	}
	pattern := pats[0]
	if len(pats) > 1 {
		pattern = ">"
	}
	self := "plugin/" + u.name
	u.inMu.Lock()
	from := u.nextSeq
	if from == 0 {
		// From now on; a restart takes up from here.
		u.nextSeq = u.m.cfg.Kernel.Bus.LastSeq() + 1
	}
	u.inMu.Unlock()
	return u.m.cfg.Kernel.Bus.Subscribe(ctx, pattern, bus.SubscribeConfig{FromSeq: from}, func(evs []abi.Event) error {
		for i := range evs {
			ev := &evs[i]
			// A plugin does not get back what it published: an echo of
			// its own events would loop.
			if ev.Source == self || relayedBy(ev.Source, self) || !slices.ContainsFunc(compiled, func(p *abi.Pattern) bool { return p.Match(ev.Type) }) {
				continue
			}
			if err := u.pushEvent(ctx, ev); err != nil {
				return err
			}
		}
		return nil
	})
}

// pushEvent queues a copy of ev, waiting while the inbox is full.
func (u *unit) pushEvent(ctx context.Context, ev *abi.Event) error {
	for {
		u.inMu.Lock()
		if len(u.events) < maxInboxEvents {
			u.events = append(u.events, cloneEvent(ev))
			u.inMu.Unlock()
			u.signal()
			return nil
		}
		u.inMu.Unlock()
		select {
		case <-u.room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (u *unit) signal() {
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// cloneEvent copies what a bus handler may only borrow.
func cloneEvent(ev *abi.Event) abi.Event {
	c := *ev
	c.Data = slices.Clone(ev.Data)
	return c
}

// pushResult queues the answer to a call of instance gen.
func (u *unit) pushResult(gen int, r abi.CallResult, kernelCall bool) {
	u.inMu.Lock()
	if kernelCall && gen == u.gen {
		u.inFlight--
	}
	if gen != u.gen {
		u.inMu.Unlock()
		return
	}
	u.results = append(u.results, r)
	u.inMu.Unlock()
	u.signal()
}

// loop hands the inbox to the plugin, a batch at a time, until the
// instance fails or ctx ends.
func (u *unit) loop(ctx context.Context, p *Plugin, gen int, sess *pluginSession) error {
	var batch abi.Batch
	for {
		select {
		case <-ctx.Done():
			return nil
		case req := <-u.decide:
			err := u.tick(ctx, p, gen, sess, req)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			continue
		case <-u.wake:
		}
		u.inMu.Lock()
		tickDriven := u.tickDriven
		u.inMu.Unlock()
		for !tickDriven {
			batch = abi.Batch{Time: time.Now()}
			depth := u.take(&batch)
			if len(batch.Events) == 0 && len(batch.CallResults) == 0 && len(batch.ServiceCalls) == 0 && len(batch.ToolCalls) == 0 {
				break
			}
			out, err := p.handleAs(ctx, &batch, depth.writer)
			u.flushDenied()
			if err != nil {
				u.m.failServices(batch.ServiceCalls, u.name, err)
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			u.dispatch(ctx, gen, sess, &out, depth, true)
		}
	}
}

// take moves what waits in the inbox into b — up to maxBatchEvents events,
// every call result, service call and tool call — and returns the depth of
// the deepest service call taken. The events taken are where a restarted
// instance's subscription takes up after.
func (u *unit) take(b *abi.Batch) serviceDepth {
	var depth serviceDepth
	u.inMu.Lock()
	k := min(len(u.events), maxBatchEvents)
	if k > 0 {
		// The events of one writer at a time: what the plugin publishes
		// while it handles them is that writer's (writer.go).
		host := u.m.cfg.Kernel.Bus.Host()
		w, n := writerOf(&u.events[0], host), 1
		for n < k && writerOf(&u.events[n], host) == w {
			n++
		}
		k, depth.writer = n, w
	}
	b.Events = append(b.Events, u.events[:k]...)
	u.events = append(u.events[:0], u.events[k:]...)
	if k > 0 {
		u.nextSeq = b.Events[len(b.Events)-1].Seq + 1
	}
	b.CallResults = append(b.CallResults, u.results...)
	u.results = nil
	for _, c := range u.calls {
		b.ServiceCalls = append(b.ServiceCalls, c.call)
		if c.depth.n > depth.n {
			depth.n, depth.chain = c.depth.n, c.depth.chain
		}
		if depth.writer == "" {
			depth.writer = c.depth.writer
		}
	}
	u.calls = nil
	b.ToolCalls = append(b.ToolCalls, u.toolQueue...)
	u.toolQueue = nil
	u.inMu.Unlock()
	if k > 0 {
		select {
		case u.room <- struct{}{}:
		default:
		}
	}
	return depth
}

// decideReq is one tick for a policy plugin.
type decideReq struct {
	batch *abi.Batch
	reply chan<- decideResp
}

type decideResp struct {
	reply abi.Reply
	err   error
}

// tick hands a policy one tick: the runtime's batch with what waits in the
// inbox added (the results of its calls, services called), and answers
// with its reply.
func (u *unit) tick(ctx context.Context, p *Plugin, gen int, sess *pluginSession, req decideReq) error {
	b := req.batch
	u.inMu.Lock()
	u.tickDriven = true
	u.inMu.Unlock()
	depth := u.take(b)
	out, err := p.handleAs(ctx, b, depth.writer)
	u.flushDenied()
	if err != nil {
		u.m.failServices(b.ServiceCalls, u.name, err)
		req.reply <- decideResp{err: err}
		return err
	}
	u.dispatch(ctx, gen, sess, &out, depth, false)
	req.reply <- decideResp{reply: out.Reply}
	return nil
}

// dispatch carries out what one batch produced: the events it published,
// durable before the next batch; its calls; its answers to service calls;
// and its reply for whoever reads replies.
func (u *unit) dispatch(ctx context.Context, gen int, sess *pluginSession, out *Output, depth serviceDepth, notify bool) {
	m := u.m
	if len(out.Throttled) > 0 {
		m.publish(abi.SubjectPluginThrottled, abi.PluginThrottled{Plugin: u.name, Caps: out.Throttled})
	}
	if len(out.Published) > 0 {
		evs := make([]*abi.Event, len(out.Published))
		for i := range out.Published {
			evs[i] = &out.Published[i]
		}
		if _, err := m.cfg.Kernel.Bus.PublishBatch(ctx, evs); err != nil && ctx.Err() == nil {
			m.log.Warn("publish a plugin's events", "plugin", u.name, "err", err)
		}
	}
	for _, c := range out.Calls {
		u.call(ctx, gen, sess, c, depth)
	}
	for _, r := range out.Reply.ServiceResults {
		m.answerService(u, r)
	}
	if len(out.Reply.ToolResults) > 0 {
		u.answerTools(out.Reply.ToolResults)
	}
	if out.Reply.Error != "" {
		m.log.Warn("plugin could not handle a batch", "plugin", u.name, "err", out.Reply.Error)
	}
	if notify && m.cfg.OnReply != nil {
		m.cfg.OnReply(u.name, &out.Reply)
	}
}
