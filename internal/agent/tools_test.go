package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/tools"
)

// The LLM policy is offered every tool of the registry under a name OpenAI
// accepts; the model calls one, the registry runs it, and its answer comes
// back to the model, which closes the task.
func TestLLMCallsRegistryTool(t *testing.T) {
	model := &openAI{answers: []map[string]any{
		{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{
			"id": "call_1", "type": "function",
			"function": map[string]any{"name": "demo_greet", "arguments": `{"name":"Ada"}`},
		}}},
		content(`{"thought": "greeted", "action": {"type": "say", "text": "Ada is greeted.", "done": true}}`),
	}}
	e := newEnv(t)
	e.model(model, 1)
	reg, err := tools.New(tools.Config{Kernel: e.kernel, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	greet := func(ctx context.Context, c *tools.Invocation) abi.ToolResultEvent {
		var args struct{ Name string }
		if err := json.Unmarshal([]byte(c.Args), &args); err != nil || args.Name == "" {
			return abi.ToolResultEvent{Error: "give a name"}
		}
		raw, _ := msgpack.Marshal("hello, " + args.Name)
		return abi.ToolResultEvent{Result: raw}
	}
	if err := reg.Add(abi.ToolInfo{Tool: abi.Tool{Name: "demo.greet", Description: "Greets someone."}, Source: "test"}, greet); err != nil {
		t.Fatal(err)
	}
	e.start(Config{Policy: e.policy("llm"), Tools: reg})

	e.say("greet Ada", "")
	res := e.events.until(t, "the tool's result", typed(abi.SubjectToolResult))
	if d := decodeAs[abi.ToolResultEvent](t, res); d.Tool != "demo.greet" || d.Status != abi.StatusDone || !strings.Contains(decodeAny(d.Result), "hello, Ada") {
		t.Fatalf("tool result %+v", d)
	}
	e.events.until(t, "the closing say", sayIn(res.CorrelationID, "Ada is greeted."))
	if second := model.request(1); !strings.Contains(second, "tool demo.greet in task "+res.CorrelationID+" answered: BEGIN DATA \"hello, Ada\" END DATA") {
		t.Fatalf("the second prompt lacks the tool's answer:\n%s", second)
	}
}
