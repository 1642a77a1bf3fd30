package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/host/agent"
	"github.com/kairo-os/kairo/host/tools"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/ipc"
)

// The agent runtime's tool calls are the registry's: the same fields.
var _ = tools.Call(agent.ToolCall{})

// kairo tools lists what tools.list serves: each tool with its source and
// grants, and one tool whole when named.
func TestToolsCommand(t *testing.T) {
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := bus.OpenSQLite(filepath.Join(dir, "events.db"), bus.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := bus.New(store, bus.Options{})
	k := kernel.New(b, kernel.Options{Logger: quiet})
	defer func() { k.Close(); b.Close() }()
	skill := filepath.Join(dir, "wc", "skill.toml")
	os.MkdirAll(filepath.Dir(skill), 0o700)
	if err := os.WriteFile(skill, []byte("[skill]\nname = \"wc\"\ndescription = \"count lines\"\ncommand = [\"/usr/bin/wc\", \"-l\", \"{file}\"]\n[params.file]\n[fs]\nread = [\"/srv\"]\nexec = [\"/usr/bin/wc\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reg, err := tools.New(tools.Config{Kernel: k, Skills: map[string]string{"wc": skill}, ResultDir: filepath.Join(dir, "results"), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	reg.Register()
	sock := filepath.Join(dir, "k.sock")
	srv, err := ipc.Listen(k, ipc.ServerOptions{Path: sock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	defer srv.Close()
	t.Setenv("KAIRO_SOCKET", sock)

	out := captureStdout(t, func() error { return runTools(context.Background(), nil) })
	for _, want := range []string{"NAME", "process.spawn", "kernel", "only the processes the agent spawned", "skill.wc", "skill   fs.read /srv; fs.exec /usr/bin/wc"} {
		if !strings.Contains(out, want) {
			t.Errorf("kairo tools: no %q in\n%s", want, out)
		}
	}
	out = captureStdout(t, func() error { return runTools(context.Background(), []string{"skill.wc"}) })
	if !strings.Contains(out, "source\tskill ("+skill+")") || !strings.Contains(out, `"required":["file"]`) || !strings.Contains(out, "about\tcount lines") {
		t.Errorf("kairo tools skill.wc:\n%s", out)
	}
	if err := runTools(context.Background(), []string{"nope"}); err == nil || !strings.Contains(err.Error(), `no tool "nope"`) {
		t.Errorf("kairo tools nope: %v", err)
	}
}

// captureStdout runs f with os.Stdout going to a pipe and returns what it
// wrote.
func captureStdout(t *testing.T, f func() error) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() { b, _ := io.ReadAll(r); done <- string(b) }()
	ferr := f()
	os.Stdout = old
	w.Close()
	out := <-done
	if ferr != nil {
		t.Fatalf("%v\n%s", ferr, out)
	}
	return out
}
