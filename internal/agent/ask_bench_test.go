package agent

import (
	"slices"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
)

// BenchmarkAskRoundTrip: two agents on one kernel over SQLite, the rules
// policy on both sides, ticking at 1 kHz. The default agent is sent "ask
// ops: help" and asks ops (agent.ask); ops answers with its help, which
// ends its run loop, and the answer comes back as the asking action's
// kairo.tool.result. p50-ms and p99-ms are the median and 99th percentile
// from the asking action's event to that result's, both stamped by the
// bus.
//
// The tick rate: the ask reaches ops in the process and is observed at
// once, but ops decides at its next tick, so the span holds up to one
// period of ops's (1 ms at 1 kHz, half of it on average) besides ops's
// decision; the answer is the end of ops's run loop, turned into the
// result without waiting for a tick of the asker. The exchange a person
// sees waits up to one tick on each side besides: the asker's tick that
// decides to ask, and the one that says the answer.
//
// "sleep" waits for each tick on Go's timer, which wakes it up to about a
// millisecond late; "spin" is the default tick_spin of 2 ms: it sleeps on
// the kernel's timer for those 2 ms before each tick, and spins only for
// the last 100 µs (at 1 kHz a tenth of a core an agent; it spun all the
// time before, and each agent kept a core busy).
func BenchmarkAskRoundTrip(b *testing.B) {
	for _, c := range []struct {
		name string
		spin time.Duration
	}{{"sleep", -1}, {"spin", 0}} {
		b.Run(c.name, func(b *testing.B) { askRoundTrip(b, c.spin) })
	}
}

func askRoundTrip(b *testing.B, spin time.Duration) {
	e := newEnv(b)
	rules := e.rules()
	all := &kernel.SpawnAuthority{Skills: []string{"*"}, Commands: true}
	router, err := NewRouter("default", []AgentSpec{{ID: "default", Spawn: all}, {ID: "ops", Spawn: all}}, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	for _, id := range router.IDs() {
		e.start(Config{Agent: id, Policy: rules, Router: router, Hz: 1000, Spin: spin, MaxIterations: 1 << 20})
	}

	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		msg := e.say("ask ops: help", "")
		routed := e.events.until(b, "the message routed", func(ev *abi.Event) bool {
			return ev.Type == abi.AgentMessageSubject("default") && ev.CausationID == msg.ID
		})
		ask := e.events.until(b, "the ask", func(ev *abi.Event) bool {
			return ev.Type == abi.SubjectAgentAction && ev.CausationID == routed.ID
		})
		res := e.events.until(b, "the ask's result", func(ev *abi.Event) bool {
			return ev.Type == abi.SubjectToolResult && ev.CorrelationID == ask.CorrelationID
		})
		if d := decodeAs[abi.ToolResultEvent](b, res); d.Tool != abi.ToolAgentAsk || d.ActionID != ask.ID || d.Status != abi.StatusDone {
			b.Fatalf("the result %+v; want the ask %s answered", d, ask.ID)
		}
		// The asker says the answer and ends its run loop before the next
		// message: one exchange at a time.
		e.events.until(b, "the asker's end", func(ev *abi.Event) bool {
			return ev.Type == abi.SubjectIntentEnded && ev.CorrelationID == ask.CorrelationID
		})
		lat = append(lat, res.Time.Sub(ask.Time))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
