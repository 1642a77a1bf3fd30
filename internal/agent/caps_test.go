package agent

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/memory"
)

// spawns is an answer of n process_spawn calls.
func spawns(n int, command string) map[string]any {
	var calls []map[string]any
	for i := range n {
		calls = append(calls, map[string]any{
			"id": fmt.Sprintf("call_%d", i), "type": "function",
			"function": map[string]any{"name": "process_spawn", "arguments": fmt.Sprintf(`{"command":%q}`, command)},
		})
	}
	return map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}
}

// The attack of issue 15: the model answers one message with 1000
// process_spawn calls. At most [agent] max_tool_calls of them run; the rest
// are refused in one kairo.tool.result the model reads on its next
// request, and each call that ran counts against max_iterations. The
// control: an answer of two calls runs both.
func TestLLMToolCallCap(t *testing.T) {
	model := &openAI{answers: []map[string]any{
		spawns(1000, "true"),
		content(`{"action": {"type": "say", "text": "Some were refused.", "done": true}}`),
		spawns(2, "true"),
		content(`{"action": {"type": "say", "text": "Both ran.", "done": true}}`),
	}}
	e := newEnv(t)
	e.model(model, 0)
	r := e.start(Config{Policy: e.policy("llm"), MaxToolCalls: 16, MaxIterations: 100})

	e.say("run everything", "")
	refused := e.events.until(t, "the refusal", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectToolResult && strings.Contains(decodeAs[abi.ToolResultEvent](t, ev).Error, "refused")
	})
	d := decodeAs[abi.ToolResultEvent](t, refused)
	if d.Status != abi.StatusFailed || !strings.Contains(d.Error, "refused: at most 16 tool calls per decision") || !strings.Contains(d.Error, "984 call(s) were not run") {
		t.Fatalf("refusal %+v", d)
	}
	loop := refused.CorrelationID
	e.events.until(t, "the closing say", sayIn(loop, "Some were refused."))
	if n := len(e.events.all(typed(abi.SubjectToolInvoke))); n != 16 {
		t.Fatalf("%d tool calls ran, want 16", n)
	}
	if n := len(e.events.all(typed(SubjectAgentError))); n != 0 {
		t.Errorf("%d agent errors: %s", n, e.events.dump())
	}
	if p := model.request(1); !strings.Contains(p, "refused: at most 16 tool calls per decision") {
		t.Fatalf("the model was not told of the refusal:\n%s", p)
	}
	r.mu.Lock()
	iters := r.st.loops[loop].iterations
	r.mu.Unlock()
	if iters < 16 {
		t.Errorf("the run loop counts %d iterations for 16 tool calls", iters)
	}
	if n := len(e.events.all(typed(abi.SubjectToolResult))); n > 16+16+1 {
		t.Errorf("%d tool results: the refusals are one event, not one a call", n)
	}

	// The control.
	e.say("run two", "")
	e.events.until(t, "the control's say", sayIn("", "Both ran."))
	if n := len(e.events.all(typed(abi.SubjectToolInvoke))); n != 18 {
		t.Fatalf("%d tool calls ran in all, want 16 + 2", n)
	}
}

// Each tool call counts against max_iterations: with 5 steps, an answer of
// 10 calls runs 5, refuses the rest, and the task stops at its limit.
func TestLLMToolCallsCountAsIterations(t *testing.T) {
	model := &openAI{answers: []map[string]any{spawns(10, "true")}}
	e := newEnv(t)
	e.model(model, 0)
	e.start(Config{Policy: e.policy("llm"), MaxIterations: 5})
	e.say("run ten", "")
	refused := e.events.until(t, "the refusal", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectToolResult && strings.Contains(decodeAs[abi.ToolResultEvent](t, ev).Error, "refused")
	})
	if d := decodeAs[abi.ToolResultEvent](t, refused); !strings.Contains(d.Error, "max_iterations") || !strings.Contains(d.Error, "5 call(s) were not run") {
		t.Fatalf("refusal %+v", d)
	}
	ended := e.events.until(t, "the end at the limit", typed(abi.SubjectIntentEnded))
	if d := decodeAs[abi.IntentEnded](t, ended); d.Status != "max_iterations" {
		t.Fatalf("ended %+v", d)
	}
	calls := e.events.all(func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectAgentAction && decodeAs[abi.ActionEvent](t, ev).Type == abi.ActionToolCall
	})
	if len(calls) != 5 {
		t.Fatalf("%d tool calls carried out, want 5", len(calls))
	}
}

// The attack of issue 15: the model answers 100 MB. The answer is read up
// to [llm] max_response_bytes and no further, the heap stays far below it,
// the user is told in the reply, the recorded kairo.llm.response is an
// error and small, and the agent answers the next message (the control).
func TestLLMHugeAnswer(t *testing.T) {
	model := &openAI{answers: []map[string]any{
		nil, // the 100 MB answer, below
		content(`{"action": {"type": "say", "text": "Still here.", "done": true}}`),
	}}
	var n atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) > 1 {
			model.mu.Lock()
			model.requests = append(model.requests, "") // the huge one's turn
			model.mu.Unlock()
			model.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"`)
		piece := strings.Repeat("A", 1<<20)
		for range 100 {
			if _, err := io.WriteString(w, piece); err != nil {
				return
			}
		}
		io.WriteString(w, `"},"finish_reason":"stop"}]}`)
	})
	e := newEnv(t)
	e.model(h, 0)
	e.start(Config{Policy: e.policy("llm")})

	base := heapNow()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	e.say("tell me everything", "")
	reply := e.events.until(t, "the error reply", sayIn("", "I could not reach the model"))
	close(stop)
	wg.Wait()
	if d := decodeAs[abi.ActionEvent](t, reply); !strings.Contains(d.Text, "max_response_bytes") {
		t.Fatalf("reply %q does not name the cap", d.Text)
	}
	if grew := int64(peak.Load()) - int64(base); grew > 64<<20 {
		t.Errorf("the heap grew by %d MiB reading a 100 MB answer", grew>>20)
	}
	resp := e.events.until(t, "the recorded response", typed(abi.SubjectLLMResponse))
	if rec := decodeAs[abi.LLMResponse](t, resp); rec.Error == nil || !strings.Contains(rec.Error.Message, "max_response_bytes") || len(resp.Data) > 4<<10 {
		t.Fatalf("recorded response of %d bytes: %+v", len(resp.Data), rec)
	}

	e.say("are you there?", "")
	e.events.until(t, "the control's answer", sayIn("", "Still here."))
}

func heapNow() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// countingSummarizer counts its calls.
type countingSummarizer struct {
	mu    sync.Mutex
	calls int
}

func (c *countingSummarizer) Summarize(_ context.Context, summary string, evicted []string, _ int) (string, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return fmt.Sprintf("%d lines summarized", len(evicted)), nil
}

func (c *countingSummarizer) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// The attack of issue 15: 300 process exits set off ~34 summaries, each a
// model call, within a second. A burst of events reaches the short-term
// memory in batches, one summary a batch; the control: the memory still
// shows the newest lines and a summary of the rest.
func TestShortTermSummaryBatched(t *testing.T) {
	sum := &countingSummarizer{}
	e := newEnv(t)
	w := &memoryWatch{Policy: e.rules()}
	e.start(Config{Policy: w, Memory: &Memory{Recall: -1, ShortTerm: memory.ShortTermConfig{Lines: 32, Summarizer: sum}}})
	e.say("run sleep 30", "")
	loop := e.events.until(t, "the run loop", typed(abi.SubjectIntentStarted)).CorrelationID
	var evs []*abi.Event
	for i := range 300 {
		code := i % 2
		raw, _ := msgpack.Marshal(abi.Note{RunLoopID: loop, ProcessID: fmt.Sprintf("p%d", i), ExitCode: &code, Argv: []string{"job", fmt.Sprint(i)}})
		evs = append(evs, &abi.Event{Type: abi.SubjectAgentNote, Source: "agent/default", CorrelationID: loop, Data: raw})
	}
	if _, err := e.bus.PublishBatch(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second) // a loaded machine
	for !w.shown("job 299") {
		if time.Now().After(deadline) {
			t.Fatalf("the memory never showed the last exit; shown:\n%s", strings.Join(w.seen, "\n---\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := sum.count(); n < 1 || n > 3 {
		t.Fatalf("300 exits at once: %d summaries, want 1 to 3 (one a batch)", n)
	}
	if !w.shown("lines summarized") {
		w.mu.Lock()
		t.Errorf("no summary shown; last:\n%s", w.seen[len(w.seen)-1])
		w.mu.Unlock()
	}
}
