// Package llmscript gives tests a model at the edge of the machine: a real
// HTTP server speaking OpenAI's chat-completions protocol whose answers a
// test scripts, and a reader of the LLM policy's prompts, so a scripted
// model can act on what a prompt shows — the open tasks, their later
// messages and processes, the labelled new messages — as a competent model
// would, never on what the test knows.
package llmscript

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server answers each chat request with what Think returns for it.
type Server struct {
	// Think is the assistant message for the nth request (0 first), given
	// the request's system prompt and its last user message; nil answers
	// an error, as a server whose script ran out.
	Think func(n int, system, prompt string) map[string]any
	// Usage is the token usage the nth answer reports; nil reports 10
	// prompt and 5 completion tokens.
	Usage func(n int) (prompt, completion int)

	mu      sync.Mutex
	prompts []string
}

// ServeHTTP answers POST /v1/chat/completions with the scripted message as
// the one choice; anything else, or a script that ran out, is an HTTP
// error with an OpenAI-shaped body.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	prompt := req.Messages[len(req.Messages)-1].Content
	s.mu.Lock()
	s.prompts = append(s.prompts, prompt)
	n := len(s.prompts) - 1
	s.mu.Unlock()
	msg := s.Think(n, req.Messages[0].Content, prompt)
	if msg == nil {
		http.Error(w, `{"error":{"message":"the script ran out"}}`, http.StatusInternalServerError)
		return
	}
	msg["role"] = "assistant"
	finish := "stop"
	if _, ok := msg["tool_calls"]; ok {
		finish = "tool_calls"
	}
	in, out := 10, 5
	if s.Usage != nil {
		in, out = s.Usage(n)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n+1), "object": "chat.completion", "created": time.Now().Unix(), "model": "scripted",
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out},
	})
}

// Summarizing wraps think so that a request of the short-term memory, whose
// system prompt asks for a task's running summary, is answered "a summary"
// and every other request goes to think: what a scripted policy model
// writes to stay out of the summaries' way.
func Summarizing(think func(n int, system, prompt string) map[string]any) func(n int, system, prompt string) map[string]any {
	return func(n int, system, prompt string) map[string]any {
		if strings.Contains(system, "running summary") {
			return map[string]any{"content": "a summary"}
		}
		return think(n, system, prompt)
	}
}

// Prompt is the user prompt of the nth request, "" before it came.
func (s *Server) Prompt(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < len(s.prompts) {
		return s.prompts[n]
	}
	return ""
}

// Seen is a prompt as a model reads it.
type Seen struct {
	Tasks    []Task
	Messages []Message // the new ones, in order
}

// Task is an open task of a prompt.
type Task struct {
	ID, Goal    string
	Later       []string // the user's messages after the goal
	Running     []string // the processes in progress
	Interrupted bool
}

// Message is a new user message of a prompt, with its label.
type Message struct{ Label, Task, Text string }

var (
	taskLine    = regexp.MustCompile(`^- task (\S+): ("(?:[^"\\]|\\.)*"), \d+ steps(, interrupted)?`)
	laterLine   = regexp.MustCompile(`^    the user said later: ("(?:[^"\\]|\\.)*")$`)
	runningLine = regexp.MustCompile(`^    process\.spawn .*: in progress \(process (\S+?)[,)]`)
	messageLine = regexp.MustCompile(`^- \[(m\d+)\] the user says(?: in task (\S+))?: ("(?:[^"\\]|\\.)*")$`)
)

// Read reads a prompt of the LLM policy.
func Read(prompt string) Seen {
	var s Seen
	for _, line := range strings.Split(prompt, "\n") {
		last := len(s.Tasks) - 1
		if m := taskLine.FindStringSubmatch(line); m != nil {
			goal, _ := strconv.Unquote(m[2])
			s.Tasks = append(s.Tasks, Task{ID: m[1], Goal: goal, Interrupted: m[3] != ""})
		} else if m := laterLine.FindStringSubmatch(line); m != nil && last >= 0 {
			text, _ := strconv.Unquote(m[1])
			s.Tasks[last].Later = append(s.Tasks[last].Later, text)
		} else if m := runningLine.FindStringSubmatch(line); m != nil && last >= 0 {
			s.Tasks[last].Running = append(s.Tasks[last].Running, m[1])
		} else if m := messageLine.FindStringSubmatch(line); m != nil {
			text, _ := strconv.Unquote(m[3])
			s.Messages = append(s.Messages, Message{Label: m[1], Task: m[2], Text: text})
		}
	}
	return s
}

// Task is the open task whose goal holds words, or nil.
func (s Seen) Task(words string) *Task {
	for i := range s.Tasks {
		if strings.Contains(s.Tasks[i].Goal, words) {
			return &s.Tasks[i]
		}
	}
	return nil
}

// Last is the last new message, or the zero Message.
func (s Seen) Last() Message {
	if len(s.Messages) == 0 {
		return Message{}
	}
	return s.Messages[len(s.Messages)-1]
}

// Actions is an assistant message answering the JSON of actions.
func Actions(actions ...map[string]any) map[string]any {
	b, _ := json.Marshal(map[string]any{"thought": "scripted", "actions": actions})
	return map[string]any{"content": string(b)}
}

// Noop is the answer that nothing needs doing.
func Noop() map[string]any { return Actions(map[string]any{"type": "noop"}) }

// Calls is an assistant message calling tools: a name, then its
// arguments, for each.
func Calls(calls ...any) map[string]any {
	var out []map[string]any
	for i := 0; i+1 < len(calls); i += 2 {
		args, _ := json.Marshal(calls[i+1])
		out = append(out, map[string]any{"id": fmt.Sprintf("call_%d", i/2+1), "type": "function",
			"function": map[string]any{"name": calls[i], "arguments": string(args)}})
	}
	return map[string]any{"content": nil, "tool_calls": out}
}
