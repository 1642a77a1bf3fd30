package mcp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/sandbox"
	"github.com/vmihailenco/msgpack/v5"
)

// The tests run real MCP servers through a real kernel: testdata/server,
// built from the SDK here, over stdio; the same tools in the test over
// streamable HTTP; and the reference filesystem server from npm.

var (
	// serverBin is testdata/server, built into a folder that a sandbox's
	// uid may pass through.
	serverBin string
	// reachable holds serverBin: mode 0711 up from it.
	reachable string
	quiet     = slog.New(slog.NewTextHandler(io.Discard, nil))
)

func TestMain(m *testing.M) {
	// The test binary doubles as the sandbox helper, as kairo does.
	if sandbox.IsHelper() {
		sandbox.HelperMain()
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "kairo-mcp-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o711); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	reachable = dir
	serverBin = filepath.Join(dir, "server")
	build := exec.Command("go", "build", "-o", serverBin, "./testdata/server")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build testdata/server: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// env is a kernel over a memory bus.
type env struct {
	t      *testing.T
	kernel *kernel.Kernel
}

func newEnv(t *testing.T, launcher proc.Launcher) *env {
	t.Helper()
	b := bus.New(bus.NewMemoryStore(1<<12), bus.Config{})
	k := kernel.New(b, kernel.Config{Logger: quiet, Launcher: launcher})
	t.Cleanup(func() { k.Close(); b.Close() })
	return &env{t: t, kernel: k}
}

// event waits for the event of subject about process pid on the bus and
// returns its data.
func (e *env) event(subject string, pid int) map[string]any {
	e.t.Helper()
	pattern, err := abi.CompilePattern(subject)
	if err != nil {
		e.t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var found map[string]any
		e.kernel.Bus.Replay(context.Background(), bus.Query{Pattern: pattern}, func(ev *abi.Event) error {
			var data map[string]any
			if msgpack.Unmarshal(ev.Data, &data) == nil && fmt.Sprint(data["pid"]) == strconv.Itoa(pid) {
				found = data
				return bus.ErrStop
			}
			return nil
		})
		if found != nil {
			return found
		}
	}
	e.t.Fatalf("no %s event for pid %d within 10s", subject, pid)
	return nil
}

// stdio is the config of testdata/server with flags, quick to stop.
func stdio(flags ...string) ServerConfig {
	return ServerConfig{Name: "test", Command: append([]string{serverBin}, flags...), ShutdownGrace: 300 * time.Millisecond}
}

// connect connects to cfg's server and closes it after the test.
func (e *env) connect(cfg ServerConfig) *Server {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Connect(ctx, e.kernel, cfg, quiet)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// call calls tool and fails the test on an error or a tool error.
func call(t *testing.T, s *Server, tool, args string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, isErr, err := s.Call(ctx, tool, args)
	if err != nil {
		t.Fatalf("call %s %s: %v", tool, args, err)
	}
	if isErr {
		t.Fatalf("call %s %s: tool error: %s", tool, args, out)
	}
	return out
}

// pidOf is the pid of s's live process, by its own word.
func pidOf(t *testing.T, s *Server) int {
	t.Helper()
	pid, err := strconv.Atoi(call(t, s, "pid", ""))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// process is the kernel session of s's newest process.
func process(s *Server) *proc.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last.proc
}

// alive reports whether pid runs.
func alive(pid int) bool {
	runs, _ := procState(pid)
	return runs
}

// reachableDir is a fresh folder a sandbox's uid may pass through.
func reachableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(reachable, "dir-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeFile writes a file every user may read.
func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
