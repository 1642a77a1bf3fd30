package llm

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/kernel/bus/sqlite"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/manifests"
	"github.com/vmihailenco/msgpack/v5"
)

// The secrets of these tests: a key of a well-known shape, and the key in
// the environment, which has none.
const (
	testKey      = "sk-kairo-test-5f0c2a9e7b3d41e8"
	testKeyPlain = "plain-secret-4711-kairo"
)

// daemon is a kernel over a real SQLite store, as kairo up runs it.
type daemon struct {
	k    *kernel.Kernel
	b    *bus.Bus
	path string
}

func newDaemon(t *testing.T) *daemon {
	t.Helper()
	path := filepath.Join(t.TempDir(), "events.db")
	store, err := sqlite.Open(path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b := bus.New(store, bus.Config{})
	k := kernel.New(b, kernel.Config{})
	t.Cleanup(func() {
		k.Close()
		b.Close()
	})
	return &daemon{k: k, b: b, path: path}
}

// chat calls llm.chat through the kernel's method table, as a plugin or an
// IPC client does.
func (d *daemon) chat(t *testing.T, p abi.ChatParams) (abi.ChatResult, *abi.Error) {
	t.Helper()
	raw, err := msgpack.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	out, aerr := d.k.Invoke(context.Background(), abi.MethodLLMChat, &kernel.Call{Params: raw})
	if aerr != nil {
		return abi.ChatResult{}, aerr
	}
	var res abi.ChatResult
	if err := msgpack.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	return res, nil
}

// llmEventsOf lists the stored kairo.llm events.
func (d *daemon) llmEventsOf(t *testing.T) []abi.Event {
	t.Helper()
	var evs []abi.Event
	err := d.b.Replay(context.Background(), bus.Query{Pattern: abi.MustCompilePattern("kairo.llm.>")}, func(ev *abi.Event) error {
		var cp abi.Event
		abi.DecodeEvent(abi.AppendEvent(nil, ev), &cp)
		cp.Seq = ev.Seq
		evs = append(evs, cp)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// runLoop is the conversation of a run loop: a first request that carries
// secrets in its messages, the model's tool call, then the tool's result.
func runLoop(first bool) abi.ChatParams {
	p := abi.ChatParams{
		Messages: []abi.ChatMessage{
			{Role: abi.RoleSystem, Content: "You are Kairo's agent."},
			{Role: abi.RoleUser, Content: "My key is " + testKey + " and my other one " + testKeyPlain +
				"; call the API with Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123"},
		},
		Tools:         []abi.Tool{weatherTool},
		CorrelationID: "run-7", CausationID: "ev-user-1",
	}
	if !first {
		p.Messages = append(p.Messages,
			abi.ChatMessage{Role: abi.RoleAssistant, ToolCalls: []abi.ToolCall{{ID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`}}},
			abi.ChatMessage{Role: abi.RoleTool, ToolCallID: "call_1", Content: "sunny, 21°C"})
		p.CausationID = "ev-tool-result-1"
	}
	return p
}

// recordRun runs the two requests of runLoop through a kernel whose
// llm.chat is the Provider kairo.toml describes, with the key in the
// environment, and returns the daemon, the endpoint and the answers.
func recordRun(t *testing.T) (*daemon, *endpoint, []abi.ChatResult) {
	t.Helper()
	e := newEndpoint(t,
		events(
			delta(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"ci"}}]}`, ""),
			delta(`{"tool_calls":[{"index":0,"function":{"arguments":"ty\":\"Paris\"}"}}]}`, "tool_calls"),
		),
		events(delta(`{"content":"It is sunny in Paris. Keep `+testKey+` to yourself."}`, ""), delta(`{}`, "stop")),
	)
	// The key is one no pattern recognises: only knowing it redacts it.
	t.Setenv("KAIRO_TEST_LLM_KEY", testKeyPlain)
	cfg := manifests.Default().LLM
	cfg.BaseURL, cfg.Model, cfg.APIKeyEnv = e.URL+"/v1", "test-model", "KAIRO_TEST_LLM_KEY"
	d := newDaemon(t)
	c, err := Open(cfg, d.b)
	if err != nil {
		t.Fatal(err)
	}
	Register(d.k, c)
	var answers []abi.ChatResult
	for _, first := range []bool{true, false} {
		res, aerr := d.chat(t, runLoop(first))
		if aerr != nil {
			t.Fatal(aerr)
		}
		answers = append(answers, res)
	}
	if got := e.request(t, 0).auth; got != "Bearer "+testKeyPlain {
		t.Fatalf("the endpoint got Authorization %q, want the key from the environment", got)
	}
	return d, e, answers
}

func TestRecording(t *testing.T) {
	d, e, answers := recordRun(t)
	if answers[0].Message.ToolCalls[0].Arguments != `{"city":"Paris"}` || !strings.Contains(answers[1].Message.Content, testKey) {
		t.Fatalf("answers %+v: the caller gets the model's answer as it is", answers)
	}
	evs := d.llmEventsOf(t)
	if len(evs) != 4 {
		t.Fatalf("%d kairo.llm events, want 4", len(evs))
	}
	for i, ev := range evs {
		wantType := abi.SubjectLLMRequest
		if i%2 == 1 {
			wantType = abi.SubjectLLMResponse
		}
		if ev.Type != wantType || ev.CorrelationID != "run-7" || ev.Source != Source {
			t.Errorf("event %d: %s from %s in run %q, want %s from %s in run-7", i, ev.Type, ev.Source, ev.CorrelationID, wantType, Source)
		}
	}
	if evs[0].CausationID != "ev-user-1" || evs[2].CausationID != "ev-tool-result-1" {
		t.Errorf("requests caused by %q and %q, want the params' causation ids", evs[0].CausationID, evs[2].CausationID)
	}
	if evs[1].CausationID != evs[0].ID || evs[3].CausationID != evs[2].ID {
		t.Errorf("responses caused by %q and %q, want their requests %q and %q", evs[1].CausationID, evs[3].CausationID, evs[0].ID, evs[2].ID)
	}

	var req abi.LLMRequest
	if err := msgpack.Unmarshal(evs[2].Data, &req); err != nil {
		t.Fatal(err)
	}
	if req.Model != "test-model" || req.Endpoint != e.URL+"/v1" || !req.Stream || len(req.Params.Messages) != 4 || req.Params.Tools[0].Name != "weather" {
		t.Errorf("recorded request %+v", req)
	}
	wantUser := "My key is [REDACTED] and my other one [REDACTED]; call the API with Authorization: [REDACTED]"
	if got := req.Params.Messages[1].Content; got != wantUser {
		t.Errorf("recorded user message %q\nwant %q", got, wantUser)
	}
	var res abi.LLMResponse
	if err := msgpack.Unmarshal(evs[1].Data, &res); err != nil {
		t.Fatal(err)
	}
	if res.Result == nil || !reflect.DeepEqual(res.Result.Message, answers[0].Message) || res.Attempts != 1 || res.Duration <= 0 {
		t.Errorf("recorded response %+v, want the first answer", res)
	}

	// Neither key is anywhere in what the store holds: not in the events,
	// not in the database file or its write-ahead log.
	for _, ev := range evs {
		env := abi.AppendEvent(nil, &ev)
		for _, secret := range []string{testKey, testKeyPlain, "abcdefghijklmnopqrstuvwxyz0123"} {
			if bytes.Contains(env, []byte(secret)) {
				t.Errorf("event %s (%s) holds the secret %q", ev.ID, ev.Type, secret)
			}
		}
	}
	d.b.Close()
	for _, f := range []string{d.path, d.path + "-wal"} {
		raw, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{testKey, testKeyPlain} {
			if bytes.Contains(raw, []byte(secret)) {
				t.Errorf("%s holds the secret %q", filepath.Base(f), secret)
			}
		}
	}
}

// A request that failed is recorded with its error, redacted too.
func TestRecordingAnError(t *testing.T) {
	e := newEndpoint(t, respond(401, apiError("Incorrect API key provided: "+testKey, "invalid_request_error")))
	d := newDaemon(t)
	p, _ := testProvider(t, e, Config{APIKey: testKey, APIKeyEnv: "OPENAI_API_KEY", Bus: d.b})
	Register(d.k, p)
	params := conversation("hi")
	params.CorrelationID = "run-9"
	_, aerr := d.chat(t, params)
	if aerr == nil || aerr.Code != abi.CodePermissionDenied || !strings.Contains(aerr.Message, "$OPENAI_API_KEY") {
		t.Fatalf("llm.chat = %v, want permission_denied naming the variable", aerr)
	}
	evs := d.llmEventsOf(t)
	if len(evs) != 2 {
		t.Fatalf("%d events, want a request and a response", len(evs))
	}
	var res abi.LLMResponse
	if err := msgpack.Unmarshal(evs[1].Data, &res); err != nil {
		t.Fatal(err)
	}
	if res.Result != nil || res.Error == nil || res.Error.Code != abi.CodePermissionDenied || !strings.Contains(res.Error.Message, "Incorrect API key provided: [REDACTED]") {
		t.Errorf("recorded response %+v", res)
	}
	if bytes.Contains(evs[1].Data, []byte(testKey)) {
		t.Errorf("the recorded error holds the key")
	}
}

func TestUnconfigured(t *testing.T) {
	d := newDaemon(t)
	c, err := Open(manifests.Default().LLM, d.b)
	if err != nil {
		t.Fatal(err)
	}
	Register(d.k, c)
	_, aerr := d.chat(t, conversation("hi"))
	if aerr == nil || aerr.Code != abi.CodeUnavailable {
		t.Fatalf("llm.chat = %v, want unavailable", aerr)
	}
	contains(t, "error", aerr.Message, "no LLM is configured", "[llm]", "base_url", "model", "kairo.toml")
	if !slices.Contains(d.k.Methods(), abi.MethodLLMChat) {
		t.Errorf("methods %v lack %s", d.k.Methods(), abi.MethodLLMChat)
	}
}

func TestInvalidParamsThroughKernel(t *testing.T) {
	d := newDaemon(t)
	Register(d.k, Unconfigured{})
	out, aerr := d.k.Invoke(context.Background(), abi.MethodLLMChat, &kernel.Call{Params: msgpack.RawMessage{0x81, 0xa8, 'm', 'e', 's', 's', 'a', 'g', 'e', 's', 0x07}})
	if aerr == nil || aerr.Code != abi.CodeInvalidParams || !strings.Contains(aerr.Message, "messages") {
		t.Fatalf("llm.chat with messages = 7: %v, %v; want invalid_params naming messages", out, aerr)
	}
}
