package console_test

// The console reads like a story: a tool's result by its kind (a process
// as its card, the JSON behind a toggle), only the thoughts that say
// something, the runtime's steps apart from the agent's, a chat that
// follows its newest message, and output that stays after the exit. In a
// real browser against a real daemon, as browser_test.go.

import (
	"context"
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

	"github.com/chromedp/chromedp"

	"github.com/kairo-os/kairo/abi"
)

// TestConsoleStory: a finished task's tool result is its process — the
// command, exit 0, its output — not a JSON blob, and the toggle shows the
// JSON; the output stays viewable after the exit, live and after a reload
// (then from the exit's kept lines: the last 40 of 100); the rules
// policy writes no "rules: N action(s)" thoughts and none is shown; a
// run loop that only answered ("help") is hidden until asked for; the memory indexing of the run loop is shown apart, as the
// system's; the chat follows its newest message unless the person
// scrolled up. With one agent, no agent label nor agent select is shown
// (TestConsoleAgents has two).
func TestConsoleStory(t *testing.T) {
	t.Parallel()
	home := newHome(t)
	d := startDaemon(t, home)
	b := newBrowser(t)
	b.open(d.url())

	// It sleeps first, so that the page follows its output live.
	kairo(t, home, "send", "run sleep 1; seq 1 100")
	loop := loopWith("run sleep 1; seq 1 100")
	b.wait("the run loop, done", loop+` && `+loop+`.classList.contains("s-done")`, time.Minute)
	if eval[bool](b, loop+`.querySelector(".loop-agent").checkVisibility() || !document.getElementById("agent").hidden`) {
		t.Error("with one agent, the page shows which agent a run loop is, or a choice of agents to send to")
	}
	res := loop + `.querySelector(".k-result")`
	b.wait("the tool result as its process", res+` && `+res+`.querySelector(".proc .pstate").textContent === "exit 0"`, 30*time.Second)
	if argv := eval[string](b, res+`.querySelector(".proc .argv").textContent`); !strings.Contains(argv, "seq 1 100") {
		t.Errorf("the result's command is %q, want seq 1 100", argv)
	}
	b.wait("the output after the exit, live", res+`.querySelector(".proc .out") && /\n?1\n2\n3\n[\s\S]*\n100$/.test(`+res+`.querySelector(".proc .out").innerText.trim())`, 30*time.Second)
	if !eval[bool](b, res+`.querySelector(".proc .out").checkVisibility()`) {
		t.Error("the output is not visible after the exit")
	}
	// The JSON is behind its toggle: there, not shown, until clicked.
	shown := eval[string](b, res+`.innerText`)
	if strings.Contains(shown, `"startedAt"`) || strings.Contains(shown, `"status": "running"`) {
		t.Errorf("the result shows the JSON before its toggle is opened:\n%s", shown)
	}
	if !eval[bool](b, res+`.querySelector("details.raw pre").textContent.includes('"startedAt"')`) {
		t.Fatal("the result's toggle holds no JSON")
	}
	b.screenshot("result")
	b.do(chromedp.Click(chromedp.CSS(`.loop.s-done .k-result details.raw summary`)))
	b.wait("the JSON, toggled", res+`.querySelector("details.raw").open && `+res+`.innerText.includes('"startedAt"')`, 10*time.Second)
	if !eval[bool](b, `document.getElementById("detail").hidden`) {
		t.Error("the toggle opened the event's envelope too")
	}
	b.screenshot("result-json")

	// The thoughts: the rules policy writes none (a count of its actions
	// was all it had to say), and the page shows none.
	if out := kairo(t, home, "events", "replay", "kairo.agent.thought"); strings.Contains(out, "action(s)") {
		t.Errorf("the rules policy still writes its boilerplate thought:\n%s", out)
	}
	if n := eval[int](b, `document.querySelectorAll('[data-type="kairo.agent.thought"]').length`); n != 0 {
		t.Errorf("the page shows %d rules-boilerplate thoughts", n)
	}

	// A conversation: "help" is answered in the chat, and its run loop,
	// which only answered, is hidden until asked for; the task beside it
	// stays in view.
	kairo(t, home, "send", "help")
	conv := loopWith("help")
	b.wait("the help run loop, done", conv+` && `+conv+`.classList.contains("s-done")`, time.Minute)
	b.wait("the help answer in the chat", `[...document.querySelectorAll("#messages .agent")].some(m => m.textContent.includes("help"))`, 30*time.Second)
	if !eval[bool](b, conv+`.classList.contains("conversation") && !`+conv+`.checkVisibility()`) {
		t.Error("the help run loop is shown as a task")
	}
	if !eval[bool](b, loop+`.checkVisibility() && !`+loop+`.classList.contains("conversation")`) {
		t.Error("the task is hidden as a conversation")
	}
	b.do(chromedp.Click(chromedp.CSS("#show-conv")))
	b.wait("the conversation, asked for", conv+`.checkVisibility()`, 10*time.Second)
	b.do(chromedp.Click(chromedp.CSS("#show-conv")))
	b.wait("the conversation, hidden again", `!`+conv+`.checkVisibility()`, 10*time.Second)

	// The memory indexing: apart from the agent's steps, labelled.
	sys := loop + `.querySelector(".sys")`
	b.wait("the memory indexing, apart", sys+` && `+sys+`.querySelector('[data-type="kairo.memory.indexed"]')`, time.Minute)
	if head := eval[string](b, sys+`.querySelector(".sys-head").textContent`); !strings.Contains(head, "system") {
		t.Errorf("the system steps are headed %q", head)
	}
	if n := eval[int](b, loop+`.querySelectorAll('.lane [data-type^="kairo.memory."]').length`); n != 0 {
		t.Errorf("%d memory steps are among the agent's", n)
	}

	// A reload: the output is the exit's kept lines, the last 40 of 100.
	b.open(d.url())
	b.wait("the output after a reload", res+` && /^61\n[\s\S]*\n100$/.test(`+res+`.querySelector(".proc .out").innerText.trim())`, 30*time.Second)
	if head := eval[string](b, res+`.querySelector(".proc .out-head").textContent`); !strings.Contains(head, "40 of 100") {
		t.Errorf("the output's head says %q, want the last 40 of 100 lines", head)
	}
	b.screenshot("output-after-reload")

	// The chat: many messages; the last is in view.
	c := d.dial()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	say := func(text string) {
		t.Helper()
		if _, err := c.PublishData(ctx, abi.SubjectUserMessage, abi.UserMessage{Text: text, MessageID: abi.NewID()}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 30 {
		say(fmt.Sprintf("message %d: what is running?", i))
	}
	b.wait("the thirtieth message", `[...document.querySelectorAll("#messages .user")].some(m => m.textContent.includes("message 29:"))`, time.Minute)
	b.wait("its answer", `document.querySelector("#messages").lastElementChild.classList.contains("agent") && document.querySelectorAll("#messages li").length >= 60`, time.Minute)
	const inView = `(() => { const m = document.getElementById("messages"), r = m.getBoundingClientRect(), l = m.lastElementChild.getBoundingClientRect(); return l.top >= r.top - 1 && l.bottom <= r.bottom + 1; })()`
	if !eval[bool](b, `document.getElementById("messages").scrollHeight > document.getElementById("messages").clientHeight`) {
		t.Fatal("the chat does not overflow: nothing to follow")
	}
	b.wait("the last message in view", inView, 10*time.Second)
	b.screenshot("chat")
	// The control: scrolled up, a new message leaves the view where it is.
	eval[bool](b, `(document.getElementById("messages").scrollTop = 0, true)`)
	n := eval[int](b, `document.querySelectorAll("#messages li").length`)
	say("one more: what is running?")
	b.wait("the new message", fmt.Sprintf(`document.querySelectorAll("#messages li").length > %d`, n), time.Minute)
	if top := eval[float64](b, `document.getElementById("messages").scrollTop`); top != 0 {
		t.Errorf("the chat scrolled to %v while the person read above", top)
	}
	if eval[bool](b, inView) {
		t.Error("the last message is in view though the person scrolled up")
	}
	b.clean()
}

// TestConsoleThought: a thought that says something — the LLM policy's,
// from a real HTTP server speaking OpenAI's protocol — is shown, in its
// iteration.
func TestConsoleThought(t *testing.T) {
	t.Parallel()
	model := &scripted{answer: `{"thought": "the person greets me; I greet back", "action": {"type": "say", "text": "Hello.", "done": true}}`}
	srv := httptest.NewServer(model)
	defer srv.Close()
	home := newHome(t)
	cfg, err := os.ReadFile(filepath.Join(home, "kairo.toml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = append(cfg, fmt.Sprintf("\n[agent]\npolicy = \"llm\"\n[llm]\nbase_url = %q\nmodel = \"scripted\"\nstream = false\n[plugins.llm.grants]\ncall = [\"llm.chat\"]\n", srv.URL+"/v1")...)
	if err := os.WriteFile(filepath.Join(home, "kairo.toml"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, home)
	b := newBrowser(t)
	b.open(d.url())
	kairo(t, home, "send", "hello")
	b.wait("the thought", `[...document.querySelectorAll('[data-type="kairo.agent.thought"]')].some(e => e.textContent.includes("I greet back"))`, time.Minute)
	b.screenshot("thought")
	b.clean()
}

// scripted is a real HTTP server speaking OpenAI's chat-completions
// protocol: every request gets answer as the assistant's content.
type scripted struct {
	mu     sync.Mutex
	answer string
}

func (m *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	m.mu.Lock()
	content := m.answer
	m.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "model": "scripted",
		"choices": []map[string]any{{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": "stop"}},
	})
}
