package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
)

// MetricsConfig configures [NewMetrics]. Bus is required; every other
// field's zero value is useful.
type MetricsConfig struct {
	// Bus is the daemon's bus: its counters and its store are read at each
	// scrape, and its events counted as they come.
	Bus *bus.Bus
	// Kernel gives the approvals waiting for a person; nil: not reported.
	Kernel *kernel.Kernel
	// Tools and Plugins list the registered tools and the loaded plugins;
	// Models are the configured models. Only those names get label values
	// of their own: another name an event carries is counted as Other.
	Tools, Plugins func() []string
	Models         []string
	// Agents reports each agent's run loops and ticks at a scrape; its
	// agents are the names the agent label takes.
	Agents func() []AgentHealth
	// MaxSeries bounds the label sets of each metric; past it a new one is
	// counted as Other, and kairo_metrics_labels_folded_total says so.
	// Default DefaultMaxSeries.
	MaxSeries int
	// Logger gets what the endpoint reports; nil discards it.
	Logger *slog.Logger
}

// AgentHealth is one agent as the metrics read it at a scrape.
type AgentHealth struct {
	Agent string
	// Open and Interrupted count its open run loops: those that do not
	// wait for the user, and those that wait after an interruption.
	Open, Interrupted int
	Ticks, Skipped    uint64
	// TickLag is how late the loop woke for its latest tick.
	TickLag time.Duration
}

// Metrics is the daemon's health for Prometheus: counters derived from the
// events as the bus delivers them, and gauges read at each scrape. Its
// registry is Kairo's own, never the global one.
type Metrics struct {
	cfg MetricsConfig
	reg *prometheus.Registry
	log *slog.Logger
	sub *bus.Subscription
	ev  *eventCounters // the subscription's handler's alone

	mu      sync.Mutex // guards srv, ln, served and closed
	srv     *http.Server
	ln      net.Listener
	served  chan error
	closed  bool
	closing sync.Once
}

// NewMetrics registers the collectors — Kairo's, the Go runtime's and the
// process's — and starts counting the events published from now on.
func NewMetrics(cfg MetricsConfig) (*Metrics, error) {
	if cfg.Bus == nil {
		return nil, errors.New("telemetry: metrics need the bus (MetricsConfig.Bus)")
	}
	if cfg.MaxSeries <= 0 {
		cfg.MaxSeries = DefaultMaxSeries
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{cfg: cfg, reg: prometheus.NewRegistry(), log: cfg.Logger}
	m.ev = newEventCounters(cfg)
	live := &liveCollector{cfg: cfg}
	for _, c := range append(m.ev.collectors(), live,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})) {
		if err := m.reg.Register(c); err != nil {
			return nil, err
		}
	}
	// The handler never fails, so the subscription ends only with Close
	// or the bus; a slow one lags behind and reads the store.
	sub, err := cfg.Bus.Subscribe(context.Background(), "kairo.>", bus.SubscribeConfig{}, m.ev.handle)
	if err != nil {
		return nil, err
	}
	m.sub = sub
	return m, nil
}

// Registry is where the metrics live: another part of the daemon (the
// trace export) registers its own collectors here, so one endpoint serves
// them all.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Close stops the endpoint, if it serves (its scrapes get until ctx is
// done), and the counting of events. Later calls do nothing.
func (m *Metrics) Close(ctx context.Context) error {
	var err error
	m.closing.Do(func() {
		m.mu.Lock()
		srv, served := m.srv, m.served
		m.closed = true
		m.mu.Unlock()
		if srv != nil {
			if err = srv.Shutdown(ctx); err != nil {
				srv.Close()
			}
			if serr := <-served; serr != nil && err == nil {
				err = serr
			}
		}
		m.sub.Close()
	})
	return err
}

// eventCounters are the metrics counted from events. handle is the
// subscription's handler: the bounds, the names and the requests are
// touched by it alone.
type eventCounters struct {
	toolCalls   *prometheus.CounterVec
	toolSeconds prometheus.Histogram
	procs       *prometheus.CounterVec
	procSeconds prometheus.Histogram
	failures    *prometheus.CounterVec
	throttles   *prometheus.CounterVec
	started     *prometheus.CounterVec
	ended       *prometheus.CounterVec
	modelCalls  *prometheus.CounterVec
	tokens      *prometheus.CounterVec
	modelSecs   *prometheus.HistogramVec
	folded      *prometheus.CounterVec
	unreadable  prometheus.Counter

	bounds                       map[string]*bound // by metric name
	tools, plugins, models, ags  *names
	requests                     map[string]string // a model request's event ID → its model label
	requestOrder                 []string          // oldest first, for the bound
	maxRequests, maxRequestOrder int
}

// Metric names counted from events.
const (
	mToolCalls    = "kairo_tool_calls_total"
	mToolSeconds  = "kairo_tool_call_duration_seconds"
	mProcs        = "kairo_processes_total"
	mProcSeconds  = "kairo_process_duration_seconds"
	mFailures     = "kairo_plugin_failures_total"
	mThrottles    = "kairo_plugin_throttles_total"
	mStarted      = "kairo_run_loops_started_total"
	mEnded        = "kairo_run_loops_ended_total"
	mModelCalls   = "kairo_model_calls_total"
	mTokens       = "kairo_model_tokens_total"
	mModelSeconds = "kairo_model_call_duration_seconds"
	mFolded       = "kairo_metrics_labels_folded_total"
	mUnreadable   = "kairo_metrics_events_unreadable_total"
)

// maxPendingRequests bounds the model requests whose responses are
// awaited: one never answered is let go past it.
const maxPendingRequests = 1024

func newEventCounters(cfg MetricsConfig) *eventCounters {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	c := &eventCounters{
		toolCalls: counter(mToolCalls, "Tool calls that ended, by tool and status (done, failed, canceled, interrupted).", "tool", "status"),
		toolSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: mToolSeconds, Help: "How long tool calls took, in seconds.",
			Buckets: []float64{.005, .025, .1, .5, 1, 2.5, 10, 30, 120, 600}}),
		procs: counter(mProcs, "Processes that ended, by outcome (ok: exit code 0, failed: another exit code, killed: a signal).", "outcome"),
		procSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: mProcSeconds, Help: "How long processes ran, in seconds.",
			Buckets: []float64{.1, 1, 10, 60, 300, 1800, 3600, 4 * 3600}}),
		failures:   counter(mFailures, "Plugin instances stopped by a failure, by plugin.", "plugin"),
		throttles:  counter(mThrottles, "Plugin batches that ran into a rate cap, by plugin.", "plugin"),
		started:    counter(mStarted, "Run loops opened, by agent.", "agent"),
		ended:      counter(mEnded, "Run loops ended, by agent and status (done, canceled, max_iterations, failed).", "agent", "status"),
		modelCalls: counter(mModelCalls, "Model requests answered, by model and outcome (ok, error).", "model", "outcome"),
		tokens:     counter(mTokens, "Tokens of model requests as the endpoint counted them, by model and kind (input, output).", "model", "kind"),
		modelSecs: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: mModelSeconds, Help: "How long model requests took, retries included, in seconds.",
			Buckets: []float64{.25, .5, 1, 2.5, 5, 10, 30, 60, 120}}, []string{"model"}),
		folded:     counter(mFolded, "Label values counted as \"other\": a name the daemon does not know, or a label set past the metric's bound.", "metric"),
		unreadable: prometheus.NewCounter(prometheus.CounterOpts{Name: mUnreadable, Help: "Events the metrics count whose data could not be decoded."}),

		tools: newNames(cfg.Tools), plugins: newNames(cfg.Plugins), models: fixedNames(cfg.Models...),
		ags:      newNames(func() []string { return agentNames(cfg.Agents) }),
		requests: map[string]string{}, maxRequests: maxPendingRequests, maxRequestOrder: 2 * maxPendingRequests,
	}
	c.bounds = map[string]*bound{}
	for _, name := range []string{mToolCalls, mProcs, mFailures, mThrottles, mStarted, mEnded, mModelCalls, mTokens, mModelSeconds} {
		c.bounds[name] = newBound(cfg.MaxSeries, c.folded.WithLabelValues(name))
	}
	return c
}

func agentNames(agents func() []AgentHealth) []string {
	if agents == nil {
		return nil
	}
	var out []string
	for _, a := range agents() {
		out = append(out, a.Agent)
	}
	return out
}

func (c *eventCounters) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.toolCalls, c.toolSeconds, c.procs, c.procSeconds, c.failures, c.throttles,
		c.started, c.ended, c.modelCalls, c.tokens, c.modelSecs, c.folded, c.unreadable}
}

// handle counts the events it knows and passes the others by; it never
// fails, so the subscription lasts as long as the bus.
func (c *eventCounters) handle(evs []abi.Event) error {
	for i := range evs {
		if err := c.count(&evs[i]); err != nil {
			c.unreadable.Inc()
		}
	}
	return nil
}

func (c *eventCounters) count(ev *abi.Event) error {
	switch ev.Type {
	case abi.SubjectToolResult:
		var d abi.ToolResultEvent
		if err := msgpack.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		b := c.bounds[mToolCalls]
		tool := b.known(c.tools, d.Tool)
		status := b.oneOf(d.Status, abi.StatusDone, abi.StatusFailed, abi.StatusCanceled, abi.StatusInterrupted)
		c.toolCalls.WithLabelValues(b.values(tool, status)...).Inc()
		c.toolSeconds.Observe(d.Duration.Seconds())
	case abi.SubjectProcessExited:
		var d abi.ProcessExitedEvent
		if err := msgpack.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		outcome := Other
		switch {
		case d.Status == abi.ProcessKilled:
			outcome = "killed"
		case d.Status == abi.ProcessExited && d.ExitCode != nil && *d.ExitCode == 0:
			outcome = "ok"
		case d.Status == abi.ProcessExited:
			outcome = "failed"
		}
		c.procs.WithLabelValues(c.bounds[mProcs].values(outcome)...).Inc()
		c.procSeconds.Observe(float64(d.DurationMs) / 1000)
	case abi.SubjectPluginFailed:
		var d abi.PluginFailed
		if err := msgpack.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		b := c.bounds[mFailures]
		c.failures.WithLabelValues(b.values(b.known(c.plugins, d.Plugin))...).Inc()
	case abi.SubjectPluginThrottled:
		var d abi.PluginThrottled
		if err := msgpack.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		b := c.bounds[mThrottles]
		c.throttles.WithLabelValues(b.values(b.known(c.plugins, d.Plugin))...).Inc()
	case abi.SubjectIntentStarted:
		b := c.bounds[mStarted]
		c.started.WithLabelValues(b.values(b.known(c.ags, agentOf(ev)))...).Inc()
	case abi.SubjectIntentEnded:
		var d abi.IntentEnded
		if err := msgpack.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		b := c.bounds[mEnded]
		agent := b.known(c.ags, agentOf(ev))
		status := b.oneOf(d.Status, abi.StatusDone, abi.StatusCanceled, "max_iterations", abi.StatusFailed)
		c.ended.WithLabelValues(b.values(agent, status)...).Inc()
	case abi.SubjectLLMRequest:
		var d abi.LLMRequest
		if err := msgpack.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		c.request(ev.ID, c.bounds[mModelCalls].known(c.models, d.Model))
	case abi.SubjectLLMResponse:
		var d abi.LLMResponse
		if err := msgpack.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		c.response(ev, &d)
	}
	return nil
}

// agentOf is the agent whose runtime published ev, from its source
// "agent/NAME", which the kernel stamps.
func agentOf(ev *abi.Event) string {
	name, _ := strings.CutPrefix(ev.Source, "agent/")
	return name
}

// request remembers a model request's model until its response comes.
func (c *eventCounters) request(id, model string) {
	c.requests[id] = model
	c.requestOrder = append(c.requestOrder, id)
	for len(c.requests) > c.maxRequests {
		delete(c.requests, c.requestOrder[0])
		c.requestOrder = c.requestOrder[1:]
	}
	if len(c.requestOrder) > c.maxRequestOrder {
		// Most were answered: keep the order of those still awaited.
		kept := c.requestOrder[:0:0]
		for _, id := range c.requestOrder {
			if _, ok := c.requests[id]; ok {
				kept = append(kept, id)
			}
		}
		c.requestOrder = kept
	}
}

// response counts a model request's answer under the model its request
// named (Other for one made before the metrics started).
func (c *eventCounters) response(ev *abi.Event, d *abi.LLMResponse) {
	model, ok := c.requests[ev.CausationID]
	if !ok {
		model = Other
	}
	delete(c.requests, ev.CausationID)
	outcome := "ok"
	if d.Error != nil {
		outcome = "error"
	}
	c.modelCalls.WithLabelValues(c.bounds[mModelCalls].values(model, outcome)...).Inc()
	c.modelSecs.WithLabelValues(c.bounds[mModelSeconds].values(model)...).Observe(d.Duration.Seconds())
	if d.Result != nil {
		b := c.bounds[mTokens]
		if n := d.Result.Usage.PromptTokens; n > 0 {
			c.tokens.WithLabelValues(b.values(model, "input")...).Add(float64(n))
		}
		if n := d.Result.Usage.CompletionTokens; n > 0 {
			c.tokens.WithLabelValues(b.values(model, "output")...).Add(float64(n))
		}
	}
}

// walSizer is a store that keeps a write-ahead log (the SQLite store).
type walSizer interface{ WALBytes() int64 }

// liveCollector reads the gauges at each scrape: the bus's counters, the
// store's state, the approvals and the agents.
type liveCollector struct{ cfg MetricsConfig }

var (
	dPublished = prometheus.NewDesc("kairo_events_published_total", "Events this daemon stored.", nil, nil)
	dRefused   = prometheus.NewDesc("kairo_events_refused_total", "Events the store refused, by reason (disk_full, unreachable).", []string{"reason"}, nil)
	dState     = prometheus.NewDesc("kairo_store_state", "The event store's state: 1 for the one it is in (writable, full, unreachable), else 0.", []string{"state"}, nil)
	dLastSeq   = prometheus.NewDesc("kairo_store_last_seq", "The sequence number of the last event stored.", nil, nil)
	dWAL       = prometheus.NewDesc("kairo_store_wal_bytes", "The size of the SQLite store's write-ahead log, in bytes.", nil, nil)
	dKept      = prometheus.NewDesc("kairo_store_kept_events", "Facts the bus keeps while the store cannot take them, to store once it can.", nil, nil)
	dSubs      = prometheus.NewDesc("kairo_bus_subscriptions", "Open subscriptions to the bus.", nil, nil)
	dLagging   = prometheus.NewDesc("kairo_bus_subscriptions_lagging", "Subscriptions that fell behind and read the store to catch up.", nil, nil)
	dCatchUps  = prometheus.NewDesc("kairo_bus_catch_ups_total", "Times a subscription fell behind and caught up from the store.", nil, nil)
	dApprovals = prometheus.NewDesc("kairo_approvals_pending", "Approvals waiting for a person's decision.", nil, nil)
	dRunLoops  = prometheus.NewDesc("kairo_run_loops", "Open run loops, by agent and state (open; interrupted: waiting for the user after an interruption).", []string{"agent", "state"}, nil)
	dTicks     = prometheus.NewDesc("kairo_agent_ticks_total", "Ticks an agent's loop ran.", []string{"agent"}, nil)
	dSkipped   = prometheus.NewDesc("kairo_agent_ticks_skipped_total", "Ticks an agent's loop dropped for running late.", []string{"agent"}, nil)
	dTickLag   = prometheus.NewDesc("kairo_agent_tick_lag_seconds", "How late an agent's loop woke for its latest tick, in seconds.", []string{"agent"}, nil)
)

func (l *liveCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dPublished, dRefused, dState, dLastSeq, dKept, dSubs, dLagging, dCatchUps, dRunLoops, dTicks, dSkipped, dTickLag} {
		ch <- d
	}
	if _, ok := l.cfg.Bus.Store().(walSizer); ok {
		ch <- dWAL
	}
	if l.cfg.Kernel != nil {
		ch <- dApprovals
	}
}

func (l *liveCollector) Collect(ch chan<- prometheus.Metric) {
	b := l.cfg.Bus
	st := b.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter(dPublished, st.Published)
	counter(dRefused, st.RefusedFull, "disk_full")
	counter(dRefused, st.RefusedUnreachable, "unreachable")
	fullSince, _ := b.Full()
	awaySince, _ := b.Unreachable()
	full, away := !fullSince.IsZero(), !awaySince.IsZero()
	gauge(dState, one(!full && !away), "writable")
	gauge(dState, one(full), "full")
	gauge(dState, one(away), "unreachable")
	gauge(dLastSeq, float64(b.LastSeq()))
	if w, ok := b.Store().(walSizer); ok {
		gauge(dWAL, float64(w.WALBytes()))
	}
	kept, _ := b.Kept()
	gauge(dKept, float64(kept))
	gauge(dSubs, float64(st.Subscriptions))
	gauge(dLagging, float64(st.Lagging))
	counter(dCatchUps, st.CatchUps)
	if l.cfg.Kernel != nil {
		gauge(dApprovals, float64(len(l.cfg.Kernel.Approvals(false))))
	}
	if l.cfg.Agents == nil {
		return
	}
	agents := l.cfg.Agents()
	// The agents are the operator's configuration; bounded all the same.
	agents = agents[:min(len(agents), l.cfg.MaxSeries)]
	for _, a := range agents {
		gauge(dRunLoops, float64(a.Open), a.Agent, "open")
		gauge(dRunLoops, float64(a.Interrupted), a.Agent, "interrupted")
		counter(dTicks, a.Ticks, a.Agent)
		counter(dSkipped, a.Skipped, a.Agent)
		gauge(dTickLag, a.TickLag.Seconds(), a.Agent)
	}
}

func one(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
