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
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ExporterConfig configures an [Exporter].
type ExporterConfig struct {
	Bus *bus.Bus
	// Exporter receives the spans: OTLP, or anything the SDK exports to.
	Exporter sdktrace.SpanExporter
	Resource *resource.Resource
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
type Exporter struct {
	cfg  ExporterConfig
	log  *slog.Logger
	conv *converter

	mu      sync.Mutex // the builder, pending, seq and last; held across an export
	b       *Builder
	pending []Span
	seq     uint64 // every span of the events up to seq was sent
	last    uint64 // the last event the builder read

	sent                                  atomic.Uint64 // seq, for Stats
	exported, failures, dropped, passedBy atomic.Uint64
	down                                  atomic.Bool

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// errBehind ends a subscription that fell more than the backlog behind.
var errBehind = errors.New("the trace export fell behind the log by more than its backlog")

// savedState is the state file: the export's place and the open spans.
type savedState struct {
	Version int    `json:"version"`
	Host    string `json:"host,omitempty"`
	Seq     uint64 `json:"seq"`
	State   *State `json:"state"`
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
	e := &Exporter{cfg: cfg, log: log, conv: newConverter(cfg.Resource), done: make(chan struct{})}
	host := cfg.Bus.Host()
	saved, err := loadState(cfg.StatePath)
	switch {
	case err == nil && saved.Host == host && saved.Seq <= cfg.Bus.LastSeq():
		e.b, e.seq = NewBuilder(host, saved.State), saved.Seq
	case err != nil && !errors.Is(err, os.ErrNotExist):
		log.Warn("the trace export's state file is damaged: traces start at the log's head; kairo traces export --since sends what came before", "file", cfg.StatePath, "err", err)
		fallthrough
	default:
		e.b, e.seq = NewBuilder(host, nil), cfg.Bus.LastSeq()
		// Kept now, not at the first send: a receiver down from the start
		// would otherwise have a restart begin at the head, past what ran.
		e.save()
	}
	e.last = e.seq
	e.sent.Store(e.seq)
	return e
}

// Start begins following the log.
func (e *Exporter) Start() {
	e.ctx, e.cancel = context.WithCancel(context.Background())
	go e.run()
}

// Stop sends what is ready (waiting at most a few seconds), saves the
// export's place and stops; what was not sent is sent from the log at the
// next start.
func (e *Exporter) Stop() {
	if e.cancel == nil {
		return
	}
	e.cancel()
	<-e.done
	e.mu.Lock()
	defer e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	e.send(ctx, false)
	sctx, scancel := context.WithTimeout(context.Background(), time.Second)
	defer scancel()
	e.cfg.Exporter.Shutdown(sctx)
}

// Stats returns the exporter's counters. It never waits for an export.
func (e *Exporter) Stats() ExportStats {
	return ExportStats{Seq: e.sent.Load(), Exported: e.exported.Load(), Failures: e.failures.Load(),
		Dropped: e.dropped.Load() + e.b.Dropped(), PassedBy: e.passedBy.Load(), Down: e.down.Load()}
}

func (e *Exporter) run() {
	defer close(e.done)
	tick := time.NewTicker(e.cfg.FlushEvery)
	defer tick.Stop()
	for e.ctx.Err() == nil {
		from := e.skipAhead()
		sub, err := e.cfg.Bus.Subscribe(e.ctx, abi.SubjectAll, bus.SubscribeConfig{FromSeq: from}, e.handle)
		if err != nil {
			e.log.Warn("the trace export cannot follow the log; it tries again", "err", err)
			if !sleep(e.ctx, e.cfg.Retry) {
				return
			}
			continue
		}
	follow:
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
				break follow
			case <-tick.C:
				if e.mu.TryLock() { // else the handler holds it, sending
					e.send(e.ctx, true)
					e.mu.Unlock()
				}
			}
		}
	}
}

// skipAhead is where to follow the log from: after the last event sent,
// unless that is more than the backlog behind the head; then the events
// between are passed by and counted, and the spans they began are given
// up.
func (e *Exporter) skipAhead() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	head, backlog := e.cfg.Bus.LastSeq(), uint64(e.cfg.Backlog)
	if head <= e.seq || head-e.seq <= backlog {
		return e.seq + 1
	}
	from := head - backlog + 1
	e.passedBy.Add(from - 1 - e.seq)
	e.dropped.Add(uint64(e.b.Forget()))
	e.log.Warn("the trace export fell behind the log by more than [telemetry] max_backlog: it passes events by", "passedBy", from-1-e.seq, "from", from)
	e.seq, e.last = from-1, from-1
	e.sent.Store(e.seq)
	return from
}

func (e *Exporter) handle(evs []abi.Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range evs {
		ev := &evs[i]
		if ev.Seq <= e.last {
			continue
		}
		e.pending = e.b.Add(ev, e.pending)
		e.last = ev.Seq
		if len(e.pending) >= e.cfg.Batch {
			if err := e.send(e.ctx, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// send exports the pending spans, retrying while the receiver fails (when
// retry is set) until it takes them, ctx ends, or the export falls more
// than the backlog behind; then it saves the export's place. The caller
// holds e.mu.
func (e *Exporter) send(ctx context.Context, retry bool) error {
	if len(e.pending) == 0 && e.last == e.seq {
		return nil
	}
	if len(e.pending) > 0 {
		spans := e.conv.convert(e.pending)
		wait := e.cfg.Retry
		for {
			xctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := e.cfg.Exporter.ExportSpans(xctx, spans)
			cancel()
			if err == nil {
				e.exported.Add(uint64(len(spans)))
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
				return err // the place is not saved: the log still has them
			}
			if head := e.cfg.Bus.LastSeq(); head > e.seq && head-e.seq > uint64(e.cfg.Backlog) {
				e.dropped.Add(uint64(len(e.pending)))
				e.pending = e.pending[:0]
				e.seq = e.last
				e.sent.Store(e.seq)
				return errBehind
			}
			if !sleep(ctx, wait) {
				return ctx.Err()
			}
			wait = min(2*wait, 30*time.Second)
		}
	}
	clear(e.pending)
	e.pending = e.pending[:0]
	e.seq = e.last
	e.sent.Store(e.seq)
	e.save()
	return nil
}

// save writes the export's place and the builder's state to the state
// file.
func (e *Exporter) save() {
	if err := saveState(e.cfg.StatePath, savedState{Version: stateVersion, Host: e.cfg.Bus.Host(), Seq: e.seq, State: e.b.State()}); err != nil {
		e.log.Warn("cannot save the trace export's place; after a restart it resumes from an earlier one", "file", e.cfg.StatePath, "err", err)
	}
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

func loadState(path string) (savedState, error) {
	var s savedState
	f, err := os.Open(path)
	if err != nil {
		return s, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return s, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxStateBytes {
		return s, fmt.Errorf("%s is not a regular file of at most %d bytes", path, maxStateBytes)
	}
	if err := json.NewDecoder(f).Decode(&s); err != nil {
		return s, err
	}
	if s.Version != stateVersion || s.State == nil {
		return s, fmt.Errorf("%s: version %d, want %d", path, s.Version, stateVersion)
	}
	return s, nil
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
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kairo_trace_export_behind_events", Help: "Events stored and not yet exported as spans."},
			func() float64 { return float64(e.cfg.Bus.LastSeq() - min(e.sent.Load(), e.cfg.Bus.LastSeq())) }),
	}
}
