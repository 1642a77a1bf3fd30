package agent

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host/wasm"
	"github.com/kairo-os/kairo/internal/llm"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
)

// logOf reads the whole log of e's store.
func (e *env) logOf() []abi.Event {
	e.t.Helper()
	var evs []abi.Event
	err := e.bus.Replay(context.Background(), bus.Query{}, func(ev *abi.Event) error {
		c := *ev
		c.Data = append([]byte(nil), ev.Data...)
		evs = append(evs, c)
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// logAfter reads the log once the tick that ended a run loop is recorded.
func (e *env) logAfter(ended *abi.Event) []abi.Event {
	e.events.until(e.t, "the last tick's record", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectAgentTick && ev.Seq > ended.Seq
	})
	return e.logOf()
}

func replaySetup(evs []abi.Event, loop, policy string) ReplaySetup {
	return ReplaySetup{Events: evs, RunLoop: loop, Policy: policy, Tools: kernelTools, Logger: quiet}
}

// replayOf replays s as host.Daemon.Replay does: the policy, loaded from
// folders (the built-in one when none), alone in a kernel of its own.
func replayOf(s ReplaySetup, folders ...wasm.Folder) (*abi.AgentReplayReport, error) {
	r, err := NewReplay(s)
	if err != nil {
		return nil, err
	}
	if folders == nil {
		folders = []wasm.Folder{{Path: pluginDir, Builtin: true}}
	}
	b := bus.New(bus.NewMemoryStore(4096), bus.Config{})
	defer b.Close()
	k := kernel.New(b, kernel.Config{Logger: quiet})
	defer k.Close()
	llm.Register(k, r.Answers())
	for _, ev := range r.Grants() {
		if _, err := b.Publish(context.Background(), &ev); err != nil {
			return nil, err
		}
	}
	m := wasm.NewManager(wasm.ManagerConfig{Engine: wasmEngine, Kernel: k, Folders: folders, Only: []string{s.Policy}, Logger: quiet})
	if err := m.Start(); err != nil {
		return nil, err
	}
	defer m.Stop()
	return r.Run(context.Background(), m)
}

// rewrite changes the data of the events match accepts.
func rewrite[T any](t *testing.T, evs []abi.Event, match func(*abi.Event) bool, change func(*T)) int {
	t.Helper()
	n := 0
	for i := range evs {
		if !match(&evs[i]) {
			continue
		}
		var v T
		if err := msgpack.Unmarshal(evs[i].Data, &v); err != nil {
			t.Fatal(err)
		}
		change(&v)
		raw, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		evs[i].Data = raw
		n++
	}
	return n
}

// A run loop of the LLM policy — a tool call, a process, a closing say —
// replays against its recorded answers with the model's server gone, and
// decides as it did; a recording whose answer says otherwise makes the
// replay name the tick and both decisions.
func TestReplayLLM(t *testing.T) {
	model := &openAI{answers: []map[string]any{
		{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{
			"id": "call_1", "type": "function",
			"function": map[string]any{"name": "process_spawn", "arguments": `{"command":"echo tests ok"}`},
		}}},
		content(`{"thought": "the process exited 0", "action": {"type": "say", "text": "The tests passed.", "done": true}}`),
	}}
	e := newEnv(t)
	srv, _ := e.model(model, 1)
	e.start(Config{Policy: e.policy("llm")})
	e.say("run the tests please", "")
	ended := e.events.until(t, "intent.ended", typed(abi.SubjectIntentEnded))
	loop := ended.CorrelationID
	srv.Close() // the replay asks no model

	evs := e.logAfter(ended)
	rep, err := replayOf(replaySetup(evs, loop[len(loop)-8:], "llm"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Divergence != nil {
		t.Fatalf("the replay diverged: %+v\n%s", rep.Divergence, e.events.dump())
	}
	if rep.RunLoop != loop || rep.Answers != 2 || rep.Actions != 2 || rep.Thoughts != 1 || rep.Decisions < 3 || rep.Goal != "run the tests please" {
		t.Fatalf("report = %+v; want run loop %s, 2 answers, 2 actions, 1 thought, 3 or more decisions", rep, loop)
	}

	// The same run, had the model answered otherwise.
	if n := rewrite(t, evs, typed(abi.SubjectLLMResponse), func(r *abi.LLMResponse) {
		r.Result.Message.Content = strings.Replace(r.Result.Message.Content, "The tests passed.", "The tests failed.", 1)
	}); n != 2 {
		t.Fatalf("%d responses", n)
	}
	rep, err = replayOf(replaySetup(evs, loop, "llm"))
	if err != nil {
		t.Fatal(err)
	}
	if d := rep.Divergence; d == nil || !strings.Contains(d.What, `"The tests failed."`) || !strings.Contains(d.What, `"The tests passed."`) || d.Tick == 0 {
		t.Fatalf("divergence = %+v; want the say that changed, at its tick", d)
	}
}

// A barge-in run of the rule policy replays as it ran; a log whose message
// asked for something else diverges at the first decision. Bad ids are
// errors that say what to do.
func TestReplayRules(t *testing.T) {
	e := newEnv(t)
	e.start(Config{Policy: e.rules()})
	e.say("run sleep 0.5", "")
	started := e.events.until(t, "intent.started", typed(abi.SubjectIntentStarted))
	loop := started.CorrelationID
	e.events.until(t, "the process", typed("kairo.process.spawned"))
	e.say("how far along is it?", "")
	evs := e.logAfter(e.events.until(t, "intent.ended", typed(abi.SubjectIntentEnded)))

	rep, err := replayOf(replaySetup(evs, loop, "rules"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Divergence != nil || rep.Actions < 3 || rep.Answers != 0 {
		t.Fatalf("report = %+v; want no divergence, 3 or more actions", rep)
	}

	rewrite(t, evs, typed(abi.AgentMessageSubject("default")), func(m *abi.UserMessage) {
		if m.Text == "run sleep 0.5" {
			m.Text = "run sleep 9"
		}
	})
	rep, err = replayOf(replaySetup(evs, loop, "rules"))
	if err != nil {
		t.Fatal(err)
	}
	if d := rep.Divergence; d == nil || d.Decision != 1 || !strings.Contains(d.What, "sleep 9") {
		t.Fatalf("divergence = %+v; want decision 1, naming the changed command", d)
	}

	for _, c := range []struct{ id, want string }{
		{"nosuchloop", "no run loop"},
		{"", "no run loop"},
	} {
		if _, err := replayOf(replaySetup(evs, c.id, "rules")); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Replay(%q) = %v; want %q", c.id, err, c.want)
		}
	}
	if _, err := replayOf(replaySetup(evs, loop, "nosuchpolicy")); err == nil || !strings.Contains(err.Error(), "kairo plugins") {
		t.Errorf("an unknown policy: %v", err)
	}
}

// A drop-in policy runs with what the operator granted it (kairo plugins
// grant), which the log records: the replay grants it the same, as of
// the run loop's last decision. Without the grant in the log (the
// control), the replayed policy cannot reach the model and the replay
// does not decide as the run did.
func TestReplayFoldsGrants(t *testing.T) {
	model := &openAI{answers: []map[string]any{
		content(`{"thought": "nothing to run", "action": {"type": "say", "text": "Hello.", "done": true}}`),
	}}
	e := newEnv(t)
	srv, _ := e.model(model, 1)
	grant, err := msgpack.Marshal(abi.PluginGrant{Plugin: "llm", Call: []string{abi.MethodLLMChat}, By: "operator/0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.bus.Publish(context.Background(), &abi.Event{Type: "kairo.plugin.granted", Source: abi.PrincipalHost, Data: grant}); err != nil {
		t.Fatal(err)
	}
	e.start(Config{Policy: e.policy("llm")})
	e.say("say hello", "")
	ended := e.events.until(t, "intent.ended", typed(abi.SubjectIntentEnded))
	srv.Close()
	evs := e.logAfter(ended)

	dropIn := func(evs []abi.Event) ReplaySetup {
		return replaySetup(evs, ended.CorrelationID, "llm")
	}
	began := time.Now()
	rep, err := replayOf(dropIn(evs), wasm.Folder{Path: pluginDir})
	if err != nil || rep.Divergence != nil {
		t.Fatalf("the replay of a granted drop-in: %v, %+v", err, rep)
	}
	t.Logf("the granted replay took %v", time.Since(began).Round(time.Millisecond))
	var ungranted []abi.Event
	for _, ev := range evs {
		if ev.Type != "kairo.plugin.granted" {
			ungranted = append(ungranted, ev)
		}
	}
	// Without the grant the policy never makes the call its recorded answer
	// is for, and the replay waits replayWait for it. The granted replay
	// above, its manager's start included, takes 0.1-0.15 s under -race; a
	// second is still many times that, so a replay that granted the call
	// anyway would make it and not diverge (the defect this control
	// catches: checked by replaying the granted log here), and the test no
	// longer waits out the ten seconds a replay gives a slow policy.
	defer func(d time.Duration) { replayWait = d }(replayWait)
	replayWait = time.Second
	began = time.Now()
	rep, err = replayOf(dropIn(ungranted), wasm.Folder{Path: pluginDir})
	if err == nil && rep.Divergence == nil {
		t.Fatalf("a drop-in with no grant in the log replayed as the run: %+v", rep)
	}
	t.Logf("the ungranted replay took %v: %v", time.Since(began).Round(time.Millisecond), err)
}

// A message wakes the tick that answers it, long before the schedule's
// next one: the early tick is recorded like any other and replays as it ran.
func TestMessageWakesTheTick(t *testing.T) {
	e := newEnv(t)
	var woken []Tick
	var mu sync.Mutex
	r, err := New(Config{Kernel: e.kernel, Policy: e.rules(), Hz: 0.01, Logger: quiet}) // a tick every 100 s
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	r.OnTick = func(tk Tick, decided bool) {
		if tk.N == 0 {
			close(first)
		}
		if decided {
			mu.Lock()
			woken = append(woken, tk)
			mu.Unlock()
		}
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	<-first // tick 0 runs at the start; the message comes after it
	e.say("help", "")
	said := e.events.until(t, "the answer", sayIn("", "run <command line>"))
	evs := e.logAfter(e.events.until(t, "intent.ended", typed(abi.SubjectIntentEnded)))
	mu.Lock()
	if len(woken) != 1 || woken[0].N != 1 || !woken[0].Early {
		t.Fatalf("ticks that decided: %+v; want tick 1, early", woken)
	}
	mu.Unlock()
	rep, err := replayOf(replaySetup(evs, said.CorrelationID, "rules"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Divergence != nil || rep.Actions != 1 || rep.FirstTick != 1 {
		t.Fatalf("report = %+v; want tick 1's one action, as it ran", rep)
	}
}
