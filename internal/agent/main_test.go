package agent

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

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host/wasm"
	"github.com/kairo-os/kairo/internal/testkit/wasmwarm"
	"github.com/kairo-os/kairo/internal/tools"
	"github.com/kairo-os/kairo/internal/wasmbuild"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
)

// The runtime's tests run it against a real kernel over a SQLite store,
// with real processes, and the real rule policy plugin built from
// plugins/rules.

var (
	pluginDir  string // holds rules.wasm and rules.toml
	wasmEngine *wasm.Engine
	// kernelTools are the definitions of the default Tools.
	kernelTools []abi.Tool
	quiet       = slog.New(slog.NewTextHandler(io.Discard, nil))
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "kairo-agent-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	pluginDir = filepath.Join(dir, "plugins")
	for _, name := range []string{"rules", "llm"} {
		if err := wasmbuild.Plugin(name, pluginDir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	hostile, err := hostileDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The modules the tests load, compiled once without the race detector
	// (some 60 s of CPU each with it): rules, llm and hostile as built-ins,
	// and llm as the drop-in TestReplayFoldsGrants replays.
	cache := filepath.Join(dir, "cache")
	if err := wasmwarm.Warm(cache,
		wasmwarm.Module{Path: filepath.Join(pluginDir, "rules.wasm"), Trusted: true},
		wasmwarm.Module{Path: filepath.Join(pluginDir, "llm.wasm"), Trusted: true},
		wasmwarm.Module{Path: filepath.Join(pluginDir, "llm.wasm")},
		wasmwarm.Module{Path: filepath.Join(hostile, "hostile.wasm"), Trusted: true},
	); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	wasmEngine, err = wasm.NewEngine(wasm.EngineConfig{CacheDir: cache, Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer wasmEngine.Close(context.Background())
	// The tools a runtime with no Tools of its own shows its policy.
	scratch := bus.New(bus.NewMemoryStore(16), bus.Config{})
	k := kernel.New(scratch, kernel.Config{Logger: quiet})
	reg, err := tools.New(tools.Config{Kernel: k, Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kernelTools = reg.Definitions()
	reg.Close()
	k.Close()
	scratch.Close()
	return m.Run()
}

// env is a kernel over a SQLite file, and what the test watches on its bus.
type env struct {
	t      testing.TB
	path   string
	bus    *bus.Bus
	kernel *kernel.Kernel
	events *watcher
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{t: t, path: filepath.Join(t.TempDir(), "events.db")}
	e.open()
	return e
}

// open opens the store and a kernel over it; a second open after close is
// a restart.
func (e *env) open() {
	e.t.Helper()
	store, err := sqlite.Open(e.path, sqlite.Config{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.bus = bus.New(store, bus.Config{})
	e.kernel = kernel.New(e.bus, kernel.Config{Logger: quiet})
	if err := e.kernel.LoadApprovals(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.events = watch(e.t, e.bus)
	k, b := e.kernel, e.bus
	e.t.Cleanup(func() { k.Close(); b.Close() })
}

// rules starts the policy plugins and returns the rule policy.
func (e *env) rules() Policy { return e.policy("rules") }

// policy starts the policy plugins and returns the one named.
func (e *env) policy(name string) Policy {
	e.t.Helper()
	m := wasm.NewManager(wasm.ManagerConfig{Engine: wasmEngine, Kernel: e.kernel, Folders: []wasm.Folder{{Path: pluginDir, Builtin: true}}, Logger: quiet})
	if err := m.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(m.Stop)
	return PluginPolicy(m, name)
}

func (e *env) start(cfg Config) *Runtime {
	e.t.Helper()
	cfg.Kernel = e.kernel
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	if cfg.Hz == 0 {
		cfg.Hz = 100
	}
	r, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(r.Stop)
	return r
}

// say publishes a user message and returns its event.
func (e *env) say(text string, id string) *abi.Event {
	e.t.Helper()
	if id == "" {
		id = abi.NewID()
	}
	raw, _ := msgpack.Marshal(abi.UserMessage{Text: text, MessageID: id})
	ev := &abi.Event{Type: abi.SubjectUserMessage, Source: "test", Data: raw}
	if _, err := e.bus.Publish(context.Background(), ev); err != nil {
		e.t.Fatal(err)
	}
	return ev
}

// watcher keeps every event of the bus.
type watcher struct {
	mu   sync.Mutex
	evs  []abi.Event
	wake chan struct{}
}

func watch(t testing.TB, b *bus.Bus) *watcher {
	w := &watcher{wake: make(chan struct{}, 1)}
	sub, err := b.Subscribe(context.Background(), ">", bus.SubscribeConfig{FromSeq: b.LastSeq() + 1}, func(evs []abi.Event) error {
		w.mu.Lock()
		for _, ev := range evs {
			ev.Data = append([]byte(nil), ev.Data...)
			w.evs = append(w.evs, ev)
		}
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	return w
}

// until waits for an event that match accepts and returns it.
func (w *watcher) until(t testing.TB, what string, match func(*abi.Event) bool) *abi.Event {
	t.Helper()
	timeout := time.After(20 * time.Second)
	seen := 0
	for {
		w.mu.Lock()
		for i := seen; i < len(w.evs); i++ {
			if match(&w.evs[i]) {
				ev := w.evs[i]
				w.mu.Unlock()
				return &ev
			}
		}
		seen = len(w.evs)
		w.mu.Unlock()
		select {
		case <-w.wake:
		case <-timeout:
			t.Fatalf("no %s within 20s; events:\n%s", what, w.dump())
		}
	}
}

// from is until for a reader that goes through the events in order: it
// starts at *seen, hands match every event once, copies included, and
// leaves *seen after the one match accepted.
func (w *watcher) from(t testing.TB, seen *int, what string, match func(*abi.Event) bool) *abi.Event {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		w.mu.Lock()
		evs := w.evs[*seen:len(w.evs):len(w.evs)]
		w.mu.Unlock()
		for i := range evs {
			*seen++
			if ev := &evs[i]; match(ev) {
				return ev
			}
		}
		select {
		case <-w.wake:
		case <-timeout:
			t.Fatalf("no %s within 20s; events:\n%s", what, w.dump())
		}
	}
}

// all returns the events that match.
func (w *watcher) all(match func(*abi.Event) bool) []abi.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []abi.Event
	for _, ev := range w.evs {
		if match(&ev) {
			out = append(out, ev)
		}
	}
	return out
}

func (w *watcher) dump() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	for _, ev := range w.evs {
		fmt.Fprintf(&b, "  %d %s corr=%.8s cause=%.8s %s\n", ev.Seq, ev.Type, ev.CorrelationID, ev.CausationID, decodeAny(ev.Data))
	}
	return b.String()
}

func decodeAny(raw []byte) string {
	var v any
	if msgpack.Unmarshal(raw, &v) != nil {
		return fmt.Sprintf("%x", raw)
	}
	return fmtValue(v)
}

func typed(typ string) func(*abi.Event) bool {
	return func(ev *abi.Event) bool { return ev.Type == typ }
}

// sayIn matches a say action in the run loop corr ("" any) whose text
// contains text.
func sayIn(corr, text string) func(*abi.Event) bool {
	return func(ev *abi.Event) bool {
		if ev.Type != abi.SubjectAgentAction || (corr != "" && ev.CorrelationID != corr) {
			return false
		}
		var d abi.ActionEvent
		return msgpack.Unmarshal(ev.Data, &d) == nil && (d.Type == abi.ActionSay || d.Type == abi.ActionQuery) && strings.Contains(d.Text, text)
	}
}

func decodeAs[T any](t testing.TB, ev *abi.Event) T {
	t.Helper()
	var v T
	if err := msgpack.Unmarshal(ev.Data, &v); err != nil {
		t.Fatalf("decode %s: %v", ev.Type, err)
	}
	return v
}
