package mcp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi/modelname"
)

// A tool's result is read up to the server's cap: a message past twice
// max_result_bytes is not kept but answered with an error at once, one
// under it whose text is past the cap fails the call too, each naming the
// cap; the server goes on serving. The control: a result under the cap.
func TestResultCap(t *testing.T) {
	dir := t.TempDir()
	for name, size := range map[string]int{"huge": 8 << 20, "over": 100 << 10, "fine": 10 << 10} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Repeat("r", size)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnv(t, nil)
	cfg := stdio()
	cfg.MaxResultBytes = 64 << 10
	s := e.connect(cfg)
	for _, name := range []string{"huge", "over"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		start := time.Now()
		out, isErr, err := s.Call(ctx, "read_file", fmt.Sprintf(`{"path":%q}`, filepath.Join(dir, name)))
		cancel()
		if err != nil || !isErr || !strings.Contains(out, "max_result_bytes") || len(out) > 1000 {
			t.Fatalf("%s: %.200q, tool error %v, err %v; want a tool error naming the cap", name, out, isErr, err)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s: the call took %s", name, took)
		}
	}
	if out := call(t, s, "read_file", fmt.Sprintf(`{"path":%q}`, filepath.Join(dir, "fine"))); len(out) != 10<<10 {
		t.Fatalf("fine: %d bytes", len(out))
	}
	if got := call(t, s, "echo", `{"text":"still here"}`); got != "still here" {
		t.Fatalf("echo after the cap = %q", got)
	}
}

// A server that lists more tools than max_tools fails to start, saying
// so; the control, the default cap, takes the same server.
func TestToolCountCap(t *testing.T) {
	e := newEnv(t, nil)
	cfg := stdio("-page-size", "2")
	cfg.MaxTools = 5
	_, err := Connect(context.Background(), e.kernel, cfg, quiet)
	if err == nil || !strings.Contains(err.Error(), "more than 5 tools") || !strings.Contains(err.Error(), "max_tools") {
		t.Fatalf("Connect = %v, want an error naming max_tools", err)
	}
	s := e.connect(stdio("-page-size", "2"))
	if n := len(s.Tools()); n != 10 {
		t.Fatalf("%d tools under the default cap", n)
	}
}

// The attack of issue 15: a server lists two tools whose names share their
// first 70 characters. Each is offered to the model under a name of its
// own, OpenAI-valid, the same every time.
func TestLongToolNames(t *testing.T) {
	e := newEnv(t, nil)
	s := e.connect(stdio())
	prefix := strings.Repeat("n", 70)
	for _, suffix := range []string{"_one", "_two"} {
		changed := s.ToolsChanged()
		call(t, s, "add_tool", fmt.Sprintf(`{"name":%q}`, prefix+suffix))
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatal("no change of the tool list")
		}
	}
	var names []string
	for _, tool := range s.Tools() {
		names = append(names, "mcp."+s.Name()+"."+tool.Name)
	}
	got := modelname.Assign(names)
	a, b := got["mcp.test."+prefix+"_one"], got["mcp.test."+prefix+"_two"]
	if a == "" || a == b || !modelname.Valid(a) || !modelname.Valid(b) {
		t.Fatalf("offered as %q and %q", a, b)
	}
	if got["mcp.test.echo"] != "mcp_test_echo" {
		t.Errorf("echo offered as %q", got["mcp.test.echo"])
	}
}

// The same cap over streamable HTTP: the answer is cut at the cap and the
// call fails; the control, a small result, and the next call work.
func TestResultCapHTTP(t *testing.T) {
	dir := t.TempDir()
	big, small := filepath.Join(dir, "big"), filepath.Join(dir, "small")
	os.WriteFile(big, []byte(strings.Repeat("h", 8<<20)), 0o644)
	os.WriteFile(small, []byte("small"), 0o644)
	h, _ := serveHTTP(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Connect(ctx, nil, ServerConfig{Name: "web", URL: h.URL, MaxResultBytes: 64 << 10}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	out, isErr, err := s.Call(ctx, "read_file", fmt.Sprintf(`{"path":%q}`, big))
	if (err == nil && !isErr) || !strings.Contains(fmt.Sprint(out, err), "max_result_bytes") {
		t.Fatalf("big: %.200q, tool error %v, err %v; want an error naming the cap", out, isErr, err)
	}
	if got := call(t, s, "read_file", fmt.Sprintf(`{"path":%q}`, small)); got != "small" {
		t.Fatalf("small = %q", got)
	}
}
