package abi

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

func TestChatRoundTrip(t *testing.T) {
	temp := 0.2
	params := ChatParams{
		Messages: []ChatMessage{
			{Role: RoleSystem, Content: "be brief"},
			{Role: RoleUser, Content: "weather in Paris?", Name: "ana"},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`}}},
			{Role: RoleTool, ToolCallID: "call_1", Content: "sunny"},
		},
		Tools: []Tool{{Name: "weather", Description: "the weather", Parameters: map[string]any{
			"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
		}}},
		Model: "m", Temperature: &temp, MaxTokens: 100, CorrelationID: "run-1", CausationID: "ev-1",
	}
	result := ChatResult{
		Message:      ChatMessage{Role: RoleAssistant, Content: "It is sunny."},
		FinishReason: "stop", Usage: ChatUsage{PromptTokens: 10, CompletionTokens: 4, TotalTokens: 14},
		Model: "m-2025", Replayed: true,
	}
	for _, v := range []any{
		params,
		result,
		LLMRequest{Params: params, Model: "m", Endpoint: "http://localhost:11434/v1", Stream: true},
		LLMResponse{Result: &result, Attempts: 2, Duration: time.Second},
		LLMResponse{Error: &Error{Code: CodeUnavailable, Message: "down"}, Attempts: 4},
	} {
		raw, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got := reflect.New(reflect.TypeOf(v))
		if err := msgpack.Unmarshal(raw, got.Interface()); err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		// Parameters come back with MsgPack's own map and string types;
		// compare what the wire says, not the Go types.
		again, err := msgpack.Marshal(got.Elem().Interface())
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if err := msgpack.Unmarshal(raw, &a); err != nil {
			t.Fatal(err)
		}
		if err := msgpack.Unmarshal(again, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%T does not survive a round trip:\n%v\n%v", v, a, b)
		}
	}
}

// The wire keys are camelCase like the rest of abi, and optional fields are
// left out when empty.
func TestChatWireKeys(t *testing.T) {
	keys := func(v any) []string {
		raw, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := msgpack.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	temp := 0.0
	for _, tc := range []struct {
		v    any
		want []string
	}{
		{ChatParams{}, []string{"messages"}},
		{ChatParams{Temperature: &temp, MaxTokens: 1, CorrelationID: "r", CausationID: "c", Model: "m"},
			[]string{"causationId", "correlationId", "maxTokens", "messages", "model", "temperature"}},
		{ChatMessage{Role: RoleTool, ToolCallID: "x"}, []string{"role", "toolCallId"}},
		{ChatResult{FinishReason: "stop"}, []string{"finishReason", "message", "usage"}},
		{ChatUsage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}, []string{"completionTokens", "promptTokens", "totalTokens"}},
	} {
		if got := keys(tc.v); !slices.Equal(got, tc.want) {
			t.Errorf("%T keys %v, want %v", tc.v, got, tc.want)
		}
	}
}
