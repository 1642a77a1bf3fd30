package timer

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// SubjectTimerFired is published each time a timer fires.
const SubjectTimerFired = "kairo.timer.fired"

// TimerFired is its data.
type TimerFired struct {
	Name string    `msgpack:"name"`
	Due  time.Time `msgpack:"due"`
}

// timer is one entry of the config's timers.
type timer struct {
	name   string
	every  time.Duration
	offset time.Duration
	say    string // a user message to send the agent when it fires
	agent  string
	last   time.Time // the last due time fired
}

// source is the plugin's state.
type source struct {
	timers  []*timer
	forward []string // subjects turned into observations
	armed   bool
	waiting int64 // the token of the clock.wait out
}

// newSource reads the config:
//
//	forward = ["kairo.plugin.stopped", "kairo.plugin.refused"]
//	[[timers]]
//	name = "backup"; every = "24h"; offset = "3h"; say = "run ./backup.sh"
func newSource(cfg map[string]any) (*source, error) {
	s := &source{forward: []string{abi.SubjectPluginStopped, abi.SubjectPluginRefused}}
	if v, ok := cfg["forward"]; ok {
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("timer: config forward must be a list of subjects, not %T", v)
		}
		s.forward = nil
		for _, e := range list {
			subj, ok := e.(string)
			if !ok || subj == "" {
				return nil, fmt.Errorf("timer: config forward holds %v, which is not a subject", e)
			}
			s.forward = append(s.forward, subj)
		}
	}
	if v, ok := cfg["timers"]; ok {
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("timer: config timers must be a list of tables ([[timers]]), not %T", v)
		}
		for i, e := range list {
			t, err := readTimer(i, e)
			if err != nil {
				return nil, err
			}
			if slices.ContainsFunc(s.timers, func(o *timer) bool { return o.name == t.name }) {
				return nil, fmt.Errorf("timer: two timers are named %q; give each its own name", t.name)
			}
			s.timers = append(s.timers, t)
		}
	}
	return s, nil
}

func readTimer(i int, e any) (*timer, error) {
	m, ok := e.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("timer: timers[%d] must be a table, not %T", i, e)
	}
	str := func(k string) string { v, _ := m[k].(string); return v }
	t := &timer{name: str("name"), say: str("say"), agent: str("agent")}
	if t.name == "" {
		return nil, fmt.Errorf("timer: timers[%d] has no name", i)
	}
	var err error
	if t.every, err = time.ParseDuration(str("every")); err != nil || t.every < time.Second {
		return nil, fmt.Errorf("timer: timer %q: every = %q: want a period of 1s or more, such as \"90s\", \"15m\" or \"24h\"", t.name, str("every"))
	}
	if o := str("offset"); o != "" {
		if t.offset, err = time.ParseDuration(o); err != nil || t.offset < 0 || t.offset >= t.every {
			return nil, fmt.Errorf("timer: timer %q: offset = %q: want a duration from 0 up to its period %v", t.name, o, t.every)
		}
	}
	return t, nil
}

// subscriptions are the plugin's: its own start, which arms the timers, and
// what it forwards.
func (s *source) subscriptions() []string {
	return append([]string{abi.SubjectPluginStarted}, s.forward...)
}

// next is the first due time of t after now.
func (t *timer) next(now time.Time) time.Time {
	base := now.Add(-t.offset).Truncate(t.every)
	return base.Add(t.every + t.offset)
}

// output is what a batch makes the plugin do.
type output struct {
	events []abi.Event
	wait   time.Time // ask clock.wait for this time; zero: no new wait
}

func (s *source) handle(b *abi.Batch) output {
	var out output
	now := b.Time
	for i := range b.Events {
		ev := &b.Events[i]
		if ev.Type == abi.SubjectPluginStarted {
			var st abi.PluginState
			if msgpack.Unmarshal(ev.Data, &st) == nil && st.Plugin == "timer" && !s.armed {
				s.armed = true
				for _, t := range s.timers {
					t.last = t.next(now).Add(-t.every) // due before the start: not made up
				}
				out.wait = s.nextDue()
			}
			if !slices.Contains(s.forward, ev.Type) {
				continue
			}
		}
		out.events = append(out.events, abi.Event{Type: abi.SubjectObservation, CausationID: ev.ID,
			Data: encode(abi.Observation{Kind: "system_event", Name: ev.Type, Text: describe(ev)})})
	}
	for _, r := range b.CallResults {
		if r.Token != s.waiting || !s.armed {
			continue
		}
		out.events = append(out.events, s.fire(now)...)
		out.wait = s.nextDue()
	}
	return out
}

// fire fires every timer due by now, once per due time.
func (s *source) fire(now time.Time) []abi.Event {
	var evs []abi.Event
	for _, t := range s.timers {
		due := t.next(now).Add(-t.every)
		if !due.After(t.last) {
			continue
		}
		t.last = due
		evs = append(evs, abi.Event{Type: SubjectTimerFired, Data: encode(TimerFired{Name: t.name, Due: due})})
		if t.say != "" {
			id := fmt.Sprintf("timer:%s:%d", t.name, due.Unix())
			evs = append(evs, abi.Event{Type: abi.SubjectUserMessage,
				Data: encode(abi.UserMessage{Text: t.say, MessageID: id, Agent: t.agent})})
		}
	}
	return evs
}

// nextDue is the earliest time a timer is due; zero without timers.
func (s *source) nextDue() time.Time {
	var at time.Time
	for _, t := range s.timers {
		if n := t.last.Add(t.every); at.IsZero() || n.Before(at) {
			at = n
		}
	}
	return at
}

// describe renders a system event as a line for the agent.
func describe(ev *abi.Event) string {
	var m map[string]any
	if msgpack.Unmarshal(ev.Data, &m) != nil {
		return ev.Type
	}
	if p, ok := m["plugin"].(string); ok {
		what := strings.TrimPrefix(ev.Type, "kairo.plugin.")
		if r, _ := m["reason"].(string); r != "" {
			return fmt.Sprintf("plugin %s %s: %s", p, what, r)
		}
		return fmt.Sprintf("plugin %s %s", p, what)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := []string{ev.Type}
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(parts, " ")
}
