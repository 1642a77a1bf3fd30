package host_test

import (
	"context"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/testkit/observe"
)

// Prometheus itself scrapes a daemon's /metrics: the target is up, the
// daemon's counters are there, and the tool calls, absent before a task
// ran (the control), count the spawn once "run echo hi" has run.
func TestPrometheusScrapesTheDaemon(t *testing.T) {
	d := startWith(t, t.TempDir(), "[telemetry]\nmetrics_listen = \"127.0.0.1:0\"\n")
	prom := observe.Prometheus(t, d.MetricsAddr(), 500*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if target, err := prom.WaitScraped(ctx); err != nil || target.Health != "up" {
		t.Fatalf("the daemon as Prometheus's target: %+v, %v\n%s", target, err, prom.Output())
	}
	if _, err := prom.WaitFor(ctx, "kairo_events_published_total", func(v float64) bool { return v > 0 }); err != nil {
		t.Fatal(err)
	}
	const spawns = `kairo_tool_calls_total{tool="process.spawn",status="done"}`
	if v, ok, err := prom.Query(ctx, spawns); err != nil || ok {
		t.Fatalf("%s before any task: %v (present: %v), %v; want none", spawns, v, ok, err)
	}
	raw, _ := msgpack.Marshal(abi.UserMessage{Text: "run echo hi", MessageID: abi.NewID()})
	if _, err := d.Kernel().Bus.Publish(ctx, &abi.Event{Type: abi.SubjectUserMessage, Source: "test", Data: raw}); err != nil {
		t.Fatal(err)
	}
	if _, err := prom.WaitFor(ctx, spawns, func(v float64) bool { return v >= 1 }); err != nil {
		t.Fatal(err)
	}
	if _, err := prom.WaitFor(ctx, `kairo_processes_total{outcome="ok"}`, func(v float64) bool { return v >= 1 }); err != nil {
		t.Fatal(err)
	}
}
