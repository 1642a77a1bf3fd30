package tools_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus/sqlite"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host/wasm"
	"github.com/kairo-os/kairo/internal/mcp"
	"github.com/kairo-os/kairo/internal/testkit/wasmwarm"
	"github.com/kairo-os/kairo/internal/tools"
	"github.com/kairo-os/kairo/internal/wasmbuild"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
)

// The registry's tests run it against a real kernel over a SQLite file,
// real processes, and a real tool plugin, testdata/toolbox, built with the
// SDK once per test binary.

// An MCP client's server is a Source as it is.
var _ tools.Source = (*mcp.Server)(nil)

var (
	toolboxWasm string // the built module
	wasmEngine  *wasm.Engine
	quiet       = slog.New(slog.NewTextHandler(io.Discard, nil))
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "kairo-tools-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	toolboxWasm = filepath.Join(dir, "toolbox.wasm")
	if err := wasmbuild.Build("./internal/tools/testdata/toolbox", toolboxWasm); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The toolbox compiled once without the race detector (some 20 s of
	// CPU with it), metered as the tests' plugins run.
	cache := filepath.Join(dir, "cache")
	if err := wasmwarm.Warm(cache, wasmwarm.Module{Path: toolboxWasm}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	wasmEngine, err = wasm.NewEngine(wasm.EngineConfig{CacheDir: cache, Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer wasmEngine.Close(context.Background())
	return m.Run()
}

// env is a kernel over a SQLite file, the toolbox plugin under the names
// asked for, and a registry over both.
type env struct {
	t       testing.TB
	dir     string
	bus     *bus.Bus
	kernel  *kernel.Kernel
	plugins *wasm.Manager
	reg     *tools.Registry
	sess    *session
}

// newEnv starts the env: plugins maps each plugin name to the TOML added
// to its manifest after the [config] line (the toolbox module serves each
// one; each call of the plugin has the manager's deadline of 1 s unless
// the TOML gives [limits]).
func newEnv(t testing.TB, cfg tools.Config, plugins map[string]string) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir()}
	store, err := sqlite.Open(filepath.Join(e.dir, "events.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e.bus = bus.New(store, bus.Config{})
	e.kernel = kernel.New(e.bus, kernel.Config{Logger: quiet})
	t.Cleanup(func() { e.kernel.Close(); e.bus.Close() })

	pdir := filepath.Join(e.dir, "plugins")
	if err := os.Mkdir(pdir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, extra := range plugins {
		if err := os.Link(toolboxWasm, filepath.Join(pdir, name+".wasm")); err != nil {
			t.Fatal(err)
		}
		manifest := fmt.Sprintf("[plugin]\nname = %q\nkinds = [\"tool\"]\n\n[grants]\ncall = [\"process.spawn\", \"process.wait\"]\n\n[config]\nname = %q\n%s\n", name, name, extra)
		if err := os.WriteFile(filepath.Join(pdir, name+".toml"), []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.plugins = wasm.NewManager(wasm.ManagerConfig{Engine: wasmEngine, Kernel: e.kernel, Folders: []wasm.Folder{{Path: pdir, Granted: true}}, Logger: quiet})
	if err := e.plugins.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.plugins.Stop)

	ctx, cancel := context.WithCancel(context.Background())
	e.sess = &session{ctx: ctx}
	t.Cleanup(cancel)

	cfg.Kernel, cfg.Plugins, cfg.Logger = e.kernel, e.plugins, quiet
	if cfg.ResultDir == "" {
		cfg.ResultDir = filepath.Join(e.dir, "results")
	}
	e.reg, err = tools.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.reg.Register()
	t.Cleanup(func() { e.reg.Close() })
	return e
}

// call runs one tool call in the env's session, as a step of run loop
// "loop-1".
func (e *env) call(tool, args string) abi.ToolResultEvent {
	return e.callCtx(context.Background(), tool, args)
}

func (e *env) callCtx(ctx context.Context, tool, args string) abi.ToolResultEvent {
	return e.reg.Call(ctx, tools.Invocation{ActionID: abi.NewID(), CorrelationID: "loop-1", Tool: tool, Args: args, Session: e.sess})
}

// waitRestarted waits until the plugin name runs again after a failure.
func (e *env) waitRestarted(name string) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range e.plugins.List() {
			if p.Name == name && p.State == abi.PluginRunning && p.Restarts > 0 {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.t.Fatalf("plugin %s is not running again: %+v", name, e.plugins.List())
}

// session is the caller of the kernel tools, as the agent is: it owns the
// processes it spawns and keeps their output.
type session struct {
	ctx context.Context
	mu  sync.Mutex
	out strings.Builder
}

func (s *session) Caller() kernel.Caller {
	return kernel.Caller{Kind: kernel.KindAgent, Name: "test", Spawn: &kernel.SpawnAuthority{Skills: []string{"*"}, Commands: true}, UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), PID: int32(os.Getpid())}
}
func (s *session) Context() context.Context             { return s.ctx }
func (s *session) PushEvents(uint64, []abi.Event) error { return nil }
func (s *session) EndStream(uint64, *abi.Error) error   { return nil }
func (s *session) PushChunks(cs []abi.StreamChunk) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		s.out.Write(c.Chunk)
	}
	return nil
}

func (s *session) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}
