package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/llm"
)

// openAI is a real HTTP server that speaks OpenAI's chat-completions
// protocol and answers each request with the next scripted message.
type openAI struct {
	mu       sync.Mutex
	answers  []map[string]any // assistant messages
	requests []string         // the user prompt of each request
}

func (o *openAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) < 2 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	o.requests = append(o.requests, req.Messages[len(req.Messages)-1].Content)
	n := len(o.requests)
	var msg map[string]any
	if n <= len(o.answers) {
		msg = o.answers[n-1]
	}
	o.mu.Unlock()
	if msg == nil {
		http.Error(w, `{"error":{"message":"the script ran out"}}`, http.StatusInternalServerError)
		return
	}
	finish := "stop"
	if _, ok := msg["tool_calls"]; ok {
		finish = "tool_calls"
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": time.Now().Unix(), "model": "scripted",
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
	})
}

func (o *openAI) request(i int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if i < len(o.requests) {
		return o.requests[i]
	}
	return ""
}

// model serves h as the model's endpoint: a real HTTP server speaking
// OpenAI's protocol, closed with the test, behind a provider that retries a
// failed request retries times and answers the kernel's llm.chat. It
// returns both, for a test that closes the server early or asks the
// provider itself.
func (e *env) model(h http.Handler, retries int) (*httptest.Server, *llm.Provider) {
	e.t.Helper()
	srv := httptest.NewServer(h)
	e.t.Cleanup(srv.Close)
	p, err := llm.New(llm.Config{BaseURL: srv.URL + "/v1", Model: "scripted", Bus: e.bus, MaxRetries: retries, Backoff: 10 * time.Millisecond})
	if err != nil {
		e.t.Fatal(err)
	}
	llm.Register(e.kernel, p)
	return srv, p
}

func content(s string) map[string]any { return map[string]any{"role": "assistant", "content": s} }

// The LLM policy, against a real HTTP server speaking OpenAI's protocol: a
// tool call runs a process; its end comes back to the model, whose JSON
// closes the task; a request missing information gets a question; an answer
// that is not the JSON asked for is reported and is a noop, and the agent
// goes on.
func TestLLMPolicy(t *testing.T) {
	model := &openAI{answers: []map[string]any{
		{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{
			"id": "call_1", "type": "function",
			"function": map[string]any{"name": "process_spawn", "arguments": `{"command":"echo tests ok"}`},
		}}},
		content(`{"thought": "the process exited 0", "action": {"type": "say", "text": "The tests passed.", "done": true}}`),
		content("```json\n{\"thought\": \"no target given\", \"action\": {\"type\": \"query\", \"text\": \"Deploy to which environment?\"}}\n```"),
		content("Sure, I will deploy it right away!"),
	}}
	e := newEnv(t)
	e.model(model, 1)
	e.start(Config{Policy: e.policy("llm")})

	e.say("run the tests please", "")
	started := e.events.until(t, "intent.started", typed(abi.SubjectIntentStarted))
	loop := started.CorrelationID
	call := e.events.until(t, "the tool call", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectAgentAction && decodeAs[abi.ActionEvent](t, ev).Type == abi.ActionToolCall
	})
	if call.CorrelationID != loop || decodeAs[abi.ActionEvent](t, call).Args != `{"command":"echo tests ok"}` {
		t.Fatalf("tool call = %+v %+v", call, decodeAs[abi.ActionEvent](t, call))
	}
	e.events.until(t, "the closing say", sayIn(loop, "The tests passed."))
	e.events.until(t, "intent.ended", typed(abi.SubjectIntentEnded))
	first, second := model.request(0), model.request(1)
	if !strings.Contains(first, `the user says: "run the tests please"`) || !strings.Contains(first, "Current tick: t=") || !strings.Contains(first, "Open tasks:\n(none)") {
		t.Fatalf("the first prompt:\n%s", first)
	}
	if !strings.Contains(second, "exited with code 0") || !strings.Contains(second, "- task "+loop) || !strings.Contains(second, `process.spawn {"command":"echo tests ok"}`) {
		t.Fatalf("the second prompt:\n%s", second)
	}

	e.say("deploy it", "")
	e.events.until(t, "the question", sayIn("", "Deploy to which environment?"))
	e.say("whatever you like", "")
	bad := e.events.until(t, "the parse failure", typed(SubjectAgentError))
	if d := decodeAs[abi.AgentError](t, bad); !strings.Contains(d.Error, "not the JSON {thought, actions} asked for") {
		t.Fatalf("error = %q", d.Error)
	}
	// Every exchange was recorded, in order.
	reqs := e.events.all(typed(abi.SubjectLLMRequest))
	resps := e.events.all(typed(abi.SubjectLLMResponse))
	if len(reqs) != 4 || len(resps) != 4 || resps[0].CausationID != reqs[0].ID {
		t.Fatalf("%d requests and %d responses recorded", len(reqs), len(resps))
	}
}

// With barge-in "preempt", a message that arrives while the model thinks
// makes the policy ask again with both messages; the stale answer is never
// acted on.
func TestLLMPreempt(t *testing.T) {
	release := make(chan struct{})
	model := &openAI{answers: []map[string]any{
		content(`{"action": {"type": "say", "text": "stale answer"}}`),
		content(`{"action": {"type": "say", "text": "fresh answer", "done": true}}`),
	}}
	// Which request is which is told by its prompt, not by which reaches
	// the server first: under load the second can (the first then took
	// the fresh answer, which the agent rightly dropped as stale, and the
	// second waited for a release that never came). The second is served
	// once the first has taken its answer, so that the script's order
	// holds.
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, `{"error":{"message":"unreadable request"}}`, http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte("actually, only the blog")) {
			defer func() { <-release }() // answered only after the second request
		} else {
			for deadline := time.Now().Add(20 * time.Second); model.request(0) == "" && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
		}
		model.ServeHTTP(w, r)
	})
	e := newEnv(t)
	e.model(slow, 0)
	// Before the server's Close, which waits for the first answer: a
	// failure before release fails the test rather than hanging it.
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	e.start(Config{Policy: e.policy("llm"), BargeIn: abi.BargeInPreempt})

	e.say("build the site", "")
	e.events.until(t, "the first request", typed(abi.SubjectLLMRequest))
	e.say("actually, only the blog", "")
	e.events.until(t, "the fresh answer", sayIn("", "fresh answer"))
	free()
	e.events.until(t, "the stale response", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectLLMResponse && strings.Contains(decodeAny(ev.Data), "stale answer")
	})
	time.Sleep(300 * time.Millisecond) // ticks that could act on it
	if n := len(e.events.all(sayIn("", "stale answer"))); n != 0 {
		t.Fatalf("the stale answer was acted on %d times", n)
	}
	second := model.request(1)
	if !strings.Contains(second, `"build the site"`) || !strings.Contains(second, `"actually, only the blog"`) {
		t.Fatalf("the second prompt lacks a message:\n%s", second)
	}
}
