package main

import (
	"github.com/kairo-os/kairo/abi"

	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// An MCP server of kairo.toml: the daemon starts it sandboxed, its tools
// join the agent's (kairo tools lists them, with the grants), the LLM
// policy — against a real HTTP server speaking OpenAI's protocol — calls
// one and reads its answer, and when the daemon stops the server goes with
// it: no process of it is left. A server that cannot start is reported,
// and the daemon serves on.
func TestMCPServers(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	bin := buildMCPServer(t)
	model := &scriptedModel{answers: []string{
		`{"tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "mcp_test_echo", "arguments": "{\"text\":\"hello from mcp\"}"}}]}`,
		`{"content": "{\"thought\": \"it answered\", \"action\": {\"type\": \"say\", \"text\": \"The server said it.\", \"done\": true}}"}`,
	}}
	srv := httptest.NewServer(model)
	defer srv.Close()
	toml := llmConfig(t, srv.URL) + fmt.Sprintf(`
[mcp.test]
command = [%q]
[mcp.test.sandbox.fs]
exec = [%q]

[mcp.broken]
command = ["/nonexistent/mcp-server"]
`, bin, bin)
	if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startUp(t, home)

	deadline := time.Now().Add(20 * time.Second)
	var r result
	for {
		r = kairo(t, home, "tools")
		if strings.Contains(r.stdout, "mcp.test.echo") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kairo tools never listed the MCP server's tools:\n%s\n%s", r, d.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(r.stdout, "mcp.test.add") || !strings.Contains(r.stdout, bin) || !strings.Contains(r.stdout, abi.MethodProcessSpawn) {
		t.Fatalf("kairo tools:\n%s", r)
	}
	if strings.Contains(r.stdout, "mcp.broken.") {
		t.Fatalf("the broken server lists tools:\n%s", r)
	}
	r = kairo(t, home, "events", "replay", "kairo.mcp.>")
	if !strings.Contains(r.stdout, "kairo.mcp.connected") || !strings.Contains(r.stdout, "kairo.mcp.failed") || !strings.Contains(r.stdout, "broken") {
		t.Fatalf("the servers' events:\n%s", r)
	}
	// The model calls the server's tool through the agent; its answer
	// comes back to the model, which closes the task.
	r = kairo(t, home, "send", "say hello through the test server")
	if r.code != 0 || !strings.Contains(r.stdout, "mcp.test.echo") || !strings.Contains(r.stdout, "The server said it.") {
		t.Fatalf("kairo send:\n%s\n%s", r, d.stderr)
	}
	if asked := model.prompt(1); !strings.Contains(asked, "tool mcp.test.echo") || !strings.Contains(asked, "hello from mcp") {
		t.Fatalf("the model's second prompt lacks the tool's answer:\n%s", asked)
	}
	if n := processesOf(bin); n != 1 {
		t.Fatalf("%d processes run %s; want the one server", n, bin)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d:\n%s", code, d.stderr)
	}
	if n := processesOf(bin); n != 0 {
		t.Fatalf("%d processes of the MCP server outlived the daemon", n)
	}
}

// processesOf counts the processes whose program is path.
func processesOf(path string) int {
	n := 0
	dirs, _ := os.ReadDir("/proc")
	for _, e := range dirs {
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == path {
			n++
		}
	}
	return n
}

// scriptedModel is a real HTTP server speaking OpenAI's chat-completions
// protocol: each request gets the next scripted assistant message (JSON).
type scriptedModel struct {
	mu      sync.Mutex
	answers []string
	prompts []string // the last user message of each request
}

func (m *scriptedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.prompts = append(m.prompts, req.Messages[len(req.Messages)-1].Content)
	n := len(m.prompts)
	m.mu.Unlock()
	if n > len(m.answers) {
		http.Error(w, `{"error":{"message":"the script ran out"}}`, http.StatusInternalServerError)
		return
	}
	var msg map[string]any
	json.Unmarshal([]byte(m.answers[n-1]), &msg)
	msg["role"] = "assistant"
	finish := "stop"
	if _, ok := msg["tool_calls"]; ok {
		finish = "tool_calls"
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "model": "scripted",
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
	})
}

func (m *scriptedModel) prompt(i int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i < len(m.prompts) {
		return m.prompts[i]
	}
	return ""
}
