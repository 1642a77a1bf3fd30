package llm

import (
	"testing"

	"github.com/kairo-os/kairo/abi"
	"github.com/vmihailenco/msgpack/v5"
)

func must(v any) []byte {
	b, err := msgpack.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		secrets  []string
	}{
		{"nothing to hide", "nothing to hide", nil},
		{"key sk-proj-AbC123dEf456GhI789jKl0", "key [REDACTED]", nil},
		{"anthropic sk-ant-api03-abcdefghijklmnop", "anthropic [REDACTED]", nil},
		{"a task-list-with-many-words-in-it", "a task-list-with-many-words-in-it", nil},
		{"sk-short", "sk-short", nil},
		{"curl -H 'Authorization: Bearer abc.def.ghi-123456'", "curl -H 'Authorization: [REDACTED]'", nil},
		{`{"authorization":"Basic dXNlcjpwYXNzd29yZA=="}`, `{"authorization":"[REDACTED]"}`, nil},
		{"token: Bearer eyJhbGciOiJIUzI1NiJ9.e30.x", "token: Bearer [REDACTED]", nil},
		{"X-Api-Key: 0123456789", "X-Api-Key: [REDACTED]", nil},
		{`api_key = "hunter2hunter2"`, `api_key = "[REDACTED]"`, nil},
		{"a bearer of bad news", "a bearer of bad news", nil},
		{"gh token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "gh token [REDACTED]", nil},
		{"aws AKIAIOSFODNN7EXAMPLE", "aws [REDACTED]", nil},
		{"my key is plain-secret-4711 ok", "my key is [REDACTED] ok", []string{"plain-secret-4711"}},
		{"short none stays", "short none stays", []string{"none"}},
	} {
		if got := Redact(tc.in, tc.secrets...); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRedactParamsLeavesTheOriginal(t *testing.T) {
	p := abi.ChatParams{
		Messages: []abi.ChatMessage{{Role: "user", Content: "sk-abcdefghijklmnopqrstu",
			ToolCalls: []abi.ToolCall{{ID: "c", Name: "f", Arguments: `{"api_key":"zzzzzzzz"}`}}}},
		Tools: []abi.Tool{{Name: "f", Description: "d", Parameters: map[string]any{
			"default": "Bearer abcdefghijklmnop", "enum": []any{"sk-abcdefghijklmnopqrstu", 3}, "n": 1.5,
		}}},
	}
	r := newRedactor().params(p)
	if p.Messages[0].Content != "sk-abcdefghijklmnopqrstu" || p.Messages[0].ToolCalls[0].Arguments != `{"api_key":"zzzzzzzz"}` ||
		p.Tools[0].Parameters["default"] != "Bearer abcdefghijklmnop" {
		t.Fatalf("redacting changed the original: %+v", p)
	}
	if r.Messages[0].Content != Redacted || r.Messages[0].ToolCalls[0].Arguments != `{"api_key":"[REDACTED]"}` {
		t.Errorf("redacted messages %+v", r.Messages)
	}
	params := r.Tools[0].Parameters
	if params["default"] != "Bearer [REDACTED]" || params["enum"].([]any)[0] != Redacted || params["enum"].([]any)[1] != 3 || params["n"] != 1.5 {
		t.Errorf("redacted parameters %v", params)
	}
}
