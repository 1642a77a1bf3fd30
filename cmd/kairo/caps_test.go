package main

import (
	"github.com/kairo-os/kairo/abi"

	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The model cases of issue 15 against a real `kairo up` and a real HTTP
// server speaking OpenAI's protocol: a 100 MB answer is cut at [llm]
// max_response_bytes, the user is told, the daemon's memory does not
// follow, and the next message is answered (the control); an answer of
// 1000 process_spawn calls runs at most [agent] max_tool_calls of them and
// the model reads why the rest did not run.
func TestModelCapsUp(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	var calls []string
	for i := range 1000 {
		calls = append(calls, fmt.Sprintf(`{"id":"c%d","type":"function","function":{"name":"process_spawn","arguments":"{\"command\":\"true\"}"}}`, i))
	}
	// The model answers by what it is shown: the message "tell me
	// everything" with 100 MB, "run everything" with 1000 calls, "are you
	// there?" with a closing say, anything else (the tasks' exits) with a
	// noop.
	var mu sync.Mutex
	var prompts []string
	var summaries atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		prompt := req.Messages[len(req.Messages)-1].Content
		w.Header().Set("Content-Type", "application/json")
		answer := func(msg string) {
			io.WriteString(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":`+msg+`,"finish_reason":"stop"}]}`)
		}
		say := func(text string) {
			answer(`{"role":"assistant","content":` + strconv.Quote(`{"action": {"type": "say", "text": "`+text+`", "done": true}}`) + `}`)
		}
		if strings.Contains(req.Messages[0].Content, "running summary") {
			// The short-term memory's summaries: counted, answered aside.
			summaries.Add(1)
			answer(`{"role":"assistant","content":"a summary"}`)
			return
		}
		mu.Lock()
		prompts = append(prompts, prompt)
		mu.Unlock()
		switch {
		case said(prompt, "tell me everything"):
			io.WriteString(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"`)
			piece := strings.Repeat("A", 1<<20)
			for range 100 {
				if _, err := io.WriteString(w, piece); err != nil {
					return
				}
			}
			io.WriteString(w, `"},"finish_reason":"stop"}]}`)
		case said(prompt, "run everything"):
			answer(`{"role":"assistant","content":null,"tool_calls":[` + strings.Join(calls, ",") + `]}`)
		case said(prompt, "are you there?"):
			say("Still here.")
		default: // exits of a task already answered
			answer(`{"role":"assistant","content":"{\"action\": {\"type\": \"noop\"}}"}`)
		}
	}))
	defer srv.Close()
	toml := fmt.Sprintf(`
[agent]
policy = "llm"
max_tool_calls = 16
[llm]
base_url = %q
model = "scripted"
stream = false
max_retries = 0
[plugins.llm]
# Decoding 1000 tool calls in wasm on a loaded machine may pass the
# drop-in default; the test is about the runtime's cap, not that deadline.
deadline = "3s"
`, srv.URL+"/v1") + grantAsManifest(t, "llm")
	if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startUp(t, home)
	before := rssOf(t, d.cmd.Process.Pid)

	r := kairo(t, home, "send", "--no-follow", "run everything")
	if r.code != 0 || !strings.Contains(r.stdout, abi.MethodProcessSpawn) {
		t.Fatalf("kairo send:\n%s\n%s", r, d.stderr)
	}
	// The model is told why the rest did not run.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		told := false
		for _, p := range prompts {
			told = told || strings.Contains(p, "refused: at most 16 tool calls per decision") && strings.Contains(p, "984 call(s) were not run")
		}
		mu.Unlock()
		if told {
			break
		}
		if time.Now().After(deadline) {
			ev := kairo(t, home, "events", "replay", ">")
			t.Fatalf("the model was never told of the refusal:\n%s\nevents:\n%.5000s", d.stderr, ev.stdout)
		}
	}
	r = kairo(t, home, "events", "replay", "kairo.tool.invoke", "--json")
	if got := strings.Count(r.stdout, `"kairo.tool.invoke"`); got == 0 || got > 16 {
		t.Fatalf("%d tool calls ran, want at most 16:\n%.2000s", got, r.stdout)
	}
	r = kairo(t, home, "send", "--no-follow", "tell me everything")
	if r.code != 0 || !strings.Contains(r.stdout, "max_response_bytes") {
		t.Fatalf("kairo send:\n%s\n%s", r, d.stderr)
	}
	if grew := rssOf(t, d.cmd.Process.Pid) - before; grew > 96<<20 {
		t.Errorf("the daemon's RSS grew by %d MiB reading a 100 MB answer", grew>>20)
	}
	r = kairo(t, home, "events", "replay", "kairo.llm.response", "--json")
	recorded := false
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.Contains(line, "max_response_bytes") {
			recorded = true
			if len(line) > 8<<10 {
				t.Errorf("the recorded response is %d bytes", len(line))
			}
		}
	}
	if !recorded {
		t.Fatalf("no recorded response names the cap:\n%.2000s", r.stdout)
	}
	r = kairo(t, home, "send", "are you there?")
	if r.code != 0 || !strings.Contains(r.stdout, "Still here.") {
		t.Fatalf("the control:\n%s\n%s", r, d.stderr)
	}

	if n := summaries.Load(); n > 3 {
		t.Errorf("%d summaries of the short-term memory for one burst of 16 exits", n)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d:\n%s", code, d.stderr)
	}
}

// said reports whether a prompt shows the user saying text.
func said(prompt, text string) bool {
	return regexp.MustCompile(`the user says( in task \S+)?: ` + regexp.QuoteMeta(strconv.Quote(text))).MatchString(prompt)
}

// rssOf is the resident memory of process pid, in bytes.
func rssOf(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
