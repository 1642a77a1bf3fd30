package mcp

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
)

func toolNames(tools []abi.Tool) []string {
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return names
}

func tool(tools []abi.Tool, name string) (abi.Tool, bool) {
	for _, t := range tools {
		if t.Name == name {
			return t, true
		}
	}
	return abi.Tool{}, false
}

func TestToolsListedWithSchemas(t *testing.T) {
	e := newEnv(t, nil)
	// Two tools a page: the list takes five pages.
	s := e.connect(stdio("-page-size", "2"))
	want := []string{"add", "add_tool", "crash", "echo", "fail", "picture", "pid", "read_file", "slow", "spawn_child"}
	if got := toolNames(s.Tools()); !slices.Equal(got, want) {
		t.Fatalf("tools = %v, want %v", got, want)
	}
	echo, _ := tool(s.Tools(), "echo")
	if echo.Description != "Says text back." {
		t.Errorf("echo description = %q", echo.Description)
	}
	if echo.Parameters["type"] != "object" {
		t.Errorf("echo parameters type = %v, want object", echo.Parameters["type"])
	}
	props, _ := echo.Parameters["properties"].(map[string]any)
	text, _ := props["text"].(map[string]any)
	if text["type"] != "string" || text["description"] != "what to say back" {
		t.Errorf("echo parameter text = %v, want a string with its description; parameters: %v", text, echo.Parameters)
	}
	add, _ := tool(s.Tools(), "add")
	props, _ = add.Parameters["properties"].(map[string]any)
	if a, _ := props["a"].(map[string]any); a["type"] != "number" {
		t.Errorf("add parameter a = %v, want a number", props["a"])
	}
	// A tool without arguments still has an object schema.
	pic, _ := tool(s.Tools(), "picture")
	if pic.Parameters["type"] != "object" {
		t.Errorf("picture parameters = %v, want an object schema", pic.Parameters)
	}
}

func TestCall(t *testing.T) {
	e := newEnv(t, nil)
	s := e.connect(stdio())
	for _, c := range []struct {
		tool, args string
		want       string // the content, or a part of it for a tool error
		isError    bool
	}{
		{"echo", `{"text":"hello"}`, "hello", false},
		{"add", `{"a":2,"b":3.5}`, "5.5", false},
		{"picture", "", "a picture:\n[image: image/png, 4 bytes]", false},
		{"fail", `{"message":"disk on fire"}`, "disk on fire", true},
		{"echo", `{"text":`, "the arguments of echo: not a JSON object", true},
		{"echo", `["hello"]`, "not a JSON object", true},
		{"no_such_tool", `{}`, "no_such_tool", true},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, isErr, err := s.Call(ctx, c.tool, c.args)
		cancel()
		if err != nil {
			t.Errorf("%s %s: err = %v, want a result", c.tool, c.args, err)
			continue
		}
		if isErr != c.isError {
			t.Errorf("%s %s: isError = %v, want %v (content %q)", c.tool, c.args, isErr, c.isError, out)
		}
		if (!c.isError && out != c.want) || (c.isError && !strings.Contains(out, c.want)) {
			t.Errorf("%s %s: content = %q, want %q", c.tool, c.args, out, c.want)
		}
	}
}

// A server that dies in a call: the call fails with how it died, its
// process group is gone, and the next call starts a new server.
func TestCrashRestartsLeavingNoOrphan(t *testing.T) {
	e := newEnv(t, nil)
	s := e.connect(stdio())
	old := pidOf(t, s)
	child, _ := strconv.Atoi(call(t, s, "spawn_child", ""))
	if !alive(child) {
		t.Fatalf("child %d is not running", child)
	}

	_, _, err := s.Call(context.Background(), "crash", `{"code":3}`)
	if err == nil {
		t.Fatal("a call whose server died returned no error")
	}
	for _, want := range []string{"exited with code 3", "crashing on purpose with code 3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	start := time.Now()
	pid := pidOf(t, s)
	if pid == old {
		t.Fatalf("the server was not started again: pid %d", pid)
	}
	if d := time.Since(start); d < minBackoff/2 {
		t.Errorf("the restart came after %s, before the backoff of %s", d, minBackoff)
	}
	if alive(old) || alive(child) {
		t.Errorf("after the restart: old server %d alive %v, its child %d alive %v; want both gone", old, alive(old), child, alive(child))
	}
	e.event("kairo.process.exited", old)
	e.event("kairo.process.spawned", pid)
	if got := call(t, s, "echo", `{"text":"again"}`); got != "again" {
		t.Errorf("echo after the restart = %q", got)
	}
}

// Close escalates only as far as the server makes it: a server that ends
// on stdin's close ends there; one that ignores it gets SIGTERM; one that
// ignores SIGTERM too gets SIGKILL, with its whole process group.
func TestCloseEscalates(t *testing.T) {
	const grace = 300 * time.Millisecond
	for _, c := range []struct {
		name        string
		flags       []string
		signal      string // how the server ended; "" for an exit
		min, max    time.Duration
		spawnsChild bool
	}{
		{"stdin", nil, "", 0, grace, false},
		{"term", []string{"-ignore-stdin-eof"}, "SIGTERM", grace, 2 * grace, false},
		{"kill", []string{"-ignore-stdin-eof", "-ignore-term"}, "SIGKILL", 2 * grace, 3 * grace, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, nil)
			cfg := stdio(c.flags...)
			cfg.ShutdownGrace = grace
			s := e.connect(cfg)
			p := process(s)
			child := 0
			if c.spawnsChild {
				child, _ = strconv.Atoi(call(t, s, "spawn_child", ""))
			}
			start := time.Now()
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			info := p.Info()
			if info.Status == abi.ProcessRunning || info.Signal != c.signal {
				t.Errorf("server ended %s by signal %q, want signal %q", info.Status, info.Signal, c.signal)
			}
			if c.signal == "" && (info.ExitCode == nil || *info.ExitCode != 0) {
				t.Errorf("server exit code = %v, want 0", info.ExitCode)
			}
			if took < c.min || took > c.max+time.Second {
				t.Errorf("Close took %s, want between %s and %s", took, c.min, c.max)
			}
			if alive(info.PID) {
				t.Errorf("server %d still runs", info.PID)
			}
			if child != 0 && alive(child) {
				t.Errorf("the server's child %d still runs", child)
			}
			ev := e.event("kairo.process.exited", info.PID)
			if sig, _ := ev["signal"].(string); sig != c.signal {
				t.Errorf("exited event signal = %q, want %q", sig, c.signal)
			}
		})
	}
}

// Close's context cuts the graces short: a server that ignores stdin's close
// and SIGTERM, with long graces, is killed at once when the context ends.
func TestCloseOnContextCancel(t *testing.T) {
	e := newEnv(t, nil)
	cfg := stdio("-ignore-stdin-eof", "-ignore-term")
	cfg.ShutdownGrace = time.Minute
	s := e.connect(cfg)
	p := process(s)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.Close(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want the context's deadline", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close took %s with a context of 100ms", took)
	}
	if info := p.Info(); info.Signal != "SIGKILL" || alive(info.PID) {
		t.Errorf("server %d: status %s, signal %q; want killed by SIGKILL", info.PID, info.Status, info.Signal)
	}
	if _, _, err := s.Call(context.Background(), "echo", `{"text":"x"}`); !errors.Is(err, ErrClosed) {
		t.Errorf("call after Close = %v, want ErrClosed", err)
	}
}

// A call whose context ends returns at once; the server lives on. A call
// in flight when the Server closes ends with ErrClosed.
func TestCallContext(t *testing.T) {
	e := newEnv(t, nil)
	s := e.connect(stdio())
	pid := pidOf(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := s.Call(ctx, "slow", `{"ms":20000}`)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow call = %v, want the context's deadline", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the canceled call took %s", took)
	}
	if again := pidOf(t, s); again != pid {
		t.Errorf("the server changed from %d to %d after a canceled call", pid, again)
	}

	done := make(chan error, 1)
	go func() {
		_, _, err := s.Call(context.Background(), "slow", `{"ms":20000}`)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // the call is in flight
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("call in flight at Close = %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a call in flight did not end with Close")
	}
}

func TestToolsChanged(t *testing.T) {
	e := newEnv(t, nil)
	s := e.connect(stdio())
	changed := s.ToolsChanged()
	call(t, s, "add_tool", `{"name":"hello"}`)
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatalf("no change of the tool list within 10s; tools: %v", toolNames(s.Tools()))
	}
	if _, ok := tool(s.Tools(), "hello"); !ok {
		t.Fatalf("tools = %v, want hello among them", toolNames(s.Tools()))
	}
	if got := call(t, s, "hello", ""); got != "hello" {
		t.Errorf("hello = %q", got)
	}
}

// A server that dies before it answers the handshake: Connect says how, and
// leaves nothing running.
func TestConnectFails(t *testing.T) {
	e := newEnv(t, nil)
	cfg := ServerConfig{Name: "broken", Command: []string{"/bin/sh", "-c", "echo 'no such config' >&2; exit 7"}}
	_, err := Connect(context.Background(), e.kernel, cfg, quiet)
	if err == nil {
		t.Fatal("Connect to a server that exits succeeded")
	}
	for _, want := range []string{`mcp server "broken"`, "exited with code 7", "no such config"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	_, err = Connect(context.Background(), e.kernel, ServerConfig{Name: "missing", Command: []string{"/no/such/server"}}, quiet)
	if err == nil || !strings.Contains(err.Error(), "/no/such/server") {
		t.Errorf("Connect to a missing program = %v, want an error naming it", err)
	}
}
