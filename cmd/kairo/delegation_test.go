package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kairo-os/kairo/internal/llmscript"
)

// One agent asks another (agent.ask) through a real kairo up: what the
// asked agent does for it is held to both agents' grants, ends with the
// asking task, survives a crash as an interrupted task on each side, and
// works the same for a model that asks as for the rules. Each denial
// beside its control.

// writeConfig writes toml as home's kairo.toml.
func writeConfig(t *testing.T, home, toml string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
}

// newestRun is the newest run loop of agent with goal in `kairo runs
// --json`; ok is false when there is none.
func newestRun(t *testing.T, home, agent, goal string) (runObj, bool) {
	t.Helper()
	for _, o := range runList(t, home) {
		if o.Agent == agent && o.Goal == goal {
			return o, true
		}
	}
	return runObj{}, false
}

// loopActions are the kairo.agent.action events of run loop id, as `kairo
// runs show --json` prints them.
func loopActions(t *testing.T, home, id string) []logged {
	t.Helper()
	r := kairo(t, home, "runs", "show", "--json", id)
	if r.code != 0 {
		t.Fatalf("runs show --json %s:\n%s", id, r)
	}
	var out []logged
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev logged
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("runs show --json line %q: %v", line, err)
		}
		if ev.Type == "kairo.agent.action" {
			out = append(out, ev)
		}
	}
	return out
}

// grantsOf is the for.grants the tool call of tool in run loop id records:
// whose grants it ran under ("" when it records none).
func grantsOf(t *testing.T, home, id, tool string) string {
	t.Helper()
	for _, ev := range loopActions(t, home, id) {
		if ev.Data["tool"] != tool {
			continue
		}
		f, _ := ev.Data["for"].(map[string]any)
		g, _ := f["grants"].(string)
		return g
	}
	t.Fatalf("run loop %s has no tool call of %s", id, tool)
	return ""
}

// TestDelegationHostsHeldToBoth: the agent net may reach a server, the
// default agent may reach nothing. Asked by the default agent, net's curl
// holds no more than both grants, so it cannot connect; asked directly
// (the first control) it reaches the server. With acts_for = ["default"]
// (the second control) it acts for the default agent with its own grants:
// the ask reaches the server, and the curl call records grants "own".
func TestDelegationHostsHeldToBoth(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "hello from the server")
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	curl := "run curl -sS http://127.0.0.1:" + port + "/"
	config := func(actsFor string) string {
		return fmt.Sprintf(`
[agent.grants]
commands = true
hosts = []

[agents.net]
policy = "rules"
acts_for = [%s]
[agents.net.grants]
commands = true
hosts = ["127.0.0.1:%s"]
`, actsFor, port)
	}
	home := t.TempDir()
	writeConfig(t, home, config(""))
	d := startUp(t, home)
	command := strings.TrimPrefix(curl, "run ")

	// ask sends "ask net: …" and returns what the default agent said and
	// net's run loop that answered.
	ask := func() (result, runObj) {
		t.Helper()
		r := kairo(t, home, "send", "ask net: "+curl)
		asked, ok := newestRun(t, home, "net", curl)
		if r.code != 0 || !ok {
			t.Fatalf("ask net:\n%s\nnet's run loop found: %v", r, ok)
		}
		return r, asked
	}
	r, asked := ask()
	if !strings.Contains(r.stdout, "net: `"+command+"` failed") || !strings.Contains(r.stdout, "curl: (7) ") || hits.Load() != 0 {
		t.Fatalf("asked by an agent without hosts, net reached the server (%d requests) or did not say curl could not connect:\n%s", hits.Load(), r)
	}
	if g := grantsOf(t, home, asked.ID, "process.spawn"); g != "intersection" {
		t.Errorf("net's curl for the default agent records grants %q, want intersection", g)
	}

	// Control 1: asked directly, net reaches the server with its own grants.
	r = kairo(t, home, "send", "@net "+curl)
	direct, _ := newestRun(t, home, "net", curl)
	if r.code != 0 || !strings.Contains(r.stdout, "hello from the server") || hits.Load() != 1 {
		t.Fatalf("asked directly, net did not reach the server (%d requests):\n%s", hits.Load(), r)
	}
	if direct.ID == asked.ID {
		t.Fatalf("the direct message ran in the asked run loop %s", asked.ID)
	}
	if g := grantsOf(t, home, direct.ID, "process.spawn"); g != "" {
		t.Errorf("net's own curl records grants %q, want none: it acts for no one", g)
	}

	// Control 2: acting for the default agent, net holds its own grants.
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d\n%s", code, d.stderr)
	}
	writeConfig(t, home, config(`"default"`))
	d = startUp(t, home)
	r, asked = ask()
	if !strings.Contains(r.stdout, "net: `"+command+"` finished") || !strings.Contains(r.stdout, "hello from the server") || hits.Load() != 2 {
		t.Fatalf("acting for the default agent, net did not reach the server (%d requests):\n%s", hits.Load(), r)
	}
	if g := grantsOf(t, home, asked.ID, "process.spawn"); g != "own" {
		t.Errorf("net's curl acting for the default agent records grants %q, want own", g)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d\n%s", code, d.stderr)
	}
}

// askSleep has the default agent ask ops to run `sleep secs`, and returns
// once it runs: the asking run loop and the asked one.
func askSleep(t *testing.T, home string, secs int) (asker, asked runObj) {
	t.Helper()
	cmd := "sleep " + strconv.Itoa(secs)
	goal := "ask ops: run " + cmd
	if r := kairo(t, home, "send", "--no-follow", goal); r.code != 0 || !strings.Contains(r.stdout, "agent.ask") {
		t.Fatalf("%s:\n%s", goal, r)
	}
	until(t, "ops running `"+cmd+"`", func() bool {
		asked, _ = newestRun(t, home, "ops", "run "+cmd)
		return asked.InProgress == 1 && len(sleepers(secs)) > 0
	})
	asker, _ = newestRun(t, home, "default", goal)
	if asker.Status != "open" || asker.InProgress != 1 {
		t.Fatalf("the asking run loop %+v; want open, its ask in progress", asker)
	}
	return asker, asked
}

// TestDelegationEnds: an asked run loop ends with the one that asked.
// Canceled: stopping the default agent's task cancels ops's run loop and
// its process. Crashed: after kill -9 both run loops are interrupted;
// "again" in the asking task asks again, and a new run loop of ops runs
// it; the control, "again" in the asked task, runs its command again
// there.
func TestDelegationEnds(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeConfig(t, home, `
[agents.ops]
policy = "rules"
[agents.ops.grants]
commands = true
`)
	d := startUp(t, home)

	t.Run("canceled with the asker", func(t *testing.T) {
		asker, asked := askSleep(t, home, 67)
		if r := kairo(t, home, "send", "stop"); r.code != 0 {
			t.Fatalf("stop:\n%s", r)
		}
		until(t, "both run loops ended", func() bool {
			runs := runsJSON(t, home)
			return runs[asker.Goal].EndedAt != "" && runs[asked.Goal].EndedAt != ""
		})
		runs := runsJSON(t, home)
		if a, b := runs[asker.Goal], runs[asked.Goal]; a.Status != "canceled" || b.Status != "canceled" || b.ID != asked.ID {
			t.Fatalf("the asking run loop %+v, the asked one %+v; want both canceled", a, b)
		}
		until(t, "`sleep 67` gone", func() bool { return len(sleepers(67)) == 0 })
	})

	t.Run("interrupted by a crash", func(t *testing.T) {
		asker, asked := askSleep(t, home, 68)
		d.kill()
		d = startUp(t, home)
		until(t, "both run loops interrupted", func() bool {
			runs := runsJSON(t, home)
			return runs[asker.Goal].Status == "interrupted" && runs[asked.Goal].Status == "interrupted"
		})

		// "again" in the asking task asks again: a new run loop of ops.
		if r := kairo(t, home, "send", "--no-follow", "--run", asker.ID, "again"); r.code != 0 || !strings.Contains(r.stdout, `agent.ask {"agent":"ops","text":"run sleep 68"}`) {
			t.Fatalf("again in the asking task:\n%s", r)
		}
		var again runObj
		until(t, "a new run loop of ops running `sleep 68`", func() bool {
			again, _ = newestRun(t, home, "ops", asked.Goal)
			if again.ID != asked.ID && again.EndedAt != "" {
				t.Fatalf("the new run loop of ops ended at once: %+v\n%s", again, kairo(t, home, "runs", "show", again.ID).stdout)
			}
			return again.ID != asked.ID && again.InProgress == 1
		})
		if s := runsJSON(t, home)[asker.Goal]; s.ID != asker.ID || s.Status != "open" || s.InProgress != 1 {
			t.Fatalf("the asking task %+v; want open, asking again", s)
		}
		if s := runsJSON(t, home)[asked.Goal]; s.ID != asked.ID || s.Status != "interrupted" {
			t.Fatalf("the first asked run loop %+v; want still interrupted, left to the person", s)
		}

		// The control: "again" in the asked task runs its command again
		// there. The message names no agent: one sent into a run loop goes
		// to the agent whose run loop it is.
		if r := kairo(t, home, "send", "--no-follow", "--run", asked.ID, "again"); r.code != 0 || !strings.Contains(r.stdout, `process.spawn {"command":"sleep 68"}`) {
			t.Fatalf("again in the asked task:\n%s", r)
		}
		until(t, "the asked run loop running `sleep 68` again", func() bool {
			s := runsJSON(t, home)[asked.Goal]
			return s.ID == asked.ID && s.Status == "open" && s.InProgress == 1
		})
		if code := d.stop(); code != 0 {
			t.Fatalf("kairo up exited %d\n%s", code, d.stderr)
		}
	})
}

// recordingModel is a scripted model (llmscript) that keeps the body of
// each chat request, as the daemon sent it.
type recordingModel struct {
	model *llmscript.Server
	mu    sync.Mutex
	reqs  []chatRequest
}

func (m *recordingModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := chatRequest{body: string(body)}
	json.Unmarshal(body, &req)
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	m.model.ServeHTTP(w, r)
}

// policyRequests are the requests of the LLM policy, oldest first: not the
// short-term memory's summaries.
func (m *recordingModel) policyRequests() []chatRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []chatRequest
	for _, r := range m.reqs {
		if len(r.Messages) > 0 && !strings.Contains(r.Messages[0].Content, "running summary") {
			out = append(out, r)
		}
	}
	return out
}

// offers reports whether the request whose last message is prompt offered
// the tool name.
func (m *recordingModel) offers(prompt, name string) bool {
	for _, r := range m.policyRequests() {
		if r.prompt() == prompt {
			return slices.Contains(r.tools(), name)
		}
	}
	return false
}

// delegatingModel is a model that, told "delegate the echo", asks ops to
// run it when it is offered agent_ask, and says what came of it.
func delegatingModel() *recordingModel {
	m := &recordingModel{}
	m.model = &llmscript.Server{Think: llmscript.Summarizing(func(n int, system, prompt string) map[string]any {
		s := llmscript.Read(prompt)
		task := s.Task("delegate the echo")
		switch last := s.Last(); {
		case last.Text == "delegate the echo" && m.offers(prompt, "agent_ask"):
			return llmscript.Calls("agent_ask", map[string]any{"agent": "ops", "text": "run echo from-llm", "answers": last.Label})
		case last.Text == "delegate the echo":
			return llmscript.Actions(map[string]any{"type": "say", "text": "There is no agent to ask.", "done": true, "answers": last.Label})
		case task != nil && strings.Contains(prompt, "tool agent.ask in task "+task.ID+" answered:"):
			return llmscript.Actions(map[string]any{"type": "say", "text": "ops has run it.", "done": true, "runLoopId": task.ID})
		}
		return llmscript.Noop()
	})}
	return m
}

// TestDelegationFromTheModel: the default agent runs the LLM policy
// against a scripted model; ops runs the rules. Offered agent_ask, the
// model asks ops to run `echo from-llm`; its next request holds ops's
// answer with the command's output, and its closing words reach kairo
// send. The control: with the default agent alone, the model is offered
// no agent_ask.
func TestDelegationFromTheModel(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	m := delegatingModel()
	srv := httptest.NewServer(m)
	defer srv.Close()
	writeConfig(t, home, llmConfig(t, srv.URL)+`
[agents.ops]
policy = "rules"
description = "runs commands"
[agents.ops.grants]
commands = true
`)
	d := startUp(t, home)
	r := kairo(t, home, "send", "delegate the echo")
	if r.code != 0 || !strings.Contains(r.stdout, `agent.ask {"agent":"ops","text":"run echo from-llm"}`) || !strings.Contains(r.stdout, "ops has run it.") {
		t.Fatalf("delegate the echo:\n%s\n%s", r, d.stderr)
	}
	reqs := m.policyRequests()
	if len(reqs) < 2 {
		t.Fatalf("%d requests of the policy, want the ask and its answer", len(reqs))
	}
	first, second := reqs[0], reqs[1]
	if !slices.Contains(first.tools(), "agent_ask") {
		t.Fatalf("the first request offers %v, no agent_ask", first.tools())
	}
	// Its observation of the result, with the output of ops's echo (the
	// task's own lines hold the asked text "run echo from-llm" too).
	var answered string
	for _, line := range strings.Split(second.prompt(), "\n") {
		if strings.HasPrefix(line, "- tool agent.ask in task ") {
			answered = line
		}
	}
	if !strings.Contains(answered, " answered: ") || !strings.Contains(answered, `It printed:\n`+"```"+`\nfrom-llm\n`) {
		t.Fatalf("the second request does not hold ops's answer with the command's output:\n%s", second.body)
	}
	if ops, _ := newestRun(t, home, "ops", "run echo from-llm"); ops.Status != "done" {
		t.Fatalf("ops's run loop %+v; want done", ops)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d\n%s", code, d.stderr)
	}

	// The control: alone, the default agent's model is offered no agent_ask.
	alone := delegatingModel()
	srv2 := httptest.NewServer(alone)
	defer srv2.Close()
	writeConfig(t, home, llmConfig(t, srv2.URL))
	d = startUp(t, home)
	if r := kairo(t, home, "send", "delegate the echo"); r.code != 0 || !strings.Contains(r.stdout, "There is no agent to ask.") {
		t.Fatalf("delegate the echo, alone:\n%s\n%s", r, d.stderr)
	}
	reqs = alone.policyRequests()
	if len(reqs) == 0 {
		t.Fatal("alone, the model got no request")
	}
	if offered := reqs[0].tools(); slices.Contains(offered, "agent_ask") || !slices.Contains(offered, "process_spawn") {
		t.Fatalf("alone, the first request offers %v; want process_spawn and no agent_ask", offered)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d\n%s", code, d.stderr)
	}
}
