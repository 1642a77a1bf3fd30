package timer

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

func started(plugin string) abi.Event {
	return abi.Event{ID: "e-" + plugin, Type: "kairo.plugin.started", Data: encode(abi.PluginState{Plugin: plugin})}
}

// Timers arm on the plugin's own start, fire at their due times once each —
// a second answer for the same due time fires nothing — and the next wait
// is the earliest due time.
func TestTimers(t *testing.T) {
	s, err := newSource(map[string]any{"timers": []any{
		map[string]any{"name": "fast", "every": "10s", "say": "run echo tick"},
		map[string]any{"name": "slow", "every": "1m", "offset": "5s"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 23, 10, 0, 3, 0, time.UTC)
	out := s.handle(&abi.Batch{Time: t0, Events: []abi.Event{started("rules")}})
	if !out.wait.IsZero() || len(out.events) != 0 {
		t.Fatalf("another plugin's start armed the timers: %+v", out)
	}
	out = s.handle(&abi.Batch{Time: t0, Events: []abi.Event{started("timer")}})
	if want := t0.Add(2 * time.Second); !out.wait.Equal(want) || len(out.events) != 0 {
		t.Fatalf("armed: wait %v, %d events; want wait %v, none", out.wait, len(out.events), want)
	}
	s.waiting = 7
	out = s.handle(&abi.Batch{Time: t0.Add(2 * time.Second), CallResults: []abi.CallResult{{Token: 7}}})
	if len(out.events) != 1 || out.events[0].Type != SubjectTimerFired || !out.wait.Equal(t0.Add(7*time.Second)) {
		t.Fatalf("at 10:00:05: %+v, next wait %v", out.events, out.wait)
	}
	at := time.Date(2026, 11, 23, 10, 0, 10, 0, time.UTC)
	out = s.handle(&abi.Batch{Time: at, CallResults: []abi.CallResult{{Token: 7}}})
	if len(out.events) != 2 || out.events[0].Type != SubjectTimerFired || out.events[1].Type != abi.SubjectUserMessage {
		t.Fatalf("fired: %+v", out.events)
	}
	var m abi.UserMessage
	msgpack.Unmarshal(out.events[1].Data, &m)
	if m.Text != "run echo tick" || m.MessageID != "timer:fast:"+itoa(at.Unix()) {
		t.Fatalf("message %+v", m)
	}
	if want := at.Add(10 * time.Second); !out.wait.Equal(want) {
		t.Fatalf("next wait %v; want %v", out.wait, want)
	}
	if again := s.handle(&abi.Batch{Time: at.Add(time.Second), CallResults: []abi.CallResult{{Token: 7}}}); len(again.events) != 0 {
		t.Fatalf("fired twice for one due time: %+v", again.events)
	}
	if stale := s.handle(&abi.Batch{Time: at.Add(time.Minute), CallResults: []abi.CallResult{{Token: 3}}}); len(stale.events) != 0 {
		t.Fatalf("an answer to another call fired: %+v", stale.events)
	}
	late := time.Date(2026, 11, 23, 10, 1, 6, 0, time.UTC)
	out = s.handle(&abi.Batch{Time: late, CallResults: []abi.CallResult{{Token: 7}}})
	var names []string
	for _, ev := range out.events {
		if ev.Type == SubjectTimerFired {
			var f TimerFired
			msgpack.Unmarshal(ev.Data, &f)
			names = append(names, f.Name)
		}
	}
	if strings.Join(names, ",") != "fast,slow" {
		t.Fatalf("at %v fired %v; want fast and slow", late, names)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Forwarded system events become observations; others do not.
func TestForward(t *testing.T) {
	s, err := newSource(nil)
	if err != nil {
		t.Fatal(err)
	}
	out := s.handle(&abi.Batch{Time: time.Now(), Events: []abi.Event{
		{ID: "x", Type: "kairo.plugin.stopped", Data: encode(abi.PluginState{Plugin: "llm", Reason: "failed 5 times within 1m0s"})},
	}})
	if len(out.events) != 1 || out.events[0].Type != abi.SubjectObservation || out.events[0].CausationID != "x" {
		t.Fatalf("events %+v", out.events)
	}
	var o abi.Observation
	msgpack.Unmarshal(out.events[0].Data, &o)
	if o.Kind != "system_event" || o.Text != "plugin llm stopped: failed 5 times within 1m0s" {
		t.Fatalf("observation %+v", o)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  map[string]any
		want string
	}{
		{map[string]any{"timers": "x"}, "list of tables"},
		{map[string]any{"timers": []any{map[string]any{"every": "1m"}}}, "no name"},
		{map[string]any{"timers": []any{map[string]any{"name": "a", "every": "soon"}}}, `every = "soon"`},
		{map[string]any{"timers": []any{map[string]any{"name": "a", "every": "1m", "offset": "2m"}}}, "offset"},
		{map[string]any{"timers": []any{map[string]any{"name": "a", "every": "1m"}, map[string]any{"name": "a", "every": "1h"}}}, "two timers"},
		{map[string]any{"forward": []any{1}}, "not a subject"},
	} {
		if _, err := newSource(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want %q", c.cfg, err, c.want)
		}
	}
}
