package llm

import (
	"context"
	"errors"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
)

func conversation(text string) abi.ChatParams {
	return abi.ChatParams{Messages: []abi.ChatMessage{
		{Role: abi.RoleSystem, Content: "You are Kairo's agent."},
		{Role: abi.RoleUser, Content: text},
	}}
}

var weatherTool = abi.Tool{Name: "weather", Description: "the weather in a city", Parameters: map[string]any{
	"type":       "object",
	"properties": map[string]any{"city": map[string]any{"type": "string"}},
	"required":   []any{"city"},
}}

func TestPlainAnswer(t *testing.T) {
	e := newEndpoint(t, completion(`{"role":"assistant","content":"Hello, Ana."}`, "stop"))
	p, _ := testProvider(t, e, Config{APIKey: "key-0123456789"})
	params := conversation("Hi, I am Ana.")
	zero := 0.0
	params.Temperature, params.MaxTokens = &zero, 64
	res, err := p.Chat(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	want := abi.ChatResult{
		Message:      abi.ChatMessage{Role: abi.RoleAssistant, Content: "Hello, Ana."},
		FinishReason: "stop", Model: "test-model-0613",
		Usage: abi.ChatUsage{PromptTokens: 12, CompletionTokens: 5, TotalTokens: 17},
	}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("Chat = %+v\nwant %+v", res, want)
	}
	got := e.request(t, 0)
	if got.path != "/v1/chat/completions" || got.auth != "Bearer key-0123456789" {
		t.Errorf("request to %s with Authorization %q", got.path, got.auth)
	}
	if m := jsonPath(got.body, "model"); m != "test-model" {
		t.Errorf("model %v, want the configured one", m)
	}
	if s := jsonPath(got.body, "stream"); s != false {
		t.Errorf("stream %v, want false", s)
	}
	if c := jsonPath(got.body, "messages", 1, "content"); c != "Hi, I am Ana." {
		t.Errorf("messages[1].content %v", c)
	}
	// A temperature of 0 must reach the endpoint, not be left out.
	if temp, ok := jsonPath(got.body, "temperature").(float64); !ok || temp <= 0 || temp > 1e-30 {
		t.Errorf("temperature %v, want a number that rounds to 0", jsonPath(got.body, "temperature"))
	}
	if mt := jsonPath(got.body, "max_tokens"); mt != 64.0 {
		t.Errorf("max_tokens %v, want 64", mt)
	}

	// A request's own model wins over the configured one.
	params.Model = "other-model"
	if _, err := p.Chat(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	if m := jsonPath(e.request(t, 1).body, "model"); m != "other-model" {
		t.Errorf("model %v, want the request's", m)
	}
}

func TestStreamedAnswer(t *testing.T) {
	e := newEndpoint(t, events(
		delta(`{"role":"assistant","content":""}`, ""),
		delta(`{"content":"Hel"}`, ""),
		delta(`{"content":"lo, "}`, ""),
		delta(`{"content":"Ana."}`, ""),
		delta(`{}`, "stop"),
		`"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}`,
	))
	p, _ := testProvider(t, e, Config{Stream: true})
	res, err := p.Chat(context.Background(), conversation("Hi, I am Ana."))
	if err != nil {
		t.Fatal(err)
	}
	want := abi.ChatResult{
		Message:      abi.ChatMessage{Role: abi.RoleAssistant, Content: "Hello, Ana."},
		FinishReason: "stop", Model: "test-model-0613",
		Usage: abi.ChatUsage{PromptTokens: 12, CompletionTokens: 3, TotalTokens: 15},
	}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("Chat = %+v\nwant %+v", res, want)
	}
	got := e.request(t, 0)
	if jsonPath(got.body, "stream") != true || jsonPath(got.body, "stream_options", "include_usage") != true {
		t.Errorf("request %v does not ask for a stream with usage", got.body)
	}
	if got.auth != "" {
		t.Errorf("Authorization %q sent without a key", got.auth)
	}
}

func TestToolCall(t *testing.T) {
	// Two calls; the first one's arguments split mid-token across chunks,
	// the second's pieces interleaved with the first's.
	streamed := events(
		delta(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"weather","arguments":""}}]}`, ""),
		delta(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]}`, ""),
		delta(`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"weather","arguments":"{\"city\":"}}]}`, ""),
		delta(`{"tool_calls":[{"index":0,"function":{"arguments":"ty\": \"Par"}}]}`, ""),
		delta(`{"tool_calls":[{"index":1,"function":{"arguments":"\"Oslo\"}"}}]}`, ""),
		delta(`{"tool_calls":[{"index":0,"function":{"arguments":"is\"}"}}]}`, ""),
		delta(`{}`, "tool_calls"),
	)
	whole := completion(`{"role":"assistant","content":null,"tool_calls":[`+
		`{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\": \"Paris\"}"}},`+
		`{"id":"call_2","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}}]}`, "tool_calls")
	want := abi.ChatMessage{Role: abi.RoleAssistant, ToolCalls: []abi.ToolCall{
		{ID: "call_1", Name: "weather", Arguments: `{"city": "Paris"}`},
		{ID: "call_2", Name: "weather", Arguments: `{"city":"Oslo"}`},
	}}
	for _, tc := range []struct {
		name   string
		stream bool
		answer http.HandlerFunc
	}{
		{"streamed", true, streamed},
		{"whole", false, whole},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEndpoint(t, tc.answer)
			p, _ := testProvider(t, e, Config{Stream: tc.stream})
			params := conversation("Weather in Paris and Oslo?")
			params.Tools = []abi.Tool{weatherTool, {Name: "now"}}
			res, err := p.Chat(context.Background(), params)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.Message, want) || res.FinishReason != "tool_calls" {
				t.Fatalf("Chat = %+v\nwant %+v, finish tool_calls", res, want)
			}
			body := e.request(t, 0).body
			if jsonPath(body, "tools", 0, "type") != "function" || jsonPath(body, "tools", 0, "function", "name") != "weather" ||
				jsonPath(body, "tools", 0, "function", "parameters", "properties", "city", "type") != "string" {
				t.Errorf("tools sent: %v", jsonPath(body, "tools"))
			}
			if jsonPath(body, "tools", 1, "function", "parameters", "type") != "object" {
				t.Errorf("a tool without parameters was sent %v, want an empty object schema", jsonPath(body, "tools", 1))
			}

			// The conversation goes on with the calls and their results.
			params.Messages = append(params.Messages, res.Message,
				abi.ChatMessage{Role: abi.RoleTool, ToolCallID: "call_1", Content: "sunny"},
				abi.ChatMessage{Role: abi.RoleTool, ToolCallID: "call_2", Content: "snow"})
			p.Chat(context.Background(), params)
			body = e.request(t, 1).body
			if jsonPath(body, "messages", 2, "tool_calls", 1, "function", "arguments") != `{"city":"Oslo"}` ||
				jsonPath(body, "messages", 2, "tool_calls", 0, "id") != "call_1" ||
				jsonPath(body, "messages", 3, "tool_call_id") != "call_1" || jsonPath(body, "messages", 4, "content") != "snow" {
				t.Errorf("messages sent: %v", jsonPath(body, "messages"))
			}
		})
	}
}

// A server that leaves out the tool-call index (some do) still gets its
// pieces put together by id, and pieces without either go to the last call.
func TestStreamedToolCallWithoutIndex(t *testing.T) {
	e := newEndpoint(t, events(
		delta(`{"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\""}}]}`, ""),
		delta(`{"tool_calls":[{"function":{"arguments":":1}"}}]}`, ""),
		delta(`{"tool_calls":[{"id":"b","type":"function","function":{"name":"g","arguments":"{}"}}]}`, "tool_calls"),
	))
	p, _ := testProvider(t, e, Config{Stream: true})
	res, err := p.Chat(context.Background(), conversation("go"))
	if err != nil {
		t.Fatal(err)
	}
	want := []abi.ToolCall{{ID: "a", Name: "f", Arguments: `{"x":1}`}, {ID: "b", Name: "g", Arguments: "{}"}}
	if !reflect.DeepEqual(res.Message.ToolCalls, want) {
		t.Fatalf("tool calls %+v, want %+v", res.Message.ToolCalls, want)
	}
}

func TestRetries(t *testing.T) {
	ok := completion(`{"role":"assistant","content":"fine"}`, "stop")
	for _, tc := range []struct {
		name      string
		steps     []http.HandlerFunc
		retries   int
		stream    bool
		requests  int
		waits     []time.Duration // exact waits; nil: backoff within [10ms, 80ms]
		errWants  []string        // "" when the request succeeds
		errStatus int
	}{
		{name: "429 then success, Retry-After in seconds", retries: 3, requests: 2, waits: []time.Duration{2 * time.Second},
			steps: []http.HandlerFunc{respond(429, apiError("Rate limit reached for requests", "requests"), "Retry-After", "2"), ok}},
		{name: "429 then success, retry-after-ms", retries: 3, requests: 2, waits: []time.Duration{1500 * time.Millisecond},
			steps: []http.HandlerFunc{respond(429, apiError("slow down", "requests"), "Retry-After", "2", "Retry-After-Ms", "1500"), ok}},
		{name: "503 with Retry-After as a date", retries: 3, requests: 2,
			steps: []http.HandlerFunc{respond(503, "overloaded", "Retry-After", time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)), ok},
			waits: []time.Duration{0}},
		{name: "500 then success", retries: 3, requests: 2,
			steps: []http.HandlerFunc{respond(500, apiError("The server had an error while processing your request.", "server_error")), ok}},
		{name: "502 twice then success", retries: 3, requests: 3,
			steps: []http.HandlerFunc{respond(502, "<html>Bad Gateway</html>"), respond(502, "<html>Bad Gateway</html>"), ok}},
		{name: "a dropped connection then success", retries: 3, requests: 2, steps: []http.HandlerFunc{drop, ok}},
		{name: "a stream cut short then success", retries: 3, requests: 2, stream: true, steps: []http.HandlerFunc{dropStream,
			events(delta(`{"content":"fine"}`, "stop"))}},
		{name: "500 until the retries run out", retries: 2, requests: 3, errStatus: 500,
			steps:    []http.HandlerFunc{respond(500, apiError("The server had an error", "server_error"))},
			errWants: []string{"/v1/chat/completions: HTTP 500", "The server had an error", "gave up after 2 retries", "(after 3 attempts)"}},
		{name: "429 without retries", retries: 0, requests: 1, errStatus: 429,
			steps:    []http.HandlerFunc{respond(429, apiError("You exceeded your current quota", "insufficient_quota"))},
			errWants: []string{"HTTP 429", "rate limited", "You exceeded your current quota", "raise the account's quota"}},
		{name: "a Retry-After too long", retries: 3, requests: 1, errStatus: 429, waits: []time.Duration{},
			steps:    []http.HandlerFunc{respond(429, apiError("later", "requests"), "Retry-After", "3600")},
			errWants: []string{"asks to wait 1h0m0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEndpoint(t, tc.steps...)
			p, waits := testProvider(t, e, Config{MaxRetries: tc.retries, Stream: tc.stream})
			res, err := p.Chat(context.Background(), conversation("hi"))
			if n := e.requests(); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
			if tc.errWants == nil {
				if err != nil || res.Message.Content != "fine" {
					t.Fatalf("Chat = %+v, %v; want the answer", res, err)
				}
			} else {
				var le *Error
				if !errors.As(err, &le) {
					t.Fatalf("Chat error %v (%T), want an *llm.Error", err, err)
				}
				contains(t, "error", err.Error(), tc.errWants...)
				if le.Status != tc.errStatus || le.Code != abi.CodeUnavailable || le.Attempts != tc.requests {
					t.Errorf("error status %d code %s attempts %d, want %d %s %d", le.Status, le.Code, le.Attempts, tc.errStatus, abi.CodeUnavailable, tc.requests)
				}
			}
			switch {
			case tc.waits != nil:
				if !reflect.DeepEqual(*waits, tc.waits) && !(len(tc.waits) == 0 && len(*waits) == 0) {
					t.Errorf("waited %v, want %v", *waits, tc.waits)
				}
			default:
				if len(*waits) != tc.requests-1 {
					t.Errorf("waited %v, want %d waits", *waits, tc.requests-1)
				}
				for i, w := range *waits {
					lo, hi := 10*time.Millisecond<<i, min(20*time.Millisecond<<i, 80*time.Millisecond)
					if w < lo/2 || w > hi {
						t.Errorf("wait %d was %v, want a backoff in [%v, %v]", i, w, lo/2, hi)
					}
				}
			}
		})
	}
}

// The real pause, not the noted one: a retry really waits, and the
// caller's cancel ends the wait.
func TestRetryWaitsAndCancels(t *testing.T) {
	e := newEndpoint(t, respond(429, apiError("busy", "requests"), "Retry-After-Ms", "40"),
		completion(`{"role":"assistant","content":"fine"}`, "stop"))
	p, _ := testProvider(t, e, Config{MaxRetries: 1})
	p.sleep = sleep
	start := time.Now()
	if _, err := p.Chat(context.Background(), conversation("hi")); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Errorf("answered after %v, before the 40ms the endpoint asked to wait", d)
	}

	// The endpoint asks for 50 s (under maxRetryAfter): a Chat that returns
	// well before it did not sit out the wait, however loaded the machine.
	e = newEndpoint(t, respond(503, "down", "Retry-After-Ms", "50000"))
	p, _ = testProvider(t, e, Config{MaxRetries: 3})
	p.sleep = sleep
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	start = time.Now()
	_, err := p.Chat(ctx, conversation("hi"))
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Chat returned after %v, long after the cancel", d)
	}
	if err == nil || !strings.Contains(err.Error(), "the caller gave up while waiting to retry") {
		t.Errorf("error %v, want it to say the caller gave up", err)
	}
	// A retry that would pass the caller's deadline is not waited for.
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start = time.Now()
	_, err = p.Chat(ctx, conversation("hi"))
	if d := time.Since(start); d > 20*time.Second || err == nil || !strings.Contains(err.Error(), "would pass the caller's deadline") {
		t.Errorf("Chat took %v and failed with %v; want an error at once saying the retry would pass the deadline", d, err)
	}
}

func TestTimeout(t *testing.T) {
	for _, stream := range []bool{false, true} {
		e := newEndpoint(t, hang)
		p, waits := testProvider(t, e, Config{Timeout: 50 * time.Millisecond, MaxRetries: 3, Stream: stream})
		start := time.Now()
		_, err := p.Chat(context.Background(), conversation("hi"))
		if d := time.Since(start); d > 8*time.Second { // hang answers after 10 s
			t.Errorf("stream %v: Chat returned after %v with a 50ms timeout", stream, d)
		}
		var le *Error
		if !errors.As(err, &le) || le.Code != abi.CodeUnavailable {
			t.Fatalf("stream %v: error %v, want an unavailable *llm.Error", stream, err)
		}
		contains(t, "error", err.Error(), "no complete answer within the timeout of 50ms", "raise [llm] timeout")
		// A model too slow once is too slow again: no retry. (On a loaded
		// machine the 50ms may run out before the endpoint has the request:
		// none then; a retry would still show as a wait.)
		if n := e.requests(); n > 1 || len(*waits) != 0 {
			t.Errorf("stream %v: %d requests and waits %v after a timeout, want at most 1 and none", stream, n, *waits)
		}
	}
}

func TestFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		answer http.HandlerFunc
		code   string
		status int
		wants  []string
	}{
		{"malformed JSON", Config{}, respond(200, `{not json}`),
			abi.CodeUnavailable, 200, []string{"malformed answer, not an OpenAI chat completion", "ending in /v1"}},
		{"JSON cut short", Config{}, respond(200, `{"id":"x","choices":[{"index":0,"message":{"role":"assis`),
			abi.CodeUnavailable, 200, []string{"malformed answer, not an OpenAI chat completion"}},
		{"JSON of another shape", Config{}, respond(200, `{"choices":"none"}`),
			abi.CodeUnavailable, 200, []string{"malformed answer"}},
		{"no choices", Config{}, respond(200, `{"id":"x","choices":[]}`),
			abi.CodeUnavailable, 200, []string{"malformed answer", "no choices"}},
		{"malformed stream", Config{Stream: true}, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {garbage\n\n"))
		}, abi.CodeUnavailable, 200, []string{"malformed answer"}},
		{"a stream that is not one", Config{Stream: true}, completion(`{"role":"assistant","content":"whole"}`, "stop"),
			abi.CodeUnavailable, 200, []string{"malformed stream", "set [llm] stream = false"}},
		{"an error inside the stream", Config{Stream: true}, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("data: {\"error\":{\"message\":\"the model crashed\",\"type\":\"server_error\"}}\n\n"))
		}, abi.CodeUnavailable, 200, []string{"the endpoint reported an error in the stream: the model crashed"}},
		{"401 with a key", Config{APIKey: "sk-wrong-0123456789abcdef", APIKeyEnv: "KAIRO_LLM_KEY"},
			respond(401, apiError("Incorrect API key provided: sk-wrong-0123456789abcdef.", "invalid_request_error")),
			abi.CodePermissionDenied, 401, []string{"HTTP 401", "refused the API key", "Incorrect API key provided: [REDACTED]", "set $KAIRO_LLM_KEY ([llm] api_key_env) to a valid key"}},
		{"401 without a key", Config{APIKeyEnv: "KAIRO_LLM_KEY"}, respond(401, apiError("no key", "invalid_request_error")),
			abi.CodePermissionDenied, 401, []string{"no key was sent: $KAIRO_LLM_KEY ([llm] api_key_env) is unset or empty"}},
		{"403", Config{APIKey: "k"}, respond(403, apiError("not allowed", "invalid_request_error")),
			abi.CodePermissionDenied, 403, []string{`may not use model "test-model"`}},
		{"404 model not found", Config{}, respond(404, apiError("The model `test-model` does not exist", "invalid_request_error")),
			abi.CodeNotFound, 404, []string{`model "test-model" not found`, "does not exist", "/v1/models lists what the endpoint serves", "under /v1"}},
		{"404 of a web server", Config{}, respond(404, "404 page not found"),
			abi.CodeNotFound, 404, []string{`model "test-model" not found, or no chat API at this URL: 404 page not found`}},
		{"400", Config{}, respond(400, apiError("messages[1].role: invalid", "invalid_request_error")),
			abi.CodeInvalidParams, 400, []string{"the endpoint rejected the request: messages[1].role: invalid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEndpoint(t, tc.answer)
			tc.cfg.MaxRetries = 3
			p, _ := testProvider(t, e, tc.cfg)
			_, err := p.Chat(context.Background(), conversation("hi"))
			var le *Error
			if !errors.As(err, &le) {
				t.Fatalf("error %v (%T), want an *llm.Error", err, err)
			}
			if le.Code != tc.code || le.Status != tc.status {
				t.Errorf("code %s status %d, want %s %d", le.Code, le.Status, tc.code, tc.status)
			}
			contains(t, "error", err.Error(), append(tc.wants, "POST "+e.URL+"/v1/chat/completions")...)
			if strings.Contains(err.Error(), "0123456789abcdef") {
				t.Errorf("error %q shows the key", err)
			}
			if n := e.requests(); n != 1 {
				t.Errorf("%d requests; a failure no retry can mend is not retried", n)
			}
		})
	}
}

func TestEndpointDown(t *testing.T) {
	e := newEndpoint(t, hang)
	e.Close()
	p, waits := testProvider(t, e, Config{MaxRetries: 2})
	_, err := p.Chat(context.Background(), conversation("hi"))
	var le *Error
	if !errors.As(err, &le) || le.Code != abi.CodeUnavailable || le.Attempts != 3 || len(*waits) != 2 {
		t.Fatalf("error %v after waits %v, want an unavailable *llm.Error after 3 attempts", err, *waits)
	}
	contains(t, "error", err.Error(), "cannot connect", "is the server running", "gave up after 2 retries")
}

func TestInvalidParams(t *testing.T) {
	e := newEndpoint(t, hang)
	p, _ := testProvider(t, e, Config{})
	for _, tc := range []struct {
		params abi.ChatParams
		want   string
	}{
		{abi.ChatParams{}, "messages is empty"},
		{abi.ChatParams{Messages: []abi.ChatMessage{{Content: "x"}}}, "messages[0] has no role"},
		{abi.ChatParams{Messages: []abi.ChatMessage{{Role: "user"}}, Tools: []abi.Tool{{}}}, "tools[0] has no name"},
	} {
		_, err := p.Chat(context.Background(), tc.params)
		var ae *abi.Error
		if !errors.As(err, &ae) || ae.Code != abi.CodeInvalidParams || !strings.Contains(ae.Message, tc.want) {
			t.Errorf("Chat(%+v) = %v, want invalid_params saying %q", tc.params, err, tc.want)
		}
	}
	if n := e.requests(); n != 0 {
		t.Errorf("%d requests sent for invalid params", n)
	}
}

func TestReasoningModelMaxTokens(t *testing.T) {
	e := newEndpoint(t, completion(`{"role":"assistant","content":"ok"}`, "stop"))
	p, _ := testProvider(t, e, Config{Model: "o3-mini"})
	params := conversation("hi")
	params.MaxTokens = 100
	if _, err := p.Chat(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	body := e.request(t, 0).body
	if body["max_completion_tokens"] != 100.0 || body["max_tokens"] != nil {
		t.Errorf("a reasoning model got max_tokens %v, max_completion_tokens %v", body["max_tokens"], body["max_completion_tokens"])
	}
}

func TestNewRefuses(t *testing.T) {
	for _, cfg := range []Config{
		{BaseURL: "localhost:11434", Model: "m"},
		{BaseURL: "ftp://example.com", Model: "m"},
		{BaseURL: "http://localhost:11434/v1"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		headers []string
		want    time.Duration
	}{
		{nil, -1},
		{[]string{"Retry-After", "3"}, 3 * time.Second},
		{[]string{"Retry-After", "0.5"}, 500 * time.Millisecond},
		{[]string{"Retry-After", now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second},
		{[]string{"Retry-After", now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{[]string{"Retry-After", "soon"}, -1},
		{[]string{"Retry-After", "7", "Retry-After-Ms", "250"}, 250 * time.Millisecond},
		{[]string{"Retry-After", "7", "Retry-After-Ms", "x"}, 7 * time.Second},
	} {
		h := http.Header{}
		for i := 0; i+1 < len(tc.headers); i += 2 {
			h.Set(tc.headers[i], tc.headers[i+1])
		}
		if got := retryAfter(h, now); got != tc.want {
			t.Errorf("retryAfter(%v) = %v, want %v", tc.headers, got, tc.want)
		}
	}
}

func TestBackoffGrowsAndIsBounded(t *testing.T) {
	p := &Provider{cfg: Config{Backoff: 100 * time.Millisecond, MaxBackoff: time.Second}}
	for n, hi := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		hi *= time.Millisecond
		if hi > time.Second {
			hi = time.Second
		}
		for range 20 {
			if d := p.backoff(n + 1); d < hi/2 || d > hi {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", n+1, d, hi/2, hi)
			}
		}
	}
	if d := p.backoff(math.MaxInt32); d > time.Second {
		t.Errorf("backoff after many retries = %v, past MaxBackoff", d)
	}
}
