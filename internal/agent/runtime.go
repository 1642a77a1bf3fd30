package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/tools"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/checkpoint"
)

// Policy decides a tick: given the tick's batch — the observations in
// Events, the composed input in Agent — it returns a thought and actions.
type Policy interface {
	Decide(ctx context.Context, batch *abi.Batch) (*abi.Reply, error)
}

// PolicyFunc is a Policy in Go, for tests and benchmarks.
type PolicyFunc func(ctx context.Context, batch *abi.Batch) (*abi.Reply, error)

// Decide calls f.
func (f PolicyFunc) Decide(ctx context.Context, b *abi.Batch) (*abi.Reply, error) { return f(ctx, b) }

// Config configures a Runtime. Kernel and Policy are required.
type Config struct {
	Kernel *kernel.Kernel
	Policy Policy
	// Agent is the agent's id; default "default".
	Agent string
	// Hz is the tick rate; default 10. Overrun is what a late tick does;
	// default OverrunSkip.
	Hz      float64
	Overrun Overrun
	// Spin is how long before each tick the loop stops trusting Go's
	// timers, for sub-millisecond precision: it sleeps on the kernel's
	// timer and spins only for the last 100 µs (see Ticker.Spin); default
	// 2 ms, -1 for none.
	Spin time.Duration
	// MaxIterations bounds the decisions in one run loop; default 25. Each
	// tool call counts as one, so one answer of many calls uses up as many.
	MaxIterations int
	// MaxToolCalls bounds the tool calls one decision carries out; the
	// calls past it are refused with a result the policy reads. Default 16.
	MaxToolCalls int
	// QueryBackoff: after this many queries in a row that no user message
	// answered, the rate halves (down to MinHz) until one does; default 3
	// and 1 Hz.
	QueryBackoff int
	MinHz        float64
	// Skills are the binary skills the agent may run by name: name → the
	// absolute path of its skill.toml.
	Skills map[string]string
	// Spawn is what the agent may start for a run loop ([agent.grants]);
	// default: every installed skill, and commands under the default
	// profile in workspaces Kairo makes.
	Spawn *kernel.SpawnAuthority
	// Memory is what the agent remembers beyond its run loops' state; nil:
	// short-term memory only.
	Memory *Memory
	// Tools carries out the policy's tool calls; default a tools.Registry
	// over Kernel and Skills, which the runtime closes on Stop.
	Tools Tools
	// BargeIn is abi.BargeInBoundary (the default), BargeInQueue or
	// BargeInPreempt.
	BargeIn string
	// Heartbeat: with run loops open and nothing observed, the policy is
	// still asked this often, so it can act on time; default 1 s.
	Heartbeat time.Duration
	// Approval is the approval mode of a tool (manifests.ApprovalAlways,
	// ApprovalOnDeny or ApprovalNever); nil: no tool needs one.
	Approval func(tool string) string
	Logger   *slog.Logger
	// Checkpoint is the file the agent keeps what it folded of the log
	// in, so a start folds only what came after (kernel/bus/checkpoint);
	// empty: none, every start folds the whole log.
	Checkpoint string
	// CheckpointEvery is how often a checkpoint is written while events
	// come (default 30s); one is written at Stop too.
	CheckpointEvery time.Duration
	// Router is shared by the agents of one daemon: which one a user
	// message is for, and the asks between them. nil: the agent is alone,
	// and a message that names another agent is answered that there is
	// none.
	Router *Router
}

func (c *Config) defaults() {
	if c.Spawn == nil {
		c.Spawn = &kernel.SpawnAuthority{Skills: []string{"*"}, Commands: true}
	}
	if c.Agent == "" {
		c.Agent = "default"
	}
	if c.Hz == 0 {
		c.Hz = 10
	}
	if c.MaxIterations <= 0 {
		c.MaxIterations = 25
	}
	if c.MaxToolCalls <= 0 {
		c.MaxToolCalls = 16
	}
	if c.QueryBackoff <= 0 {
		c.QueryBackoff = 3
	}
	if c.MinHz <= 0 {
		c.MinHz = 1
	}
	if c.Spin == 0 {
		c.Spin = 2 * time.Millisecond
	}
	if c.Spin < 0 {
		c.Spin = 0
	}
	if c.BargeIn == "" {
		c.BargeIn = abi.BargeInBoundary
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.CheckpointEvery <= 0 {
		c.CheckpointEvery = 30 * time.Second
	}
}

// Runtime is one agent: it routes user messages to itself, turns what it
// observes into ticks for its policy, and carries out the policy's actions
// through the kernel, every step an event of the run loop it belongs to.
type Runtime struct {
	cfg    Config
	k      *kernel.Kernel
	log    *slog.Logger
	ticker *Ticker
	sess   *session

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sub    *bus.Subscription

	router   *Router
	skills   []string        // the names of cfg.Skills, sorted
	ownTools *tools.Registry // the default Tools, closed by Stop
	mem      *keeper
	// recorded is the memory the last recorded tick showed the policy.
	recorded string
	// errs bounds the kairo.agent.error events of failures that repeat.
	errs reporter

	mu  sync.Mutex
	st  *state
	obs []abi.Event // observed since the last tick: x_t
	// routed are the messages routed to the agent that wait for the next
	// tick to be published, first of its events (take).
	routed   []*abi.Event
	lastCall time.Time // of the policy
	backoff  bool      // the rate is lowered for unanswered queries
	// halts are the run loops whose processes are being stopped, each
	// closed once they are gone (beginHalt).
	halts map[string]chan struct{}
	// askSessions are the kernel sessions of the open run loops that
	// answer asks, by run loop (sessionFor).
	askSessions map[string]*session

	// others are the states of the other hosts sharing the store, by
	// host, for agent.runs only (hosts.go); othersFull says a host past
	// maxOtherHosts was met.
	others     map[string]*state
	othersFull bool

	// OnTick, when set before Start, is told of every tick after it ran,
	// with whether the policy was asked.
	OnTick func(tk Tick, decided bool)
	// health counts the ticks for Health.
	health tickHealth

	// folded is the last event folded in the log's order (the replay's,
	// then the subscription's): a checkpoint is taken there, never at an
	// event the runtime applied ahead of the ones before it. saved is
	// where the last checkpoint was taken. Both under mu.
	folded, saved checkpoint.Point
	rebuilt       int // events the start folded

	// oldLookup holds a token while a question into a run loop the state
	// let go reads the log for it: one read at a time.
	oldLookup chan struct{}
}

// New returns a runtime; Start runs it.
func New(cfg Config) (*Runtime, error) {
	cfg.defaults()
	if cfg.Kernel == nil || cfg.Policy == nil {
		return nil, errors.New("agent: Config.Kernel and Config.Policy are required")
	}
	switch cfg.BargeIn {
	case abi.BargeInBoundary, abi.BargeInQueue, abi.BargeInPreempt:
	default:
		return nil, fmt.Errorf("agent %s: barge-in %q: want %q, %q or %q", cfg.Agent, cfg.BargeIn, abi.BargeInBoundary, abi.BargeInQueue, abi.BargeInPreempt)
	}
	t, err := NewTicker(cfg.Hz, cfg.Overrun)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", cfg.Agent, err)
	}
	t.Spin = cfg.Spin
	var owned *tools.Registry
	if cfg.Tools == nil {
		if owned, err = tools.New(tools.Config{Kernel: cfg.Kernel, Skills: cfg.Skills, Logger: cfg.Logger}); err != nil {
			return nil, fmt.Errorf("agent %s: %w", cfg.Agent, err)
		}
		cfg.Tools = owned
	}
	skills := slices.Sorted(maps.Keys(cfg.Skills))
	r := &Runtime{oldLookup: make(chan struct{}, 1), cfg: cfg, k: cfg.Kernel, log: cfg.Logger.With("agent", cfg.Agent), ticker: t, st: newState(cfg.Agent), skills: skills, ownTools: owned,
		halts: map[string]chan struct{}{}, others: map[string]*state{}, askSessions: map[string]*session{}}
	r.router = cfg.Router
	if r.router == nil {
		r.router = soloRouter(&r.cfg)
	}
	spec, ok := r.router.Spec(cfg.Agent)
	if !ok {
		return nil, fmt.Errorf("agent %s: not among the router's agents (%s)", cfg.Agent, r.router.list())
	}
	if spec.Spawn != nil {
		r.cfg.Spawn = spec.Spawn // the router's word on its grants, which asks are held to
	}
	r.st.owner = r.router.owner
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.sess = newSession(r.ctx, r)
	mc := Memory{}
	if cfg.Memory != nil {
		mc = *cfg.Memory
	}
	r.mem = newKeeper(r, mc)
	r.recorded = "\x00" // nothing recorded yet: the first record says the memory
	return r, nil
}

// Start rebuilds the agent's state from the event log, marks what died with
// the last daemon as interrupted, routes the user messages stored but not
// yet routed, then follows the bus and starts ticking.
func (r *Runtime) Start() error {
	start := time.Now()
	n := 0
	from := r.loadCheckpoint()
	r.folded, r.saved = from, from
	err := r.k.Bus.Replay(r.ctx, bus.Query{FromSeq: from.Seq + 1}, func(ev *abi.Event) error {
		n++
		r.fold(ev)
		return nil
	})
	if err != nil {
		return fmt.Errorf("agent %s: rebuild from the event log: %w", r.cfg.Agent, err)
	}
	r.rebuilt = n
	r.log.Info("agent state rebuilt", "checkpoint", from.Seq, "events", n, "runLoops", len(r.st.loops), "open", len(r.st.open),
		"endedNotKept", r.st.evicted, "took", time.Since(start).Round(time.Millisecond))

	// The memory reads what the log holds up to here itself, and takes
	// the rest as the subscription brings it.
	open := make([]string, len(r.st.open))
	for i, l := range r.st.open {
		open[i] = l.id
	}
	upTo := r.st.lastSeq
	r.mem.follow(open)
	sub, err := r.k.Bus.Subscribe(r.ctx, ">", bus.SubscribeConfig{FromSeq: upTo + 1}, r.observe)
	if err != nil {
		return fmt.Errorf("agent %s: follow the bus: %w", r.cfg.Agent, err)
	}
	r.sub = sub
	r.router.add(r)
	r.register()
	r.mem.start(r.ctx, open, upTo)
	r.mem.register()
	r.markInterrupted()
	r.resumeApprovals()
	r.mu.Lock()
	pending := make([]*abi.Event, 0, len(r.st.unrouted))
	for _, ev := range r.st.unrouted {
		pending = append(pending, ev)
	}
	r.mu.Unlock()
	for _, ev := range pending {
		r.route(ev)
	}
	r.wg.Add(1)
	go func() { // owned by the runtime: ends with Stop
		defer r.wg.Done()
		r.ticker.Run(r.ctx, r.tick)
	}()
	if r.cfg.Checkpoint != "" {
		r.wg.Add(1)
		go func() { // owned by the runtime: ends with Stop
			defer r.wg.Done()
			t := time.NewTicker(r.cfg.CheckpointEvery)
			defer t.Stop()
			for {
				select {
				case <-r.ctx.Done():
					return
				case <-t.C:
					r.saveCheckpoint()
				}
			}
		}()
	}
	return nil
}

// fold folds one event of the log, in its order, at start; the
// subscription's events go through observe.
func (r *Runtime) fold(ev *abi.Event) {
	r.folded = checkpoint.At(ev)
	if r.foreign(ev) {
		r.foldOther(ev)
		r.st.lastSeq = max(r.st.lastSeq, ev.Seq) // followed from after it
		return
	}
	r.st.apply(ev)
	if trusted(ev) {
		r.mem.fold(ev)
	}
}

// Stop stops ticking and following the bus. Processes the agent started
// keep running until the kernel ends them.
func (r *Runtime) Stop() {
	r.router.remove(r)
	r.cancel()
	r.wg.Wait()
	if r.sub != nil {
		<-r.sub.Done()
	}
	// Routed since the last tick: in the log, as that tick would have
	// put them.
	r.mu.Lock()
	routed := r.routed
	r.routed = nil
	r.mu.Unlock()
	r.publishRouted(routed)
	// Last, when nothing folds any more: the next start reads from here.
	r.saveCheckpoint()
	if r.ownTools != nil {
		r.ownTools.Close()
	}
}

// Hz is the current tick rate.
func (r *Runtime) Hz() float64 { return r.ticker.Hz() }

// observe is the bus subscription: every event updates the state, and what
// concerns the agent is buffered for the next tick.
func (r *Runtime) observe(evs []abi.Event) error {
	for i := range evs {
		ev := &evs[i]
		if r.foreign(ev) {
			r.mu.Lock()
			r.foldOther(ev)
			r.folded = checkpoint.At(ev)
			r.mu.Unlock()
			continue
		}
		if !trusted(ev) {
			r.log.Warn("ignored an event of a kernel subject from an untrusted source", "type", ev.Type, "source", ev.Source, "id", ev.ID)
			r.mu.Lock()
			r.folded = checkpoint.At(ev)
			r.mu.Unlock()
			continue
		}
		var exited *abi.ProcessExitedEvent
		if ev.Type == abi.SubjectProcessExited {
			exited = new(abi.ProcessExitedEvent)
			if msgpack.Unmarshal(ev.Data, exited) != nil {
				exited = nil
			}
		}
		r.mu.Lock()
		r.folded = checkpoint.At(ev)
		_, own := r.st.own[ev.ID]
		// With the state, under one lock: a checkpoint holds both or
		// neither.
		r.mem.fold(ev)
		r.st.apply(ev)
		var note *abi.Note
		if exited != nil {
			note = r.exitNote(exited)
		}
		keep := !own && r.concerns(ev)
		var held *abi.Event
		if keep {
			c := copyEvent(ev)
			if note == nil {
				r.obs = append(r.obs, c)
			} else {
				held = &c
			}
		}
		r.mu.Unlock()
		if note != nil {
			// The exit's note is queued for the log before the tick can
			// see the exit, so it comes before anything the tick publishes
			// on it: a run loop the policy ends on the exit holds its note
			// when memory indexes it at its end.
			r.publish(&abi.Event{Type: abi.SubjectAgentNote, CorrelationID: note.RunLoopID, CausationID: ev.ID}, *note)
			if held != nil {
				r.mu.Lock()
				r.obs = append(r.obs, *held)
				r.mu.Unlock()
			}
		}
		if keep && ev.Type == abi.AgentMessageSubject(r.cfg.Agent) {
			r.ticker.Wake() // someone waits for the answer (see wakeFor)
		}
		r.mem.observe(r.ctx, ev)
		switch {
		case ev.Type == abi.SubjectUserMessage:
			r.route(ev)
		case ev.Type == abi.SubjectApprovalDecided:
			r.decided(ev)
		case ev.Type == abi.SubjectProcessExited, ev.Type == abi.SubjectSandboxDenied:
			var ref abi.ProcessRef
			if msgpack.Unmarshal(ev.Data, &ref) == nil {
				r.mu.Lock()
				a := r.st.procs[ref.ProcessID]
				r.mu.Unlock()
				if a != nil {
					r.maybeAskRerun(a)
				}
			}
		case ev.Type == abi.SubjectToolResult && ev.Source != "agent/"+r.cfg.Agent:
			r.askerCanceled(ev)
		case ev.Type == abi.SubjectIntentCancel && ev.Source != "agent/"+r.cfg.Agent:
			var d abi.CancelParams
			if msgpack.Unmarshal(ev.Data, &d) == nil && d.CorrelationID != "" {
				id := ev.ID // the event is lent for this call only
				prev, done := r.beginHalt(d.CorrelationID)
				r.wg.Add(1)
				go func() { defer r.wg.Done(); r.cancelLoop(d.CorrelationID, d.Reason, id, id, prev, done) }()
			}
		}
	}
	return nil
}

// concerns reports whether ev is an observation of this agent: a message
// routed to it, or an event of one of its run loops. Called under r.mu.
func (r *Runtime) concerns(ev *abi.Event) bool {
	switch {
	case ev.Type == abi.AgentMessageSubject(r.cfg.Agent):
		return true
	case ev.Source == "agent/"+r.cfg.Agent:
		return false // its own actions and thoughts
	case ev.Type == abi.SubjectObservation:
		var o abi.Observation
		return msgpack.Unmarshal(ev.Data, &o) == nil && (o.Agent == "" || o.Agent == r.cfg.Agent)
	case ev.Type == abi.SubjectToolResult, ev.Type == abi.SubjectAgentNote, abi.SubjectIn(ev.Type, abi.SubjectProcessAll):
		l := r.st.loops[ev.CorrelationID]
		return l != nil && l.status == ""
	}
	return false
}

// route delivers a user message to the agent, once per messageId.
func (r *Runtime) route(ev *abi.Event) {
	var m abi.UserMessage
	if err := abi.DecodeUserMessage(ev.Data, &m); err != nil || strings.TrimSpace(m.Text) == "" {
		return
	}
	m.Ask = nil // only an agent asks, in the process (ask.go), never a writer of the log
	if m.MessageID == "" {
		m.MessageID = ev.ID
	}
	to, text, known := r.router.Pick(&m)
	switch {
	case !known && r.cfg.Agent == r.router.Default():
		r.noAgent(ev, &m, to)
		return
	case !known, to != r.cfg.Agent:
		return
	}
	addressed := m.Agent != "" || text != m.Text
	if strings.TrimSpace(text) == "" {
		text = m.Text // "@ops" alone: the address is the message
	}
	m.Text = text
	if _, named := r.router.Spec(m.RunLoopID); named && m.Agent == "" {
		m.RunLoopID, addressed = "", true // it named the agent (Pick), not a run loop
	}
	if m.Agent == "" && m.RunLoopID != "" {
		// Sent into a task without naming its agent: the agent whose task
		// it is takes it.
		r.mu.Lock()
		mine := r.st.loopNamed(m.RunLoopID) != nil
		r.mu.Unlock()
		if other := r.router.loopOwner(m.RunLoopID); !mine && other != nil && other != r {
			other.take(ev, m)
			return
		}
	}
	if !addressed && m.RunLoopID == "" {
		// The answer to another agent's question: with none of its own
		// open, the agent hands a message that names no agent to the one
		// agent that asked.
		r.mu.Lock()
		mine := r.st.question() != nil
		r.mu.Unlock()
		if other := r.router.asking(r); !mine && other != nil {
			other.take(ev, m)
			return
		}
	}
	r.take(ev, m)
}

// take routes m, a user message for this agent (ev its event), to it.
func (r *Runtime) take(ev *abi.Event, m abi.UserMessage) {
	r.mu.Lock()
	_, dup := r.st.seen[m.MessageID]
	r.mu.Unlock()
	if !dup && r.chatAnswer(ev, &m) {
		// The user's yes or no to the one pending approval: decided, not
		// a message for the policy (the decision is in the log).
		r.mu.Lock()
		r.st.see(m.MessageID)
		r.mu.Unlock()
		return
	}
	r.mu.Lock()
	_, dup = r.st.seen[m.MessageID]
	r.st.see(m.MessageID)
	if !dup && r.notOpen(ev, &m) {
		r.mu.Unlock()
		return
	}
	corr := ""
	if l := r.st.loopNamed(m.RunLoopID); l != nil && l.status == "" {
		corr = l.id
	} else if m.RunLoopID == "" {
		// A message after the agent's question answers it.
		if l := r.st.question(); l != nil {
			corr = l.id
		}
	}
	if r.backoff {
		r.backoff = false
		r.ticker.SetHz(r.cfg.Hz)
	}
	r.mu.Unlock()
	if dup {
		return
	}
	m.Agent = r.cfg.Agent
	// Observed at once, not when the bus brings it back: the next tick
	// answers it, and comes at once. The tick publishes it, with its own
	// events: they go to the store in one commit rather than two, where
	// the first took a core from the tick (docs/RATIONALE.md#a-message-wakes-the-tick).
	routed := &abi.Event{Type: abi.AgentMessageSubject(r.cfg.Agent), CorrelationID: corr, CausationID: ev.ID}
	if !r.prepare(routed, m) {
		return
	}
	routed.Time = time.Now()
	r.mu.Lock()
	r.st.apply(routed)
	r.st.own[routed.ID] = struct{}{}
	r.obs = append(r.obs, *routed)
	r.routed = append(r.routed, routed)
	r.mu.Unlock()
	r.ticker.Wake()
}

// noAgent answers a message for an agent that does not exist, once: it
// reaches no agent, and the answer is caused by the message itself.
func (r *Runtime) noAgent(ev *abi.Event, m *abi.UserMessage, id string) {
	r.mu.Lock()
	_, dup := r.st.seen[m.MessageID]
	r.st.see(m.MessageID)
	delete(r.st.unrouted, m.MessageID)
	r.mu.Unlock()
	if dup {
		return
	}
	r.emit(&abi.Event{Type: abi.SubjectAgentAction, CausationID: ev.ID},
		abi.ActionEvent{Type: abi.ActionSay, ActionData: abi.ActionData{Text: r.router.unknownText(id)}})
}

// prepare encodes data into ev and fills what the agent sets; false when
// data cannot be encoded (logged).
func (r *Runtime) prepare(ev *abi.Event, data any) bool {
	raw, err := encodeData(data)
	if err != nil {
		r.log.Error("encode event", "type", ev.Type, "err", err)
		return false
	}
	// Masked before the agent's own state holds it, not only when the bus
	// stores it: a tool's result reaches the policy from the state.
	ev.Data, ev.Source = r.k.Mask(raw), "agent/"+r.cfg.Agent
	if ev.ID == "" {
		ev.ID = abi.NewID()
	}
	return true
}

// encodeData encodes an event's data: the agent's own events, one or more
// a message, by their hand-written codecs (the bytes msgpack writes; see
// abi.AppendUserMessage), the rest by msgpack's reflection.
func encodeData(data any) ([]byte, error) {
	switch d := data.(type) {
	case abi.UserMessage:
		return abi.AppendUserMessage(make([]byte, 0, 64+len(d.Text)), &d), nil
	case abi.ActionEvent:
		return abi.AppendActionEvent(make([]byte, 0, 64+len(d.Text)+len(d.Args)), &d), nil
	case abi.IntentStarted:
		return abi.AppendIntentStarted(make([]byte, 0, 128+len(d.Goal)), &d), nil
	case abi.IntentEnded:
		return abi.AppendIntentEnded(make([]byte, 0, 64+len(d.Summary)), &d), nil
	case abi.TickRecord:
		return abi.AppendTickRecord(make([]byte, 0, 96+len(d.Memory)+32*(len(d.Pending)+len(d.Observed))), &d), nil
	case abi.Thought:
		return abi.AppendThought(make([]byte, 0, 32+len(d.Text)), &d), nil
	}
	return msgpack.Marshal(data)
}

// publish appends an event of the agent's, queued; the bus keeps the
// order of what one goroutine publishes.
func (r *Runtime) publish(ev *abi.Event, data any) {
	if !r.prepare(ev, data) {
		return
	}
	if _, err := r.k.Bus.PublishAsync(ev); err != nil && r.ctx.Err() == nil {
		r.log.Warn("publish", "type", ev.Type, "err", err)
	}
}

// Waiter is a Policy that can have work of its own waiting, such as a
// model's answer: it is asked on the next tick even with nothing observed.
type Waiter interface {
	// Waiting: something waits for the policy's next tick.
	Waiting() bool
	// Busy: a decision of the policy's is still in progress.
	Busy() bool
}

// PolicyPlugins is what the agent needs of the plugin engine (host/wasm's
// Manager implements it): a policy plugin's decisions and whether work of
// its own waits. The agent declares it so that it need not import the
// runtime, a floor above it.
type PolicyPlugins interface {
	// Decide hands the policy plugin name a batch and returns its reply.
	Decide(ctx context.Context, name string, b *abi.Batch) (*abi.Reply, error)
	// Waiting: something waits for name's next tick, such as an answer.
	Waiting(name string) bool
	// Busy: a decision of name's is still in progress.
	Busy(name string) bool
	// InFlight counts the calls name made that are not answered yet.
	InFlight(name string) int
	// List is every plugin and its state.
	List() []abi.PluginStatus
}

// PluginPolicy is the policy plugin name that m runs.
func PluginPolicy(m PolicyPlugins, name string) Policy { return pluginPolicy{m, name} }

type pluginPolicy struct {
	m    PolicyPlugins
	name string
}

func (p pluginPolicy) Decide(ctx context.Context, b *abi.Batch) (*abi.Reply, error) {
	return p.m.Decide(ctx, p.name, b)
}

func (p pluginPolicy) Waiting() bool { return p.m.Waiting(p.name) }
func (p pluginPolicy) Busy() bool    { return p.m.Busy(p.name) }
