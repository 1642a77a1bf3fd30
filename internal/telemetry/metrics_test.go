package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/telemetry"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
	"github.com/kairo-os/kairo/kernel/bus/sqlite"
)

// publish stores one event of typ with data, from source.
func publish(t *testing.T, b *bus.Bus, typ, source string, data any, mod ...func(*abi.Event)) *abi.Event {
	t.Helper()
	raw, err := msgpack.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	ev := &abi.Event{Type: typ, Source: source, Data: raw}
	for _, f := range mod {
		f(ev)
	}
	if _, err := b.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// sample is the value of the series of name whose labels include want;
// ok false when there is none.
func sample(t *testing.T, reg prometheus.Gatherer, name string, want map[string]string) (float64, bool) {
	t.Helper()
	for _, m := range series(t, reg, name) {
		if !hasLabels(m, want) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func series(t *testing.T, reg prometheus.Gatherer, name string) []*dto.Metric {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f.Metric
		}
	}
	return nil
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.Label {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

// waitFor waits until the series of name with labels is v: the events are
// counted by a subscription, after Publish returns.
func waitFor(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string, v float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, ok := sample(t, reg, name, labels)
		if ok && got == v {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v (present: %v) after 10s; want %v", name, labels, got, ok, v)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newMetrics(t *testing.T, cfg telemetry.MetricsConfig) *telemetry.Metrics {
	t.Helper()
	m, err := telemetry.NewMetrics(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

func newBus(t *testing.T, st bus.Store) *bus.Bus {
	b := bus.New(st, bus.Config{})
	t.Cleanup(func() { b.Close() })
	return b
}

func list(names ...string) func() []string { return func() []string { return names } }

// The events of a task, a plugin and a model move their counters, with the
// names the daemon knows as labels; the gauges read the bus and the agents
// at the scrape. An event the metrics do not count moves none (the
// control), and the names follow Prometheus's conventions (promlint).
func TestMetricsCountEvents(t *testing.T) {
	b := newBus(t, bus.NewMemoryStore(0))
	m := newMetrics(t, telemetry.MetricsConfig{
		Bus: b, Tools: list("process.spawn"), Plugins: list("echo"), Models: []string{"gpt-test"},
		Agents: func() []telemetry.AgentHealth {
			return []telemetry.AgentHealth{{Agent: "default", Open: 1, Interrupted: 2, Ticks: 40, Skipped: 3, TickLag: 1500 * time.Microsecond}}
		},
	})
	reg := m.Registry()
	zero := 0
	publish(t, b, "kairo.test.other", "test", map[string]string{"tool": "process.spawn"}) // counted by none
	publish(t, b, abi.SubjectIntentStarted, "agent/default", abi.IntentStarted{RunLoopID: "r1", Agent: "default", Goal: "run echo hi"})
	publish(t, b, abi.SubjectToolResult, "agent/default", abi.ToolResultEvent{Tool: "process.spawn", Status: abi.StatusDone, Duration: 20 * time.Millisecond})
	publish(t, b, abi.SubjectProcessExited, "kernel", abi.ProcessExitedEvent{Status: abi.ProcessExited, ExitCode: &zero, DurationMs: 1500})
	publish(t, b, abi.SubjectProcessExited, "kernel", abi.ProcessExitedEvent{Status: abi.ProcessKilled, Signal: "SIGKILL"})
	publish(t, b, abi.SubjectIntentEnded, "agent/default", abi.IntentEnded{RunLoopID: "r1", Status: abi.StatusDone, Summary: "hi"})
	publish(t, b, abi.SubjectPluginFailed, "kernel", abi.PluginFailed{Plugin: "echo", Reason: "trap"})
	publish(t, b, abi.SubjectPluginThrottled, "kernel", abi.PluginThrottled{Plugin: "echo"})
	req := publish(t, b, abi.SubjectLLMRequest, "host/llm", abi.LLMRequest{Model: "gpt-test"})
	publish(t, b, abi.SubjectLLMResponse, "host/llm", abi.LLMResponse{Duration: 2 * time.Second,
		Result: &abi.ChatResult{Model: "gpt-test-2026", Usage: abi.ChatUsage{PromptTokens: 10, CompletionTokens: 5}}},
		func(ev *abi.Event) { ev.CausationID = req.ID })
	req = publish(t, b, abi.SubjectLLMRequest, "host/llm", abi.LLMRequest{Model: "gpt-test"})
	publish(t, b, abi.SubjectLLMResponse, "host/llm", abi.LLMResponse{Error: &abi.Error{Code: "unavailable"}},
		func(ev *abi.Event) { ev.CausationID = req.ID })

	waitFor(t, reg, "kairo_model_calls_total", map[string]string{"model": "gpt-test", "outcome": "error"}, 1)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"kairo_run_loops_started_total", map[string]string{"agent": "default"}, 1},
		{"kairo_tool_calls_total", map[string]string{"tool": "process.spawn", "status": "done"}, 1},
		{"kairo_tool_call_duration_seconds", nil, 1},
		{"kairo_processes_total", map[string]string{"outcome": "ok"}, 1},
		{"kairo_processes_total", map[string]string{"outcome": "killed"}, 1},
		{"kairo_process_duration_seconds", nil, 2},
		{"kairo_run_loops_ended_total", map[string]string{"agent": "default", "status": "done"}, 1},
		{"kairo_plugin_failures_total", map[string]string{"plugin": "echo"}, 1},
		{"kairo_plugin_throttles_total", map[string]string{"plugin": "echo"}, 1},
		{"kairo_model_calls_total", map[string]string{"model": "gpt-test", "outcome": "ok"}, 1},
		{"kairo_model_tokens_total", map[string]string{"model": "gpt-test", "kind": "input"}, 10},
		{"kairo_model_tokens_total", map[string]string{"model": "gpt-test", "kind": "output"}, 5},
		{"kairo_model_call_duration_seconds", map[string]string{"model": "gpt-test"}, 2},
		{"kairo_events_published_total", nil, 12},
		{"kairo_events_refused_total", map[string]string{"reason": "disk_full"}, 0},
		{"kairo_store_state", map[string]string{"state": "writable"}, 1},
		{"kairo_store_state", map[string]string{"state": "full"}, 0},
		{"kairo_store_last_seq", nil, 12},
		{"kairo_run_loops", map[string]string{"agent": "default", "state": "open"}, 1},
		{"kairo_run_loops", map[string]string{"agent": "default", "state": "interrupted"}, 2},
		{"kairo_agent_ticks_total", map[string]string{"agent": "default"}, 40},
		{"kairo_agent_ticks_skipped_total", map[string]string{"agent": "default"}, 3},
		{"kairo_agent_tick_lag_seconds", map[string]string{"agent": "default"}, 0.0015},
		{"kairo_metrics_events_unreadable_total", nil, 0},
		{"go_goroutines", nil, -1},
		{"process_start_time_seconds", nil, -1},
	} {
		got, ok := sample(t, reg, c.name, c.labels)
		if !ok || (c.want >= 0 && got != c.want) {
			t.Errorf("%s%v = %v (present: %v); want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	// No label holds what a user or a model wrote: the goal, the summary,
	// the name the endpoint gave its model.
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, s := range f.Metric {
			for _, l := range s.Label {
				if v := l.GetValue(); strings.Contains(v, "echo hi") || v == "hi" || v == "gpt-test-2026" {
					t.Errorf("%s has the label %s=%q", f.GetName(), l.GetName(), v)
				}
			}
		}
	}
	problems, err := promlint.NewWithMetricFamilies(kairoOnly(fams)).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
}

func kairoOnly(fams []*dto.MetricFamily) []*dto.MetricFamily {
	var out []*dto.MetricFamily
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "kairo_") {
			out = append(out, f)
		}
	}
	return out
}

// What a model or a plugin names cannot grow the series without bound: a
// flood of invented tool names is counted under "other", each fold
// counted, while a registered tool keeps its own series (the control); and
// past MaxSeries label sets even known names fold.
func TestMetricsLabelsBounded(t *testing.T) {
	b := newBus(t, bus.NewMemoryStore(0))
	known := []string{"process.spawn"}
	for i := range 20 {
		known = append(known, fmt.Sprintf("mcp.files.tool%d", i))
	}
	m := newMetrics(t, telemetry.MetricsConfig{Bus: b, Tools: list(known...), Plugins: list("echo"), MaxSeries: 8})
	reg := m.Registry()
	const flood = 500
	for i := range flood {
		publish(t, b, abi.SubjectToolResult, "agent/default", abi.ToolResultEvent{Tool: fmt.Sprintf("invented-%d", i), Status: abi.StatusDone})
	}
	publish(t, b, abi.SubjectToolResult, "agent/default", abi.ToolResultEvent{Tool: "process.spawn", Status: abi.StatusDone})
	publish(t, b, abi.SubjectToolResult, "agent/default", abi.ToolResultEvent{Tool: "process.spawn", Status: "pwned\n"})
	publish(t, b, abi.SubjectPluginFailed, "kernel", abi.PluginFailed{Plugin: "not-loaded"})
	waitFor(t, reg, "kairo_plugin_failures_total", map[string]string{"plugin": "other"}, 1)
	if got, _ := sample(t, reg, "kairo_tool_calls_total", map[string]string{"tool": "other", "status": "done"}); got != flood {
		t.Errorf("invented tools counted as other: %v; want %d", got, flood)
	}
	if got, _ := sample(t, reg, "kairo_tool_calls_total", map[string]string{"tool": "process.spawn", "status": "done"}); got != 1 {
		t.Errorf("the registered tool: %v; want 1", got)
	}
	if got, _ := sample(t, reg, "kairo_tool_calls_total", map[string]string{"tool": "process.spawn", "status": "other"}); got != 1 {
		t.Errorf("an unknown status: %v; want 1 under other", got)
	}
	if got, _ := sample(t, reg, "kairo_metrics_labels_folded_total", map[string]string{"metric": "kairo_tool_calls_total"}); got != flood+1 {
		t.Errorf("folds counted: %v; want %d", got, flood+1)
	}

	// Known names, more than the bound allows: the first sets pass, the
	// rest fold into other.
	for _, name := range known[1:] {
		publish(t, b, abi.SubjectToolResult, "agent/default", abi.ToolResultEvent{Tool: name, Status: abi.StatusFailed})
	}
	publish(t, b, abi.SubjectIntentStarted, "kernel", abi.IntentStarted{}) // the sync point
	waitFor(t, reg, "kairo_run_loops_started_total", map[string]string{"agent": "other"}, 1)
	if n := len(series(t, reg, "kairo_tool_calls_total")); n > 8+1 {
		t.Errorf("%d series of kairo_tool_calls_total; want at most 9 (8 and other)", n)
	}
	if got, _ := sample(t, reg, "kairo_tool_calls_total", map[string]string{"tool": "other", "status": "other"}); got == 0 {
		t.Error("no known tool past the bound was folded")
	}
}

// A full disk shows as the store's state and in the refusals, and the
// state is writable again once the disk has room; the refusals stay
// counted. The SQLite store reports its WAL's size; the memory store has
// none, and no such series (the control).
func TestMetricsStore(t *testing.T) {
	st := &bustest.Fillable{Store: bus.NewMemoryStore(0)}
	b := newBus(t, st)
	reg := newMetrics(t, telemetry.MetricsConfig{Bus: b}).Registry()
	st.Full.Store(true)
	if _, err := b.Publish(context.Background(), &abi.Event{Type: "kairo.test"}); !bus.IsDiskFull(err) {
		t.Fatalf("a publish on a full disk: %v", err)
	}
	for state, want := range map[string]float64{"full": 1, "writable": 0, "unreachable": 0} {
		if got, _ := sample(t, reg, "kairo_store_state", map[string]string{"state": state}); got != want {
			t.Errorf("kairo_store_state{state=%q} = %v on a full disk; want %v", state, got, want)
		}
	}
	if got, _ := sample(t, reg, "kairo_events_refused_total", map[string]string{"reason": "disk_full"}); got != 1 {
		t.Errorf("refused for a full disk: %v; want 1", got)
	}
	if _, ok := sample(t, reg, "kairo_store_wal_bytes", nil); ok {
		t.Error("the memory store has a WAL size")
	}
	st.Full.Store(false)
	waitFor(t, reg, "kairo_store_state", map[string]string{"state": "writable"}, 1)
	waitFor(t, reg, "kairo_events_refused_total", map[string]string{"reason": "disk_full"}, 1)

	s, err := sqlite.Open(filepath.Join(t.TempDir(), "events.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sb := newBus(t, s)
	sreg := newMetrics(t, telemetry.MetricsConfig{Bus: sb}).Registry()
	publish(t, sb, "kairo.test", "test", "x")
	if got, ok := sample(t, sreg, "kairo_store_wal_bytes", nil); !ok || got <= 0 {
		t.Errorf("kairo_store_wal_bytes of a SQLite store that took an event = %v (present: %v); want its size", got, ok)
	}
}

// The endpoint serves GET and HEAD /metrics and nothing else; it refuses
// a non-loopback address unless allowed, names [telemetry]
// metrics_listen when its port is taken, and is gone after Close.
func TestMetricsEndpoint(t *testing.T) {
	b := newBus(t, bus.NewMemoryStore(0))
	m, err := telemetry.NewMetrics(telemetry.MetricsConfig{Bus: b})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	if err := m.Serve("0.0.0.0:0", false); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Fatalf("Serve on 0.0.0.0 without allow_remote: %v", err)
	}
	if m.Addr() != nil {
		t.Fatal("a refused address listens")
	}
	if err := m.Serve("127.0.0.1:0", false); err != nil {
		t.Fatal(err)
	}
	base := "http://" + m.Addr().String()
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/metrics", 200},
		{"HEAD", "/metrics", 200},
		{"GET", "/", 404},
		{"GET", "/metrics/x", 404},
		{"GET", "/debug/pprof/", 404},
		{"POST", "/metrics", 405},
	} {
		req, _ := http.NewRequest(c.method, base+c.path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Errorf("%s %s: %d; want %d", c.method, c.path, res.StatusCode, c.want)
		}
		if c.method == "GET" && c.want == 200 && !strings.Contains(string(body), "# HELP kairo_events_published_total") {
			t.Errorf("GET /metrics lacks kairo_events_published_total:\n%.2000s", body)
		}
	}

	other, err := telemetry.NewMetrics(telemetry.MetricsConfig{Bus: b})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	if err := other.Serve(m.Addr().String(), false); err == nil || !strings.Contains(err.Error(), "[telemetry] metrics_listen") {
		t.Errorf("Serve on a taken port: %v; want an error naming [telemetry] metrics_listen", err)
	}

	addr := m.Addr().String()
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("the endpoint still listens after Close")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Logf("dial after Close: %v", err)
	}
}
