package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// endpoint is the one fake of these tests: a real HTTP server speaking
// OpenAI's chat-completions protocol, answering each request with the next
// step of its script (the last step answers every request after it). It
// keeps what each request sent.
type endpoint struct {
	*httptest.Server
	mu    sync.Mutex
	steps []http.HandlerFunc
	got   []sent
}

// sent is one request the endpoint received.
type sent struct {
	path, auth string
	body       map[string]any
}

func newEndpoint(t *testing.T, steps ...http.HandlerFunc) *endpoint {
	t.Helper()
	e := &endpoint{steps: steps}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("the provider sent a body that is not JSON: %v\n%s", err, raw)
		}
		e.mu.Lock()
		n := len(e.got)
		e.got = append(e.got, sent{path: r.URL.Path, auth: r.Header.Get("Authorization"), body: body})
		step := e.steps[min(n, len(e.steps)-1)]
		e.mu.Unlock()
		step(w, r)
	}))
	t.Cleanup(e.Close)
	return e
}

// requests counts the requests the endpoint received.
func (e *endpoint) requests() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.got)
}

func (e *endpoint) request(t *testing.T, i int) sent {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if i >= len(e.got) {
		t.Fatalf("the endpoint received %d requests, want at least %d", len(e.got), i+1)
	}
	return e.got[i]
}

// respond answers with status and body, and headers as name, value pairs.
func respond(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// apiError is the body of an OpenAI error answer.
func apiError(message, typ string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": typ}})
	return string(b)
}

// completion answers a non-streamed request with one choice.
func completion(message string, finish string) http.HandlerFunc {
	return respond(200, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"test-model-0613",`+
		`"choices":[{"index":0,"message":`+message+`,"finish_reason":"`+finish+`"}],`+
		`"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`)
}

// events answers a streamed request with a data: event per chunk (each a
// chat.completion.chunk's choices and usage, as JSON), then [DONE].
func events(chunks ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		f := w.(http.Flusher)
		for _, c := range chunks {
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-2\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"test-model-0613\",%s}\n\n", c)
			f.Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
		f.Flush()
	}
}

// delta is the choices of one chunk: a delta (JSON) and a finish reason.
func delta(d string, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `"choices":[{"index":0,"delta":` + d + `,"finish_reason":` + f + `}]`
}

// drop promises a body and hangs up in the middle of it.
func drop(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", "1000")
	w.WriteHeader(200)
	io.WriteString(w, `{"id":"chatcmpl-1","choices":[`)
	w.(http.Flusher).Flush()
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

// dropStream starts a stream and hangs up before it ends.
func dropStream(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"fi\"}}]}\n\n")
	w.(http.Flusher).Flush()
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

// hang answers nothing until the client gives up.
func hang(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
}

// testProvider is a Provider for e with fast retries whose waits are noted,
// not slept.
func testProvider(t *testing.T, e *endpoint, cfg Config) (*Provider, *[]time.Duration) {
	t.Helper()
	cfg.BaseURL = e.URL + "/v1"
	if cfg.Model == "" {
		cfg.Model = "test-model"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	cfg.Backoff, cfg.MaxBackoff = 20*time.Millisecond, 80*time.Millisecond
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	p.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	return p, &waits
}

func jsonPath(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func contains(t *testing.T, what, s string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(s, w) {
			t.Errorf("%s %q does not say %q", what, s, w)
		}
	}
}
