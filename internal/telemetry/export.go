package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/manifests"
	"github.com/prometheus/client_golang/prometheus"
)

// ExporterConfig configures an [Exporter].
type ExporterConfig struct {
	Bus *bus.Bus
	// Exporter receives the spans: the OTLP client [OTLP] opens.
	Exporter Uploader
	Resource Resource
	// StatePath keeps the export's place in the log and the spans it has
	// begun, so a restart resumes there.
	StatePath string
	// Backlog bounds how far behind the log's head the export may fall,
	// in events; past it the oldest are passed by, and counted.
	Backlog int
	Logger  *slog.Logger
	// FlushEvery is how often spans are sent when fewer than Batch wait;
	// default 1s. Batch default 512.
	FlushEvery time.Duration
	Batch      int
	// Retry is the first wait after a failed export, doubled up to 30s;
	// default 1s.
	Retry time.Duration
}

// ExportStats are the exporter's counters.
type ExportStats struct {
	// Seq is the last event whose spans were all sent.
	Seq uint64
	// Exported counts the spans the receiver took; Failures the exports
	// that failed (each retried from the log).
	Exported, Failures uint64
	// Dropped counts the spans given up: past a bound of the builder, or
	// made of events the export fell more than Backlog behind on.
	Dropped uint64
	// PassedBy counts the events the export skipped, being more than
	// Backlog behind the log's head.
	PassedBy uint64
	// Down is set while the receiver refuses or cannot be reached.
	Down bool
}

// Exporter follows the log and sends each run loop's spans as they end.
// It reads the log as any subscriber does — live, and from the store when
// it falls behind — so it never slows a publisher, and a receiver that is
// down loses nothing within the backlog: the export waits, then resumes
// where it stopped.
//
// Two goroutines: the subscription's handler builds spans and cuts them
// into batches; the sender exports each batch in order, retrying while the
// receiver fails. A sender that is stuck fills the batches' queue, which
// stops the handler, whose subscription then falls behind and reads the
// store when it resumes: the log is the queue.
type Exporter struct {
	cfg ExporterConfig
	log *slog.Logger

	mu       sync.Mutex // the builder, pending, last, cut and saved
	b        *Builder
	pending  []Span
	last     uint64    // the last event the builder read
	cut      uint64    // the last event of the last batch cut
	saved    time.Time // when a batch last carried the builder's state
	savedSeq uint64    // the event that state was at
	batches  chan batch
	gen      atomic.Uint64 // bumped when the export passes events by: older batches are dropped
	behind   atomic.Bool   // the sender gave a batch up for the backlog: the handler skips ahead
	// unsent is set once a batch was neither sent nor given up (the
	// exporter stopped while the receiver was down): no later batch may
	// then save a place past it, or a restart would not send it again.
	unsent   atomic.Bool
	sent     atomic.Uint64 // every span of the events up to it was sent
	exported atomic.Uint64
	failures atomic.Uint64
	dropped  atomic.Uint64
	passedBy atomic.Uint64
	down     atomic.Bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// batch is spans cut from the builder: every span of the events up to seq
// not in an earlier batch, and, at most once a second, the builder's state
// at seq to save when they are sent.
type batch struct {
	spans []Span
	seq   uint64
	state []byte
	gen   uint64
}

// linger is how long the export lets events gather before it reads them:
// spans are sent within a second or so anyway, and a subscriber that woke
// for each event would compete with the agent, on its path, for the CPU.
const linger = 50 * time.Millisecond

// errBehind ends a subscription that fell more than the backlog behind.
var errBehind = errors.New("the trace export fell behind the log by more than its backlog")

// savedState is the state file: the export's place and the open spans.
type savedState struct {
	Version int             `json:"version"`
	Host    string          `json:"host,omitempty"`
	Seq     uint64          `json:"seq"`
	State   json.RawMessage `json:"state"`
}

const stateVersion = 1

// NewExporter returns an exporter that resumes where the state file says,
// or starts at the log's head when there is none (or it is damaged, which
// it logs).
func NewExporter(cfg ExporterConfig) *Exporter {
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 512
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = 100_000
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Exporter{cfg: cfg, log: log, batches: make(chan batch, 4)}
	host := cfg.Bus.Host()
	seq, st, err := loadState(cfg.StatePath)
	switch {
	case err == nil && seq <= cfg.Bus.LastSeq() && st.host == host:
		e.b = NewBuilder(host, st.state)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		log.Warn("the trace export's state file is damaged: traces start at the log's head; kairo traces export --since sends what came before", "file", cfg.StatePath, "err", err)
		fallthrough
	default:
		e.b, seq = NewBuilder(host, nil), cfg.Bus.LastSeq()
		// Kept now, not at the first send: a receiver down from the start
		// would have a restart begin at the head, past what ran meanwhile.
		if err := saveState(cfg.StatePath, savedState{Version: stateVersion, Host: host, Seq: seq, State: json.RawMessage("{}")}); err != nil {
			log.Warn("cannot save the trace export's place; after a restart it resumes at the log's head", "file", cfg.StatePath, "err", err)
		}
	}
	e.last, e.cut, e.savedSeq = seq, seq, seq
	e.sent.Store(seq)
	return e
}

// Start begins following the log.
func (e *Exporter) Start() {
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.wg.Add(2)
	go e.follow()
	go e.send()
}

// Stop sends what is ready (waiting at most a few seconds), saves the
// export's place and stops; what was not sent is sent from the log at the
// next start.
func (e *Exporter) Stop() {
	if e.cancel == nil {
		return
	}
	e.cancel()
	e.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	e.mu.Lock()
	final := e.cutBatch(true)
	e.mu.Unlock()
	defer e.cfg.Exporter.Stop(ctx)
	for len(e.batches) > 0 { // the handler and the sender have stopped
		if !e.deliver(ctx, <-e.batches, false) {
			return
		}
	}
	if final != nil {
		e.deliver(ctx, *final, false)
	}
}

// Stats returns the exporter's counters. It never waits for an export.
func (e *Exporter) Stats() ExportStats {
	return ExportStats{Seq: e.sent.Load(), Exported: e.exported.Load(), Failures: e.failures.Load(),
		Dropped: e.dropped.Load() + e.b.Dropped(), PassedBy: e.passedBy.Load(), Down: e.down.Load()}
}

// follow reads the log into batches.
func (e *Exporter) follow() {
	defer e.wg.Done()
	tick := time.NewTicker(e.cfg.FlushEvery)
	defer tick.Stop()
	for e.ctx.Err() == nil {
		from := e.skipAhead()
		// Only the subjects spans are made of: the others cost the bus
		// nothing for this subscription.
		sub, err := e.cfg.Bus.Subscribe(e.ctx, abi.SubjectAll, bus.SubscribeConfig{FromSeq: from, Match: Interesting, Linger: linger}, e.handle)
		if err != nil {
			e.log.Warn("the trace export cannot follow the log; it tries again", "err", err)
			if !sleep(e.ctx, e.cfg.Retry) {
				return
			}
			continue
		}
	following:
		for {
			select {
			case <-e.ctx.Done():
				sub.Close()
				return
			case <-sub.Done():
				if err := sub.Err(); err != nil && !errors.Is(err, errBehind) && e.ctx.Err() == nil {
					e.log.Warn("the trace export stopped following the log; it resumes", "err", err)
					sleep(e.ctx, e.cfg.Retry)
				}
				break following
			case <-tick.C:
				// Unless the handler holds the lock, or the sender is
				// busy: then at the next tick. The lock held, only the
				// sender takes from the queue, so the send cannot block.
				if e.mu.TryLock() {
					if len(e.batches) < cap(e.batches) {
						if b := e.cutBatch(false); b != nil {
							e.batches <- *b
						}
					}
					e.mu.Unlock()
				}
			}
		}
	}
}

// skipAhead is where to follow the log from: after the last event read,
// unless that is more than the backlog behind the log's head (after a
// long outage of the receiver, or of the daemon); then from the backlog's
// bound, the events between passed by and counted, and the spans they
// began given up. A batch the sender gave up is counted here too.
func (e *Exporter) skipAhead() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	from := e.last + 1
	if e.behind.Load() {
		e.gen.Add(1) // the batches queued are given up
		e.dropped.Add(uint64(len(e.pending)))
		e.pending = nil
		e.behind.Store(false)
	}
	head, backlog := e.cfg.Bus.LastSeq(), uint64(e.cfg.Backlog)
	if head < from || head-from < backlog {
		return from
	}
	skip := head - backlog + 1
	e.gen.Add(1)
	e.passedBy.Add(skip - from)
	e.dropped.Add(uint64(len(e.pending) + e.b.Forget()))
	e.pending = nil
	e.log.Warn("the trace export is more than [telemetry] max_backlog events behind the log: it passes the oldest by", "passedBy", skip-from, "from", skip)
	e.last, e.cut = skip-1, skip-1
	e.sent.Store(skip - 1)
	return skip
}

func (e *Exporter) handle(evs []abi.Event) error {
	if e.behind.Load() {
		return errBehind
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range evs {
		ev := &evs[i]
		if ev.Seq <= e.last {
			continue
		}
		e.pending = e.b.Add(ev, e.pending)
		e.last = ev.Seq
	}
	if len(e.pending) < e.cfg.Batch {
		return nil
	}
	select { // waits while the sender is stuck: the subscription falls behind
	case e.batches <- *e.cutBatch(false):
		return nil
	case <-e.ctx.Done():
		return e.ctx.Err()
	}
}

// cutBatch cuts what the builder made since the last batch, nil when
// nothing; the batch carries the builder's state when force is set (then
// also when nothing else is new since a batch last carried it) or a second
// has passed since one last did. The caller holds e.mu.
func (e *Exporter) cutBatch(force bool) *batch {
	if len(e.pending) == 0 && e.last == e.cut && (!force || e.savedSeq == e.last) {
		return nil
	}
	b := &batch{spans: e.pending, seq: e.last, gen: e.gen.Load()}
	if force || time.Since(e.saved) >= time.Second {
		if raw, err := json.Marshal(e.b.State()); err == nil {
			b.state, e.saved, e.savedSeq = raw, time.Now(), e.last
		}
	}
	e.pending, e.cut = nil, e.last
	return b
}

// send exports the batches in order.
func (e *Exporter) send() {
	defer e.wg.Done()
	for {
		select {
		case <-e.ctx.Done():
			return
		case b := <-e.batches:
			e.deliver(e.ctx, b, true)
		}
	}
}

// deliver exports b, retrying while the receiver fails (when retry is set)
// until it takes them, ctx ends, or the export falls more than the backlog
// behind the log's head (then b is given up, counted, and the handler
// skips ahead). Sent, b's place is saved. It reports false when b was
// neither sent nor given up.
func (e *Exporter) deliver(ctx context.Context, b batch, retry bool) (done bool) {
	if e.unsent.Load() {
		return false
	}
	defer func() {
		if !done {
			e.unsent.Store(true)
		}
	}()
	if b.gen != e.gen.Load() || e.behind.Load() {
		e.dropped.Add(uint64(len(b.spans)))
		return true
	}
	if len(b.spans) > 0 {
		spans := toOTLP(e.cfg.Resource, b.spans)
		wait := e.cfg.Retry
		for {
			xctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := e.cfg.Exporter.UploadTraces(xctx, spans)
			cancel()
			if err == nil {
				e.exported.Add(uint64(len(b.spans)))
				if e.down.Swap(false) {
					e.log.Info("the trace receiver takes spans again; the export catches up from the log")
				}
				break
			}
			e.failures.Add(1)
			if !e.down.Swap(true) {
				e.log.Warn("the trace receiver refuses spans or cannot be reached: the export waits, and resumes from the log", "err", err)
			}
			if !retry || ctx.Err() != nil {
				return false // the place is not saved: the log still has them
			}
			// Given up once its own newest event is more than the
			// backlog behind the head, not the export's place: after a
			// give-up the place stays where the last batch was sent,
			// and a batch of the newest events would be given up too.
			if head := e.cfg.Bus.LastSeq(); head > b.seq && head-b.seq > uint64(e.cfg.Backlog) {
				e.dropped.Add(uint64(len(b.spans)))
				e.behind.Store(true)
				return true
			}
			if !sleep(ctx, wait) {
				return false
			}
			wait = min(2*wait, 30*time.Second)
		}
	}
	if b.gen != e.gen.Load() {
		return true
	}
	e.sent.Store(b.seq)
	if b.state != nil {
		if err := saveState(e.cfg.StatePath, savedState{Version: stateVersion, Host: e.cfg.Bus.Host(), Seq: b.seq, State: b.state}); err != nil {
			e.log.Warn("cannot save the trace export's place; after a restart it resumes from an earlier one", "file", e.cfg.StatePath, "err", err)
		}
	}
	return true
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// maxStateBytes bounds the state file read back.
const maxStateBytes = 64 << 20

// loaded is a state file read back.
type loaded struct {
	host  string
	state *State
}

func loadState(path string) (uint64, loaded, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, loaded{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, loaded{}, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxStateBytes {
		return 0, loaded{}, fmt.Errorf("%s is not a regular file of at most %d bytes", path, maxStateBytes)
	}
	var s savedState
	if err := json.NewDecoder(f).Decode(&s); err != nil {
		return 0, loaded{}, err
	}
	if s.Version != stateVersion {
		return 0, loaded{}, fmt.Errorf("%s: version %d, want %d", path, s.Version, stateVersion)
	}
	st := new(State)
	if err := json.Unmarshal(s.State, st); err != nil {
		return 0, loaded{}, fmt.Errorf("%s: %w", path, err)
	}
	return s.Seq, loaded{host: s.Host, state: st}, nil
}

func saveState(path string, s savedState) error {
	raw, err := json.Marshal(s)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".traces-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Collectors are the exporter's counters as metrics, for the daemon's
// /metrics.
func (e *Exporter) Collectors() []prometheus.Collector {
	counter := func(name, help string, v func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v()) })
	}
	return []prometheus.Collector{
		counter("kairo_trace_spans_exported_total", "Spans the trace receiver took.", e.exported.Load),
		counter("kairo_trace_export_failures_total", "Trace exports that failed (each retried from the log).", e.failures.Load),
		counter("kairo_trace_spans_dropped_total", "Spans given up: past a bound of the builder, or begun in events the export passed by.",
			func() uint64 { return e.dropped.Load() + e.b.Dropped() }),
		counter("kairo_trace_events_passed_total", "Events the trace export passed by, being more than [telemetry] max_backlog behind the log's head.", e.passedBy.Load),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kairo_trace_export_down", Help: "1 while the trace receiver refuses spans or cannot be reached."},
			func() float64 { return one(e.down.Load()) }),
	}
}

// FollowOTLP is an exporter of b's run loops to the OTLP receiver cfg
// names, with headers (their secret handles already read), as the service
// version; statePath keeps its place in the log.
func FollowOTLP(ctx context.Context, b *bus.Bus, cfg manifests.TelemetryConfig, headers map[string]string, version, statePath string, log *slog.Logger) (*Exporter, error) {
	exp, err := OTLP(ctx, cfg, headers)
	if err != nil {
		return nil, err
	}
	return NewExporter(ExporterConfig{Bus: b, Exporter: exp, Resource: ServiceResource(cfg.Service(), version, b.Host()),
		StatePath: statePath, Backlog: cfg.Backlog(), Logger: log}), nil
}
