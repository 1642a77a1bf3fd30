package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/kernel/bus/sqlite"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/tools"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/ipc"
)

// kairo tools lists what tools.list serves: each tool with its source and
// grants, and one tool whole when named.
func TestToolsCommand(t *testing.T) {
	dir := t.TempDir()
	skill := filepath.Join(dir, "wc", "skill.toml")
	os.MkdirAll(filepath.Dir(skill), 0o700)
	if err := os.WriteFile(skill, []byte("[skill]\nname = \"wc\"\ndescription = \"count lines\"\ncommand = [\"/usr/bin/wc\", \"-l\", \"{file}\"]\n[params.file]\n[fs]\nread = [\"/srv\"]\nexec = [\"/usr/bin/wc\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := serveTools(t, dir, map[string]string{"wc": skill})

	out := captureStdout(t, func() error { return runTools(context.Background(), nil) })
	for _, want := range []string{"NAME", abi.MethodProcessSpawn, "kernel", "only the processes the agent spawned", "skill.wc", "skill   fs.read /srv; fs.exec /usr/bin/wc"} {
		if !strings.Contains(out, want) {
			t.Errorf("kairo tools: no %q in\n%s", want, out)
		}
	}
	out = captureStdout(t, func() error { return runTools(context.Background(), []string{"skill.wc"}) })
	if !strings.Contains(out, "source\tskill ("+skill+")") || !strings.Contains(out, `"required":["file"]`) || !strings.Contains(out, "about\tcount lines") {
		t.Errorf("kairo tools skill.wc:\n%s", out)
	}
	// Two tools whose names share their first 70 characters: each is
	// offered to the model under a name of its own, which kairo tools shows.
	long := "go." + strings.Repeat("l", 67)
	for _, suffix := range []string{"a", "b"} {
		err := reg.Add(abi.ToolInfo{Tool: abi.Tool{Name: long + suffix}, Source: "test"}, func(context.Context, *tools.Invocation) abi.ToolResultEvent { return abi.ToolResultEvent{} })
		if err != nil {
			t.Fatal(err)
		}
	}
	out = captureStdout(t, func() error { return runTools(context.Background(), nil) })
	if strings.Count(out, ": offered to the model as go_"+strings.Repeat("l", 50)) != 2 || strings.Contains(out, "skill.wc: offered") {
		t.Errorf("kairo tools does not show the offered names:\n%s", out)
	}
	out = captureStdout(t, func() error { return runTools(context.Background(), []string{long + "a"}) })
	if !strings.Contains(out, "offered\tgo_l") {
		t.Errorf("kairo tools %s:\n%s", long+"a", out)
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

// serveTools serves, on a socket in dir that KAIRO_SOCKET names for the
// test, a kernel whose tool registry has the skills given (name → its
// skill.toml), until the test ends; it returns the registry.
func serveTools(t *testing.T, dir string, skills map[string]string) *tools.Registry {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := sqlite.Open(filepath.Join(dir, "events.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b := bus.New(store, bus.Config{})
	k := kernel.New(b, kernel.Config{Logger: quiet})
	t.Cleanup(func() { k.Close(); b.Close() })
	reg, err := tools.New(tools.Config{Kernel: k, Skills: skills, ResultDir: filepath.Join(dir, "results"), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	reg.Register()
	sock := filepath.Join(dir, "k.sock")
	srv, err := ipc.Listen(k, ipc.Config{Path: sock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })
	t.Setenv("KAIRO_SOCKET", sock)
	return reg
}
