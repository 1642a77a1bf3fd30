package llm

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/abi"
)

func TestReplay(t *testing.T) {
	d, e, answers := recordRun(t)
	sent := e.requests()
	evs, err := Recorded(context.Background(), d.b, "run-7")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4 {
		t.Fatalf("Recorded gave %d events, want 4", len(evs))
	}
	replay, err := NewReplay(evs)
	if err != nil {
		t.Fatal(err)
	}
	Register(d.k, replay)

	// The same run loop asks the same: the same answers, marked, and the
	// endpoint hears nothing. The key in the messages is redacted in the
	// recording; the replay, which does not know it, still matches.
	for i, first := range []bool{true, false} {
		res, aerr := d.chat(t, runLoop(first))
		if aerr != nil {
			t.Fatalf("request %d: %v", i+1, aerr)
		}
		want := answers[i]
		want.Replayed = true
		if i == 1 {
			want.Message.Content = strings.ReplaceAll(want.Message.Content, testKey, Redacted)
		}
		if !reflect.DeepEqual(res, want) {
			t.Errorf("request %d: replayed %+v\nwant %+v", i+1, res, want)
		}
	}
	if n := e.requests(); n != sent {
		t.Errorf("the replay sent %d requests to the endpoint", n-sent)
	}
	// One more than the run made is a divergence.
	_, aerr := d.chat(t, runLoop(false))
	if aerr == nil || aerr.Code != abi.CodeReplayDiverged {
		t.Fatalf("a third request: %v, want %s", aerr, abi.CodeReplayDiverged)
	}
	contains(t, "error", aerr.Message, `run loop "run-7" diverged at LLM request 3`, "the recording holds only 2 requests")
}

func TestReplayDivergence(t *testing.T) {
	d, e, _ := recordRun(t)
	sent := e.requests()
	evs, err := Recorded(context.Background(), d.b, "run-7")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(p *abi.ChatParams)
		wants  []string
	}{
		{"a message's content", func(p *abi.ChatParams) { p.Messages[3].Content = "rainy, 9°C" },
			[]string{"LLM request 2", `messages[3] (tool): content differs from byte 0: "rainy, 9°C", recorded "sunny, 21°C"`}},
		{"a tool call's arguments", func(p *abi.ChatParams) { p.Messages[2].ToolCalls[0].Arguments = `{"city":"Lyon"}` },
			[]string{`messages[2] (assistant): toolCalls[0]: arguments differs from byte 9: "{\"city\":\"Lyon\"}", recorded "{\"city\":\"Paris\"}"`}},
		{"a message more", func(p *abi.ChatParams) {
			p.Messages = append(p.Messages, abi.ChatMessage{Role: abi.RoleUser, Content: "and Oslo?"})
		}, []string{"the run sends 5 messages, the recording 4"}},
		{"a tool's schema", func(p *abi.ChatParams) {
			p.Tools = []abi.Tool{{Name: "weather", Description: weatherTool.Description, Parameters: map[string]any{"type": "object"}}}
		}, []string{"tools[0] (weather): parameters differs"}},
		{"a tool more", func(p *abi.ChatParams) { p.Tools = append(p.Tools, abi.Tool{Name: "now"}) },
			[]string{"the run offers 2 tools [weather now], the recording 1 [weather]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replay, err := NewReplay(evs)
			if err != nil {
				t.Fatal(err)
			}
			Register(d.k, replay)
			if _, aerr := d.chat(t, runLoop(true)); aerr != nil {
				t.Fatal(aerr)
			}
			p := runLoop(false)
			tc.change(&p)
			_, aerr := d.chat(t, p)
			if aerr == nil || aerr.Code != abi.CodeReplayDiverged {
				t.Fatalf("llm.chat = %v, want %s", aerr, abi.CodeReplayDiverged)
			}
			contains(t, "error", aerr.Message, tc.wants...)
		})
	}
	if n := e.requests(); n != sent {
		t.Errorf("the replays sent %d requests to the endpoint", n-sent)
	}
}

// A recorded failure replays as the same failure; a request whose response
// was never recorded (the daemon died waiting) is said to be so.
func TestReplayErrorsAndInterruptions(t *testing.T) {
	e := newEndpoint(t, respond(404, apiError("model gone", "invalid_request_error")))
	d := newDaemon(t)
	p, _ := testProvider(t, e, Config{Bus: d.b})
	params := conversation("hi")
	params.CorrelationID = "run-3"
	_, live := p.Chat(context.Background(), params)
	evs, err := Recorded(context.Background(), d.b, "run-3")
	if err != nil {
		t.Fatal(err)
	}
	replay, err := NewReplay(evs)
	if err != nil {
		t.Fatal(err)
	}
	_, replayed := replay.Chat(context.Background(), params)
	if want := ToABIError(live); !reflect.DeepEqual(ToABIError(replayed), want) {
		t.Errorf("replayed error %v, want the recorded %v", replayed, want)
	}

	replay, err = NewReplay(evs[:1]) // the request alone
	if err != nil {
		t.Fatal(err)
	}
	_, err = replay.Chat(context.Background(), params)
	contains(t, "error", errString(err), "request 1 of run loop \"run-3\"", "has no recorded response: the run was interrupted")
	if _, err := NewReplay(evs[1:]); err == nil || !strings.Contains(err.Error(), "which the events do not hold") {
		t.Errorf("NewReplay of a response without its request: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// A Replay holds run loops by id; a run replayed under a new id finds the
// recording when there is only one.
func TestReplayRunLoops(t *testing.T) {
	at := func(run, content string, seq uint64) []abi.Event {
		req := must(abi.LLMRequest{Params: abi.ChatParams{Messages: []abi.ChatMessage{{Role: "user", Content: "q"}}}})
		res := must(abi.LLMResponse{Result: &abi.ChatResult{Message: abi.ChatMessage{Role: "assistant", Content: content}}})
		id := run + "-req"
		return []abi.Event{
			{ID: id, Type: abi.SubjectLLMRequest, CorrelationID: run, Data: req, Seq: seq},
			{ID: run + "-res", Type: abi.SubjectLLMResponse, CorrelationID: run, CausationID: id, Data: res, Seq: seq + 1},
			{ID: run + "-other", Type: abi.SubjectAgentThought, CorrelationID: run, Seq: seq + 2},
		}
	}
	ask := func(r *Replay, run string) (string, error) {
		res, err := r.Chat(context.Background(), abi.ChatParams{Messages: []abi.ChatMessage{{Role: "user", Content: "q"}}, CorrelationID: run})
		return res.Message.Content, err
	}
	// Given out of order: the store's sequence numbers put them right.
	evs := append(at("run-b", "b", 10), at("run-a", "a", 1)...)
	r, err := NewReplay(evs)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ask(r, "run-b"); got != "b" || err != nil {
		t.Errorf("run-b: %q, %v", got, err)
	}
	if got, err := ask(r, "run-a"); got != "a" || err != nil {
		t.Errorf("run-a: %q, %v", got, err)
	}
	var ae *abi.Error
	if _, err := ask(r, "run-c"); !errors.As(err, &ae) || ae.Code != abi.CodeNotFound || !strings.Contains(ae.Message, `["run-a" "run-b"]`) {
		t.Errorf("run-c: %v, want not_found naming the runs held", err)
	}
	r, _ = NewReplay(at("run-a", "a", 1))
	if got, err := ask(r, "run-a-again"); got != "a" || err != nil {
		t.Errorf("a new id with one run loop recorded: %q, %v", got, err)
	}
}

func TestMux(t *testing.T) {
	e := newEndpoint(t, completion(`{"role":"assistant","content":"live"}`, "stop"))
	live, _ := testProvider(t, e, Config{})
	req := must(abi.LLMRequest{Params: conversation("hi")})
	res := must(abi.LLMResponse{Result: &abi.ChatResult{Message: abi.ChatMessage{Role: "assistant", Content: "recorded"}}})
	replay, err := NewReplay([]abi.Event{
		{ID: "r1", Type: abi.SubjectLLMRequest, CorrelationID: "run-1", Data: req},
		{ID: "r2", Type: abi.SubjectLLMResponse, CorrelationID: "run-1", CausationID: "r1", Data: res},
	})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMux(live)
	m.Route("run-1", replay)
	ask := func(run string) string {
		p := conversation("hi")
		p.CorrelationID = run
		res, err := m.Chat(context.Background(), p)
		if err != nil {
			t.Fatalf("%s: %v", run, err)
		}
		return res.Message.Content
	}
	if got := ask("run-1"); got != "recorded" {
		t.Errorf("the routed run got %q", got)
	}
	if got := ask("run-2"); got != "live" {
		t.Errorf("another run got %q", got)
	}
	m.Route("run-1", nil)
	if got := ask("run-1"); got != "live" {
		t.Errorf("the run back on the default got %q", got)
	}
	if n := e.requests(); n != 2 {
		t.Errorf("%d requests reached the endpoint, want 2", n)
	}
}

func TestMatchRedacted(t *testing.T) {
	for _, tc := range []struct {
		rec, now string
		want     bool
	}{
		{"same", "same", true},
		{"same", "other", false},
		{"key [REDACTED] here", "key sk-123 here", true},
		{"key [REDACTED] here", "key  here", false}, // a secret is not empty
		{"key [REDACTED] here", "key x there", false},
		{"[REDACTED]", "anything", true},
		{"[REDACTED]", "", false},
		{"a [REDACTED] b [REDACTED] c", "a 1 b 2 c", true},
		{"a [REDACTED] b [REDACTED] c", "a 1 b c", false},
		{"a [REDACTED][REDACTED] c", "a xy c", true},
		{"a [REDACTED][REDACTED] c", "a x c", false},
		{"Bearer [REDACTED]", "Bearer [REDACTED]", true},
		{"x [REDACTED] x", "x x", false},
	} {
		if got := matchRedacted(tc.rec, tc.now); got != tc.want {
			t.Errorf("matchRedacted(%q, %q) = %v, want %v", tc.rec, tc.now, got, tc.want)
		}
	}
}
