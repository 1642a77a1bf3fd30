package tools_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/tools"
)

// BenchmarkToolDispatch measures what the registry adds to a tool call:
// from Registry.Call of a wasm plugin's tool (the toolbox plugin built with
// the SDK, loaded as a drop-in, so metered, under a deadline) to the
// kairo.tool.result of its answer durable in the SQLite store, as the agent
// runtime publishes it. It reports the median (p50-us) and the 99th
// percentile (p99-us) of that, and the median of the call alone, until
// Registry.Call returned the plugin's answer (call-p50-us), in
// microseconds: the difference is the store's commit of one event.
func BenchmarkToolDispatch(b *testing.B) {
	e := newEnv(b, tools.Config{}, map[string]string{"toolbox": ""})
	ctx := context.Background()
	one := func(id string) (call, published, durable time.Duration) {
		start := time.Now()
		res := e.reg.Call(ctx, tools.Invocation{ActionID: id, CorrelationID: "loop-1", Tool: "toolbox.echo", Args: `{"text":"hi"}`, Session: e.sess})
		call = time.Since(start)
		res.ActionID, res.Tool, res.Duration = id, "toolbox.echo", call
		data, err := msgpack.Marshal(&res)
		if err != nil {
			b.Fatal(err)
		}
		// As the agent runtime publishes it: handed to the bus, which
		// orders it and commits it in its next group.
		ack, err := e.bus.PublishAsync(&abi.Event{Type: abi.SubjectToolResult, CorrelationID: "loop-1", CausationID: id, Data: data})
		if err != nil {
			b.Fatal(err)
		}
		published = time.Since(start)
		if _, err := ack.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		if res.Status != abi.StatusDone {
			b.Fatalf("toolbox.echo: %+v", res)
		}
		return call, published, time.Since(start)
	}
	for range 100 { // warm: the first calls grow the guest's buffers
		one(abi.NewID())
	}
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = abi.NewID()
	}
	calls := make([]time.Duration, 0, b.N)
	took := make([]time.Duration, 0, b.N)
	durable := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		c, p, d := one(ids[i])
		calls, took, durable = append(calls, c), append(took, p), append(durable, d)
	}
	b.StopTimer()
	for _, s := range [][]time.Duration{calls, took, durable} {
		slices.Sort(s)
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	// p50-us: the dispatch, to the result event on the bus; durable-p50-us
	// adds the event store's commit, which the bus's own benchmarks follow.
	b.ReportMetric(us(took[len(took)/2]), "p50-us")
	b.ReportMetric(us(took[len(took)*99/100]), "p99-us")
	b.ReportMetric(us(calls[len(calls)/2]), "call-p50-us")
	b.ReportMetric(us(durable[len(durable)/2]), "durable-p50-us")
}
