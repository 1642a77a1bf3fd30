package main

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/llmscript"
)

// llmConfig is a kairo.toml whose default agent runs the LLM policy
// against the scripted model served at url (an httptest server's), the
// llm plugin granted what its manifest asks; more tables may follow.
func llmConfig(t *testing.T, url string) string {
	t.Helper()
	return fmt.Sprintf(`
[agent]
policy = "llm"
[llm]
base_url = %q
model = "scripted"
stream = false
`, url+"/v1") + grantAsManifest(t, "llm")
}

// chatRequest is what the tests read of a chat request to a scripted
// model.
type chatRequest struct {
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	body string // as it came, for a failure to show
}

// prompt is the request's last message: the policy's prompt.
func (r chatRequest) prompt() string {
	if len(r.Messages) == 0 {
		return ""
	}
	return r.Messages[len(r.Messages)-1].Content
}

// tools are the names of the tools the request offers.
func (r chatRequest) tools() []string {
	var out []string
	for _, t := range r.Tools {
		out = append(out, t.Function.Name)
	}
	return out
}

// The run-loop scenario of TestRunLoopBargeIn, with the LLM policy of a
// real `kairo up` against a real HTTP server that plays a competent model
// over OpenAI's protocol: it acts on what each prompt shows. "Restart it
// with sleep 1" while `sleep 300` runs: the model kills the process naming
// only the process, and, told of the exit, reads the new parameter from
// the task's later messages and spawns it in the same task, which it
// closes when that ends. Judged by the event log: one run loop, the kill
// and both spawns in it, the kill caused by the user's message, one
// intent.ended; a progress question (the control) opens nothing.
func TestLLMRunLoopUp(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	model := &llmscript.Server{Think: llmscript.Summarizing(func(n int, system, prompt string) map[string]any {
		s := llmscript.Read(prompt)
		task := s.Task("sleep")
		m := s.Last()
		switch {
		case strings.HasPrefix(m.Text, "run "):
			return llmscript.Calls("process_spawn", map[string]any{"command": strings.TrimPrefix(m.Text, "run "), "answers": m.Label})
		case m.Text == "how far along is it?" && task != nil:
			return llmscript.Actions(map[string]any{"type": "say", "text": fmt.Sprintf("%s runs %d process(es).", task.ID, len(task.Running)), "runLoopId": task.ID})
		case strings.HasPrefix(m.Text, "restart it with ") && task != nil && len(task.Running) == 1:
			return llmscript.Calls("process_kill", map[string]any{"processId": task.Running[0]})
		case m.Text == "" && task != nil && len(task.Running) == 0 && len(task.Later) > 1:
			// Told of an exit: the last later message says what to run.
			later := task.Later[len(task.Later)-1]
			if cmd, ok := strings.CutPrefix(later, "restart it with "); ok && !strings.Contains(prompt, `"command":"`+cmd+`"`) {
				return llmscript.Calls("process_spawn", map[string]any{"command": cmd, "runLoopId": task.ID})
			}
			return llmscript.Actions(map[string]any{"type": "say", "text": "Done.", "done": true, "runLoopId": task.ID})
		}
		return llmscript.Noop()
	})}
	srv := httptest.NewServer(model)
	defer srv.Close()
	if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte(llmConfig(t, srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startUp(t, home)
	if r := kairo(t, home, "send", "--no-follow", "run sleep 300"); r.code != 0 {
		t.Fatalf("run sleep 300:\n%s\n%s", r, d.stderr)
	}
	until(t, "`sleep 300` running", func() bool {
		r := kairo(t, home, "send", "how far along is it?")
		return r.code == 0 && strings.Contains(r.stdout, "runs 1 process(es).")
	})
	if r := kairo(t, home, "send", "--no-follow", "restart it with sleep 1"); r.code != 0 {
		t.Fatalf("restart:\n%s", r)
	}
	loop := firstEnded(t, home)
	var started, ended int
	var restart, kill, spawn1, spawn2 string
	for _, ev := range eventLog(t, home) {
		switch {
		case ev.Type == "kairo.intent.started":
			started++
		case ev.Type == "kairo.intent.ended":
			ended++
		case ev.Type == "kairo.agent.default.message" && ev.Data["text"] == "restart it with sleep 1":
			restart = ev.ID
		case ev.Type == "kairo.agent.action" && ev.Data["tool"] == abi.MethodProcessKill:
			kill = ev.ID
			if ev.Correlation != loop || ev.Causation != restart {
				t.Fatalf("the kill %+v; want it in %s caused by %s", ev, loop, restart)
			}
		case ev.Type == "kairo.agent.action" && ev.Data["args"] == `{"command":"sleep 300"}`:
			spawn1 = ev.Correlation
		case ev.Type == "kairo.agent.action" && ev.Data["args"] == `{"command":"sleep 1"}`:
			spawn2 = ev.Correlation
		}
	}
	if started != 1 || ended != 1 || kill == "" || spawn1 != loop || spawn2 != loop {
		t.Fatalf("%d run loops, %d ends, kill %q, spawns in %q and %q; want one run loop %s iterated:\n%s",
			started, ended, kill, spawn1, spawn2, loop, kairo(t, home, "events", "replay", "kairo.>").stdout)
	}
	if s := runsJSON(t, home)["run sleep 300"]; s.Status != "done" || s.ID != loop {
		t.Fatalf("kairo runs: %+v", s)
	}
}
