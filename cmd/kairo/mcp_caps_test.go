package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi/modelname"
)

// The MCP cases of issue 15 against a real `kairo up`, real MCP stdio
// servers and a real HTTP server speaking OpenAI's protocol:
//
//   - two tools whose names share their first 70 characters are each
//     offered to the model under a name of its own, the one `kairo tools`
//     shows; the model calls the second and reads its answer, and the
//     policy answers the next message (the control);
//   - a server listing more tools than its max_tools is refused, saying
//     so in kairo.mcp.failed, while one with exactly max_tools lists all
//     (the control); a server whose list grows past the cap while it runs
//     keeps the tools it had, callable, and the daemon says why;
//   - a result of 200 MiB is cut at max_result_bytes while it is read: the
//     model and the run's timeline name the cap, kairo.tool.result records
//     it, the daemon's memory does not follow, and the next call of a tool
//     of the same server answers (the control).
func TestMCPCapsUp(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	bin := buildMCPServer(t)
	long := strings.Repeat("n", 70)
	one, two := long+"_one", long+"_two"
	model := newMCPModel()
	srv := httptest.NewServer(model)
	defer srv.Close()
	server := func(name string, maxTools int, args ...string) string {
		return fmt.Sprintf("\n[mcp.%s]\ncommand = %s\nmax_tools = %d\nmax_result_bytes = \"64KiB\"\n[mcp.%s.sandbox.fs]\nexec = [%q]\n",
			name, tomlList(append([]string{bin}, args...)), maxTools, name, bin)
	}
	toml := fmt.Sprintf(`
[agent]
policy = "llm"
[llm]
base_url = %q
model = "scripted"
stream = false
max_retries = 0
[plugins.llm]
# Some forty tools are offered each decision; on a loaded machine the
# policy may pass the drop-in default deadline, which is not what this
# test is about.
deadline = "3s"
`, srv.URL+"/v1") +
		server("test", 0, "-tool", one, "-tool", two, "-big") + // the default cap, 256
		server("many", 5) + // lists 10 tools
		server("few", 10) + // lists exactly 10
		server("grow", 11) + // room for one more
		grantAsManifest(t, "llm")
	if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startUp(t, home)

	// Every server has connected or failed.
	var events result
	mcpWait(t, d, 30*time.Second, "the servers' events", func() bool {
		events = kairo(t, home, "events", "replay", "kairo.mcp.>")
		return strings.Count(events.stdout, "kairo.mcp.connected")+strings.Count(events.stdout, "kairo.mcp.failed") >= 4
	})
	tools := kairo(t, home, "tools")
	t.Run("long names", func(t *testing.T) {
		offered := map[string]string{}
		for _, m := range regexp.MustCompile(`(?m)^mcp\.test\.(`+long+`_\w+): offered to the model as (\S+)$`).FindAllStringSubmatch(tools.stdout, -1) {
			offered[m[1]] = m[2]
		}
		a, b := offered[one], offered[two]
		if len(offered) != 2 || a == b || !modelname.Valid(a) || !modelname.Valid(b) {
			t.Fatalf("kairo tools shows the long names offered as %q:\n%s", offered, tools.stdout)
		}
		t.Logf("offered as %s and %s", a, b)
		model.set("call the second", mcpToolCall(b, "{}"))
		model.set("tool mcp.test."+two, mcpSay("The second one answered."))
		r := kairo(t, home, "send", "call the second")
		if r.code != 0 || !strings.Contains(r.stdout, "mcp.test."+two) || !strings.Contains(r.stdout, "The second one answered.") {
			t.Fatalf("kairo send:\n%s\n%s", r, d.stderr)
		}
		// The model was offered both, under the names kairo tools shows,
		// and read the second's answer: its own name.
		asked := model.request("call the second")
		if !asked.offers(a) || !asked.offers(b) {
			t.Errorf("the model was offered %q, not both of %q and %q", asked.Tools, a, b)
		}
		if answer := model.request("tool mcp.test." + two).Observed; !strings.Contains(answer, "answered: BEGIN DATA \""+two) {
			t.Errorf("the model did not read the second tool's answer:\n%s", answer)
		}
		mcpControl(t, d, model)
	})

	t.Run("max_tools", func(t *testing.T) {
		if !regexp.MustCompile(`kairo\.mcp\.failed.*many.*more than 5 tools.*max_tools`).MatchString(events.stdout) {
			t.Errorf("no kairo.mcp.failed of the server over its max_tools:\n%s", events.stdout)
		}
		if n := strings.Count(tools.stdout, "\nmcp.many."); n != 0 {
			t.Errorf("the server over its max_tools lists %d tools:\n%s", n, tools.stdout)
		}
		if n := strings.Count(tools.stdout, "\nmcp.few."); n != 10 {
			t.Errorf("the server with exactly max_tools lists %d tools, want 10:\n%s", n, tools.stdout)
		}
		// A list that grows within the cap is taken; past it, the list
		// the server had stays, and the daemon says why.
		for _, name := range []string{"extra_one", "extra_two"} {
			model.set("add "+name, mcpToolCall("mcp_grow_add_tool", fmt.Sprintf(`{"name":%q}`, name)))
		}
		model.set("tool mcp.grow.add_tool", mcpSay("Added."))
		if r := kairo(t, home, "send", "add extra_one"); r.code != 0 || !strings.Contains(r.stdout, "Added.") {
			t.Fatalf("kairo send:\n%s\n%s", r, d.stderr)
		}
		mcpWait(t, d, 30*time.Second, "kairo tools to list mcp.grow.extra_one", func() bool {
			return strings.Contains(kairo(t, home, "tools").stdout, "mcp.grow.extra_one")
		})
		if r := kairo(t, home, "send", "add extra_two"); r.code != 0 || !strings.Contains(r.stdout, "Added.") {
			t.Fatalf("kairo send:\n%s\n%s", r, d.stderr)
		}
		mcpWait(t, d, 30*time.Second, "the daemon to say the grown list is over max_tools", func() bool {
			return regexp.MustCompile(`mcp=grow.*more than 11 tools.*max_tools`).MatchString(d.stderr.String())
		})
		r := kairo(t, home, "tools")
		if n := strings.Count(r.stdout, "\nmcp.grow."); n != 11 || strings.Contains(r.stdout, "mcp.grow.extra_two") {
			t.Errorf("past its max_tools, the server lists %d tools, want the 11 it had:\n%s", n, r.stdout)
		}
		model.set("echo through grow", mcpToolCall("mcp_grow_echo", `{"text":"grow still echoes"}`))
		model.set("tool mcp.grow.echo", mcpSay("It echoed."))
		if r := kairo(t, home, "send", "echo through grow"); r.code != 0 || !strings.Contains(r.stdout, "It echoed.") {
			t.Fatalf("kairo send:\n%s\n%s", r, d.stderr)
		}
		if answer := model.request("tool mcp.grow.echo").Observed; !strings.Contains(answer, "answered: BEGIN DATA \"grow still echoes") {
			t.Errorf("the capped server's tool did not answer:\n%s", answer)
		}
	})

	t.Run("max_result_bytes", func(t *testing.T) {
		// 200 MiB, not 100: a daemon that kept the whole of 100 MiB was
		// seen to rise by only 59 MiB (garbage of the start was returned
		// meanwhile), under the 96 MiB allowed.
		const size = 200 << 20
		before, peakBefore := rssAndPeak(t, d.cmd.Process.Pid)
		model.set("fetch the big one", mcpToolCall("mcp_test_big", fmt.Sprintf(`{"bytes":%d}`, size)))
		model.set("tool mcp.test.big", mcpSay("The big one failed."))
		start := time.Now()
		// Making and moving 100 MB may outlast kairo's 20 s on a loaded
		// machine: the send returns at the call, and the model's next
		// request, once the result is read, is waited for on its own.
		r := kairo(t, home, "send", "--no-follow", "fetch the big one")
		if r.code != 0 || !strings.Contains(r.stdout, "mcp.test.big") {
			t.Fatalf("kairo send:\n%s\n%s", r, d.stderr)
		}
		mcpWait(t, d, 90*time.Second, "the model to read the big result", func() bool {
			return model.request("tool mcp.test.big").Observed != ""
		})
		took := time.Since(start)
		after, peak := rssAndPeak(t, d.cmd.Process.Pid)
		t.Logf("a %d MiB result: RSS %d → %d MiB, peak %d → %d MiB, %s", size>>20, before>>20, after>>20, peakBefore>>20, peak>>20, took.Round(time.Millisecond))
		if after-before > 96<<20 {
			t.Errorf("the daemon's RSS grew by %d MiB reading a %d MiB result", (after-before)>>20, size>>20)
		}
		if peak > max(peakBefore, before+96<<20) {
			t.Errorf("the daemon's peak RSS rose to %d MiB (from %d MiB) reading a %d MiB result", peak>>20, before>>20, size>>20)
		}
		// The model reads why: the cap, named.
		answer := model.request("tool mcp.test.big").Observed
		t.Logf("the model read: %.600s", strings.TrimSpace(answer))
		if !strings.Contains(answer, "tool mcp.test.big") || !strings.Contains(answer, "failed") || !strings.Contains(answer, "max_result_bytes of its [mcp.test] in kairo.toml is 65536") || len(answer) > 8<<10 {
			t.Errorf("the model was not told of the cap (%d bytes):\n%.2000s", len(answer), answer)
		}
		// So does the user, in the task's timeline, which the model's
		// answer closes; an event records it.
		task := regexp.MustCompile(`· task (\S+)`).FindStringSubmatch(r.stdout)
		if task == nil {
			t.Fatalf("kairo send names no task:\n%s", r)
		}
		var show result
		mcpWait(t, d, 30*time.Second, "the task to end", func() bool {
			show = kairo(t, home, "runs", "show", task[1])
			return strings.Contains(show.stdout, "says: The big one failed.")
		})
		if !regexp.MustCompile(`mcp\.test\.big: failed \(.*max_result_bytes of its \[mcp\.test\]`).MatchString(show.stdout) {
			t.Errorf("kairo runs show %s:\n%s", task[1], show)
		}
		ev := kairo(t, home, "events", "replay", "kairo.tool.result")
		if !regexp.MustCompile(`mcp\.test\.big.*max_result_bytes`).MatchString(ev.stdout) || len(ev.stdout) > 64<<10 {
			t.Errorf("no kairo.tool.result names the cap (%d bytes):\n%.2000s", len(ev.stdout), ev.stdout)
		}
		// The control: the same server answers the next call.
		model.set("echo after the big one", mcpToolCall("mcp_test_echo", `{"text":"still serving"}`))
		model.set("tool mcp.test.echo", mcpSay("It echoed."))
		if r := kairo(t, home, "send", "echo after the big one"); r.code != 0 || !strings.Contains(r.stdout, "It echoed.") {
			t.Fatalf("kairo send:\n%s\n%s", r, d.stderr)
		}
		if answer := model.request("tool mcp.test.echo").Observed; !strings.Contains(answer, "answered: BEGIN DATA \"still serving") {
			t.Errorf("the server did not answer after the big result:\n%s", answer)
		}
		mcpControl(t, d, model)
	})

	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d:\n%s", code, d.stderr)
	}
}

// buildMCPServer builds internal/mcp's test server, static, where a sandboxed
// uid of its own may run it.
func buildMCPServer(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "mcp-server")
	build := exec.Command(goTool(), "build", "-o", bin, "../../internal/mcp/testdata/server")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // the grants name no libraries
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the MCP test server: %v\n%s", err, out)
	}
	return bin
}

// mcpControl checks that the policy still answers a plain message.
func mcpControl(t *testing.T, d *upProc, model *mcpModel) {
	t.Helper()
	model.set("are you there?", mcpSay("Still here."))
	if r := kairo(t, d.home, "send", "are you there?"); r.code != 0 || !strings.Contains(r.stdout, "Still here.") {
		t.Fatalf("the control:\n%s\n%s", r, d.stderr)
	}
}

// mcpWait polls done until it holds or wait has passed.
func mcpWait(t *testing.T, d *upProc, wait time.Duration, what string, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(wait); !done(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s\n%s", wait, what, d.stderr)
		}
	}
}

// rssAndPeak is the resident memory of process pid and its peak, in bytes.
func rssAndPeak(t *testing.T, pid int) (rss, peak int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	if rss == 0 || peak == 0 {
		t.Fatalf("no VmRSS or VmHWM in /proc/%d/status", pid)
	}
	return rss, peak
}

// mcpModel is a real HTTP server speaking OpenAI's chat-completions
// protocol that answers each request by what it newly observes: the first
// cue set that the observations hold picks the answer. Each request is
// kept under the cue that answered it.
type mcpModel struct {
	mu       sync.Mutex
	cues     []string
	answers  map[string]string
	requests map[string]mcpRequest
}

// mcpRequest is what a request showed the model.
type mcpRequest struct {
	Observed string   // the prompt's new observations
	Tools    []string // the names of the tools offered
}

func (r mcpRequest) offers(name string) bool {
	for _, n := range r.Tools {
		if n == name {
			return true
		}
	}
	return false
}

func newMCPModel() *mcpModel {
	return &mcpModel{answers: map[string]string{}, requests: map[string]mcpRequest{}}
}

// set answers a request that observes cue with msg, an assistant message
// (JSON). A cue in quotes is a user's message; any other is matched as
// written.
func (m *mcpModel) set(cue, msg string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.answers[cue]; !ok {
		m.cues = append(m.cues, cue)
	}
	m.answers[cue] = msg
	delete(m.requests, cue)
}

// request is the last request that cue answered.
func (m *mcpModel) request(cue string) mcpRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests[cue]
}

func (m *mcpModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	// Only what is new: the task list above repeats earlier calls.
	_, observed, _ := strings.Cut(req.prompt(), "New observations")
	seen := mcpRequest{Observed: observed, Tools: req.tools()}
	msg := `{"content": "{\"action\": {\"type\": \"noop\"}}"}`
	m.mu.Lock()
	for _, cue := range m.cues {
		if said(observed, cue) || strings.Contains(observed, cue+" ") {
			msg = m.answers[cue]
			m.requests[cue] = seen
			break
		}
	}
	m.mu.Unlock()
	var out map[string]any
	json.Unmarshal([]byte(msg), &out)
	out["role"] = "assistant"
	finish := "stop"
	if _, ok := out["tool_calls"]; ok {
		finish = "tool_calls"
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl", "object": "chat.completion", "model": "scripted",
		"choices": []map[string]any{{"index": 0, "message": out, "finish_reason": finish}},
	})
}

// mcpToolCall is an assistant message calling the tool offered as name, with
// args (JSON).
func mcpToolCall(name, args string) string {
	call, _ := json.Marshal(map[string]any{"tool_calls": []map[string]any{{
		"id": "call_1", "type": "function", "function": map[string]any{"name": name, "arguments": args},
	}}})
	return string(call)
}

// mcpSay is an assistant message that says text and closes the task.
func mcpSay(text string) string {
	content, _ := json.Marshal(map[string]any{"action": map[string]any{"type": "say", "text": text, "done": true}})
	msg, _ := json.Marshal(map[string]any{"content": string(content)})
	return string(msg)
}
