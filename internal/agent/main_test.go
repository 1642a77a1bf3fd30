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
	"github.com/kairo-os/kairo/manifests"
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
	release, err := holdModules()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer release()
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

// heldModules are the plugin modules holdModules prepared, by the name of
// the plugin and whether it runs as a built-in.
var heldModules = map[string]*wasm.Module{}

// holdModules prepares the modules most tests load — rules and llm as
// built-ins, llm as the drop-in TestReplayFoldsGrants replays — in the
// shared engine, and holds them until release: every test's manager then
// finds them prepared, as a long-running kairo's restarts of a plugin do,
// rather than each test decoding, validating and reading back from the
// compilation cache some 5 MB a module under the race detector (the
// engine keeps one idle module only, so each test paid at least one: 10 s
// of internal/agent's 50 s of test-process CPU). Every instance still gets
// its own fresh memory; TestModulesHeld checks the managers find them.
func holdModules() (release func(), err error) {
	var mods []*wasm.Module
	release = func() {
		for _, m := range mods {
			m.Release()
		}
	}
	for _, h := range []struct {
		name    string
		builtin bool
	}{{"rules", true}, {"llm", true}, {"llm", false}} {
		man, err := manifests.LoadPlugin(filepath.Join(pluginDir, h.name+".toml"))
		if err != nil {
			release()
			return nil, err
		}
		b, err := os.ReadFile(filepath.Join(pluginDir, h.name+".wasm"))
		if err != nil {
			release()
			return nil, err
		}
		// The key the manager prepares the module under: its bytes, whether
		// it is trusted, and its memory limit.
		m, err := wasmEngine.Prepare(context.Background(), b, wasm.InstanceConfig{Name: h.name, Trusted: h.builtin, MemoryPages: man.Limits.MemoryPages()})
		if err != nil {
			release()
			return nil, fmt.Errorf("prepare %s (built-in %v) for the tests: %w", h.name, h.builtin, err)
		}
		mods = append(mods, m)
		heldModules[fmt.Sprintf("%s/%v", h.name, h.builtin)] = m
	}
	return release, nil
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

// The managers of the tests find the modules holdModules holds: starting
// the built-in rules and llm, or llm as a drop-in, prepares no module of
// its own. The control is the plugins' start: each runs, from a module the
// engine holds.
func TestModulesHeld(t *testing.T) {
	for _, c := range []struct {
		folder  wasm.Folder
		only    []string
		plugins []string // those the manager starts
	}{
		{wasm.Folder{Path: pluginDir, Builtin: true}, nil, []string{"rules", "llm"}},
		{wasm.Folder{Path: pluginDir}, []string{"llm"}, []string{"llm"}},
	} {
		e := newEnv(t)
		m := wasm.NewManager(wasm.ManagerConfig{Engine: wasmEngine, Kernel: e.kernel, Folders: []wasm.Folder{c.folder}, Only: c.only, Logger: quiet})
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
		held, _ := wasmEngine.LiveModules()
		for _, name := range c.plugins {
			e.events.until(t, name+"'s start", func(ev *abi.Event) bool {
				return ev.Type == abi.SubjectPluginStarted && decodeAs[abi.PluginState](t, ev).Plugin == name
			})
		}
		m.Stop()
		if held != len(heldModules) {
			t.Errorf("built-in %v: the engine holds %d modules while the manager runs; want the %d holdModules holds: the manager prepared its own", c.folder.Builtin, held, len(heldModules))
		}
	}
}
