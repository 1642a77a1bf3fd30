package telemetry

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/vmihailenco/msgpack/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
)

// history writes the events of run loops as the agent, the kernel and the
// LLM provider publish them, onto a real bus.
type history struct {
	t   testing.TB
	b   *bus.Bus
	now time.Time
	n   int
}

func newHistory(t testing.TB, b *bus.Bus) *history {
	return &history{t: t, b: b, now: time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)}
}

// pub publishes an event and returns it as stored.
func (h *history) pub(subject, source, corr, cause string, data any) *abi.Event {
	h.t.Helper()
	raw, err := msgpack.Marshal(data)
	if err != nil {
		h.t.Fatal(err)
	}
	h.n++
	h.now = h.now.Add(10 * time.Millisecond)
	ev := &abi.Event{ID: fmt.Sprintf("01a224e2-ce6a-7b26-89db-%012d", h.n), Type: subject, Source: source, Time: h.now,
		CorrelationID: corr, CausationID: cause, Data: raw}
	if _, err := h.b.Publish(context.Background(), ev); err != nil {
		h.t.Fatal(err)
	}
	return ev
}

// loop writes one run loop of agent: a model call, a tool call whose
// process exits with code, and the end. It returns the run loop's id.
func (h *history) loop(agent, id string, tick uint64, code int, ask *abi.Ask) string {
	src := "agent/" + agent
	msg := h.pub("kairo.agent."+agent+".message", src, "", "", abi.UserMessage{Text: "run false"})
	// The policy asks the model before the run loop exists, naming none;
	// the tick whose batch carries the answer starts the run loop.
	req := h.pub(abi.SubjectLLMRequest, llmSource, "", msg.ID, abi.LLMRequest{Model: "gpt-test", Endpoint: "http://127.0.0.1:9/v1"})
	h.pub(abi.SubjectLLMResponse, llmSource, "", req.ID, abi.LLMResponse{Attempts: 1, Result: &abi.ChatResult{
		Model: "gpt-test-1", FinishReason: "tool_calls", Usage: abi.ChatUsage{PromptTokens: 120, CompletionTokens: 7}}})
	at := h.now
	h.pub(abi.SubjectIntentStarted, src, id, msg.ID, abi.IntentStarted{RunLoopID: id, Agent: agent, Goal: "run false", Ask: ask})
	act := h.pub(abi.SubjectAgentAction, src, id, msg.ID, abi.ActionEvent{Type: "tool_call", Tick: tick,
		ActionData: abi.ActionData{Tool: "process.spawn", Args: `{"command":"false"}`}})
	h.pub(abi.SubjectToolInvoke, src, id, act.ID, abi.ToolInvoke{ActionID: act.ID, Tool: "process.spawn"})
	h.pub(abi.SubjectAgentTick, src, "", "", abi.TickRecord{Tick: tick, At: at, Hz: 10, Results: 1})
	h.pub(abi.SubjectProcessSpawned, procSource, id, act.ID, abi.ProcessSpawned{ProcessID: "p1", PID: 42, Argv: []string{"/bin/sh", "-c", "false"}})
	h.pub(abi.SubjectToolResult, src, id, act.ID, abi.ToolResultEvent{ActionID: act.ID, Tool: "process.spawn", Status: abi.StatusDone, ProcessID: "p1"})
	h.pub(abi.SubjectProcessExited, procSource, id, act.ID, abi.ProcessExitedEvent{ProcessID: "p1", PID: 42, Status: "exited", ExitCode: &code})
	at2 := h.now
	h.pub(abi.SubjectAgentAction, src, id, "", abi.ActionEvent{Type: "say", Tick: tick + 1, ActionData: abi.ActionData{Text: "done", Done: true}})
	h.pub(abi.SubjectIntentEnded, src, id, "", abi.IntentEnded{RunLoopID: id, Status: abi.StatusDone})
	h.pub(abi.SubjectAgentTick, src, "", "", abi.TickRecord{Tick: tick + 1, At: at2, Hz: 10})
	return id
}

func memBus(t testing.TB) *bus.Bus {
	b := bus.New(bus.NewMemoryStore(1<<16), bus.Config{})
	t.Cleanup(func() { b.Close() })
	return b
}

// build reads the whole log into spans.
func build(t testing.TB, b *bus.Bus, bld *Builder) []Span {
	var out []Span
	if err := b.Replay(context.Background(), bus.Query{}, func(ev *abi.Event) error {
		out = bld.Add(ev, out)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func byName(spans []Span) map[string]Span {
	m := map[string]Span{}
	for _, s := range spans {
		m[s.Name] = s
	}
	return m
}

func attr(s Span, key string) (attribute.Value, bool) {
	for _, kv := range s.Attrs {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// A run loop is a trace whose spans nest as the events chain: the run loop,
// its iteration, the decision with its model call, the tool call with its
// process; each carries the seqs of its events and the GenAI attributes.
func TestRunLoopTrace(t *testing.T) {
	b := memBus(t)
	h := newHistory(t, b)
	id := h.loop("default", "01a224e2-ce6a-7b26-89db-501602c5c531", 15, 1, nil)
	spans := build(t, b, NewBuilder("", nil))
	got := byName(spans)
	want := map[string]string{ // span → its parent's name
		"invoke_agent default":       "",
		"iteration 1":                "invoke_agent default",
		"iteration 2":                "invoke_agent default",
		"chat gpt-test":              "decide",
		"execute_tool process.spawn": "iteration 1",
		"process sh":                 "execute_tool process.spawn",
	}
	if len(spans) != len(want)+2 { // and two decisions
		t.Errorf("%d spans, want %d: %v", len(spans), len(want)+2, spanNames(spans))
	}
	tid := traceID(id)
	if tid.String() != "01a224e2ce6a7b2689db501602c5c531" {
		t.Errorf("trace id %s is not the run loop's id", tid)
	}
	for name, parent := range want {
		s, ok := got[name]
		if !ok {
			t.Errorf("no span %q among %v", name, spanNames(spans))
			continue
		}
		if s.Trace != tid {
			t.Errorf("%s: trace %s, want %s", name, s.Trace, tid)
		}
		if parent == "" {
			if s.Parent.IsValid() {
				t.Errorf("%s has a parent", name)
			}
			continue
		}
		if p := got[parent]; s.Parent != p.ID && !(name == "chat gpt-test" && isDecide(spans, s.Parent)) {
			t.Errorf("%s: parent %s, want %s's %s", name, s.Parent, parent, p.ID)
		}
		if s.End.Before(s.Start) {
			t.Errorf("%s ends before it starts", name)
		}
	}
	decides := 0
	for _, s := range spans {
		if s.Name == "decide" {
			decides++
			if s.Parent != got["iteration 1"].ID && s.Parent != got["iteration 2"].ID {
				t.Errorf("a decision's parent %s is no iteration", s.Parent)
			}
		}
	}
	if decides != 2 {
		t.Errorf("%d decisions, want 2", decides)
	}
	chat := got["chat gpt-test"]
	for key, want := range map[string]any{"gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-test",
		"gen_ai.response.model": "gpt-test-1", "gen_ai.usage.input_tokens": int64(120), "gen_ai.usage.output_tokens": int64(7), "server.address": "127.0.0.1:9"} {
		if v, ok := attr(chat, key); !ok || v.AsInterface() != want {
			t.Errorf("chat %s = %v, want %v", key, v.AsInterface(), want)
		}
	}
	proc := got["process sh"]
	if v, _ := attr(proc, "process.exit.code"); v.AsInt64() != 1 || proc.Status != codes.Error {
		t.Errorf("process: exit code %v, status %v; want 1 and an error", v.AsInterface(), proc.Status)
	}
	if v, _ := attr(got["execute_tool process.spawn"], "gen_ai.tool.name"); v.AsString() != "process.spawn" {
		t.Errorf("tool name %q", v.AsString())
	}
	root := got["invoke_agent default"]
	if v, _ := attr(root, "kairo.run_loop.status"); v.AsString() != abi.StatusDone {
		t.Errorf("root status %q", v.AsString())
	}
	if s, _ := attr(root, "kairo.seq"); s.AsInt64() == 0 {
		t.Error("the root holds no seq")
	}
}

// Each run loop's trace holds the model call its decision answered, and
// only that one: the calls name no run loop, and are the tick's that
// carried their answers.
func TestModelCallsOfTheirDecision(t *testing.T) {
	b := memBus(t)
	h := newHistory(t, b)
	ids := []string{h.loop("default", "01a224e2-ce6a-7b26-89db-000000000011", 3, 0, nil),
		h.loop("default", "01a224e2-ce6a-7b26-89db-000000000012", 7, 0, nil)}
	chats := map[string][]string{}
	for _, s := range build(t, b, NewBuilder("", nil)) {
		if s.Name == "chat gpt-test" {
			chats[s.Trace.String()] = append(chats[s.Trace.String()], s.ID.String())
		}
	}
	for _, id := range ids {
		if n := len(chats[traceID(id).String()]); n != 1 {
			t.Errorf("run loop %s's trace has %d model calls, want 1", id, n)
		}
	}
}

// Two agents' policies call the model at once, and the answers come back
// in the other order: each call is shown under its own agent's decision,
// by the message that caused it, not by which answer came first.
func TestModelCallsOfTheirAgent(t *testing.T) {
	b := memBus(t)
	h := newHistory(t, b)
	msg := map[string]*abi.Event{}
	req := map[string]*abi.Event{}
	for _, a := range []string{"a", "b"} {
		msg[a] = h.pub("kairo.agent."+a+".message", "agent/"+a, "", "", abi.UserMessage{Text: "hi"})
	}
	for _, a := range []string{"a", "b"} {
		req[a] = h.pub(abi.SubjectLLMRequest, llmSource, "", msg[a].ID, abi.LLMRequest{Model: "m-" + a})
	}
	for _, a := range []string{"b", "a"} { // b's answer first
		h.pub(abi.SubjectLLMResponse, llmSource, "", req[a].ID, abi.LLMResponse{Result: &abi.ChatResult{}})
	}
	loops := map[string]string{"a": "01a224e2-ce6a-7b26-89db-00000000000a", "b": "01a224e2-ce6a-7b26-89db-00000000000b"}
	for _, a := range []string{"a", "b"} { // a's tick first
		src, id := "agent/"+a, loops[a]
		at := h.now
		h.pub(abi.SubjectIntentStarted, src, id, msg[a].ID, abi.IntentStarted{RunLoopID: id, Agent: a, Goal: "hi"})
		h.pub(abi.SubjectAgentAction, src, id, msg[a].ID, abi.ActionEvent{Type: "say", Tick: 5, ActionData: abi.ActionData{Text: "hello", Done: true}})
		h.pub(abi.SubjectIntentEnded, src, id, "", abi.IntentEnded{RunLoopID: id, Status: abi.StatusDone})
		h.pub(abi.SubjectAgentTick, src, "", "", abi.TickRecord{Tick: 5, At: at, Hz: 10, Results: 1})
	}
	got := map[string]string{} // trace → the chat span's name
	for _, s := range build(t, b, NewBuilder("", nil)) {
		if strings.HasPrefix(s.Name, "chat ") {
			if prev, dup := got[s.Trace.String()]; dup {
				t.Errorf("trace %s has two model calls: %s and %s", s.Trace, prev, s.Name)
			}
			got[s.Trace.String()] = s.Name
		}
	}
	for _, a := range []string{"a", "b"} {
		if name := got[traceID(loops[a]).String()]; name != "chat m-"+a {
			t.Errorf("agent %s's run loop holds %q, want its own call chat m-%s", a, name, a)
		}
	}
}

// Only what each subject's writer publishes makes a span: a run loop, a
// process or a model call published under another source (a plugin
// granted the subject, say) is passed by, as is another host's run loop.
// The control is the same run loop from its writers.
func TestForgedEventsMakeNoSpans(t *testing.T) {
	b := memBus(t)
	h := newHistory(t, b)
	real := h.loop("default", "01a224e2-ce6a-7b26-89db-000000000001", 3, 0, nil)
	// A plugin writes a whole run loop in the agent's words.
	forged := "01a224e2-ce6a-7b26-89db-000000000002"
	h.pub(abi.SubjectIntentStarted, "plugin/evil", forged, "", abi.IntentStarted{RunLoopID: forged, Agent: "default", Goal: "x"})
	h.pub(abi.SubjectIntentEnded, "plugin/evil", forged, "", abi.IntentEnded{RunLoopID: forged, Status: abi.StatusDone})
	// It names an agent it is not.
	h.pub(abi.SubjectIntentStarted, "agent/default", forged, "", abi.IntentStarted{RunLoopID: forged, Agent: "ops", Goal: "x"})
	// A process and a model call in the real run loop's name, by others.
	code := 0
	h.pub(abi.SubjectProcessSpawned, "plugin/evil", real, "", abi.ProcessSpawned{ProcessID: "p9", Argv: []string{"x"}})
	h.pub(abi.SubjectProcessExited, "plugin/evil", real, "", abi.ProcessExitedEvent{ProcessID: "p9", ExitCode: &code})
	spans := build(t, b, NewBuilder("", nil))
	for _, s := range spans {
		if s.Trace != traceID(real) {
			t.Errorf("a span of trace %s (%s), not the real run loop's", s.Trace, s.Name)
		}
		if s.Name == "process x" {
			t.Error("a forged process made a span")
		}
	}
	if len(spans) != 8 {
		t.Errorf("%d spans of the real run loop, want 8: %v", len(spans), spanNames(spans))
	}
	// The same log read by another host's builder: none of it is its own.
	if spans := build(t, b, NewBuilder("h2", nil)); len(spans) != 0 {
		t.Errorf("host h2 made %d spans of a log it did not write", len(spans))
	}
}

// The run loops open at once are bounded: past the bound a new one makes
// no span, and is counted; the ones within it still do.
func TestBuilderBound(t *testing.T) {
	bld := NewBuilder("", nil)
	var out []Span
	for i := range maxLoops + 10 {
		raw, _ := msgpack.Marshal(abi.IntentStarted{RunLoopID: fmt.Sprint(i), Agent: "a"})
		out = bld.Add(&abi.Event{Type: abi.SubjectIntentStarted, Source: "agent/a", CorrelationID: fmt.Sprint(i), Seq: uint64(i + 1), Data: raw}, out)
	}
	if bld.Dropped() != 10 {
		t.Errorf("dropped %d, want 10", bld.Dropped())
	}
	raw, _ := msgpack.Marshal(abi.IntentEnded{RunLoopID: "0", Status: abi.StatusDone})
	out = bld.Add(&abi.Event{Type: abi.SubjectIntentEnded, Source: "agent/a", CorrelationID: "0", Data: raw}, out)
	if len(out) != 1 || out[0].Name != "invoke_agent a" {
		t.Errorf("the first run loop's end made %v", spanNames(out))
	}
	if n := bld.Forget(); n != maxLoops-1 {
		t.Errorf("forgot %d, want %d", n, maxLoops-1)
	}
}

func isDecide(spans []Span, id [8]byte) bool {
	for _, s := range spans {
		if s.ID == id {
			return s.Name == "decide"
		}
	}
	return false
}

func spanNames(spans []Span) []string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name)
	}
	return n
}
