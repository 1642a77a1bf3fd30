package wasm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
)

// freshEngine is an Engine of the test's own, on the shared compilation cache:
// its modules are its own to count.
func freshEngine(t *testing.T) *Engine {
	t.Helper()
	h, err := NewEngine(EngineConfig{CacheDir: filepath.Join(guestDir, "cache"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

func wantModules(t *testing.T, h *Engine, held, idle, compiles int) {
	t.Helper()
	gh, gi := h.LiveModules()
	if gh != held || gi != idle || h.compileCount() != compiles {
		t.Fatalf("the host holds %d modules, %d idle, and prepared %d; want %d, %d and %d", gh, gi, h.compileCount(), held, idle, compiles)
	}
}

// Instances of the same bytes and options share one module, each with its
// own memory; closing one, or its failure, leaves the module to the other;
// the last release closes it, but for the one idle module the host keeps.
func TestModuleSharedByInstances(t *testing.T) {
	ctx := context.Background()
	h := freshEngine(t)
	for _, trusted := range []bool{false, true} {
		opts := InstanceConfig{Name: "echo", Trusted: trusted}
		p1, err := h.Load(ctx, guests["echo"], opts)
		if err != nil {
			t.Fatal(err)
		}
		p2, err := h.Load(ctx, guests["echo"], opts)
		if err != nil {
			t.Fatal(err)
		}
		if p1.module != p2.module || p1.modName != "echo" || p2.modName == "echo" {
			t.Fatalf("two instances: modules %p and %p, names %q and %q; want one module, two names", p1.module, p2.module, p1.modName, p2.modName)
		}
		if trusted {
			wantModules(t, h, 1, 1, 2)
		} else {
			wantModules(t, h, 1, 0, 1)
		}
		for _, p := range []*Plugin{p1, p2} {
			initPlugin(t, p, map[string]any{"publish": true})
		}
		// Each instance's imports serve that instance: its own output.
		out, err := p2.Handle(ctx, testBatch(2, 8))
		if err != nil || len(out.Published) != 2 {
			t.Fatalf("p2: %d published, err %v; want 2", len(out.Published), err)
		}
		if err := p1.Close(ctx); err != nil {
			t.Fatal(err)
		}
		out, err = p2.Handle(ctx, testBatch(3, 8))
		if err != nil || len(out.Published) != 3 || len(out.Reply.Actions) != 3 {
			t.Fatalf("p2 after p1 closed: %d published, %d actions, err %v; want 3 and 3", len(out.Published), len(out.Reply.Actions), err)
		}
		p2.Close(ctx)
		p2.Close(ctx) // twice is once
	}
	// The last released is kept idle; the one before it was closed.
	wantModules(t, h, 0, 1, 2)
	// Another memory limit is another module.
	p, err := h.Load(ctx, guests["echo"], InstanceConfig{Name: "echo", MemoryPages: 512})
	if err != nil {
		t.Fatal(err)
	}
	wantModules(t, h, 1, 1, 3)
	p.Close(ctx)
	wantModules(t, h, 0, 1, 3)
	// The idle one serves its bytes again, without preparing them.
	p, err = h.Load(ctx, guests["echo"], InstanceConfig{Name: "echo", MemoryPages: 512})
	if err != nil {
		t.Fatal(err)
	}
	wantModules(t, h, 1, 0, 3)
	p.Close(ctx)
}

// An instance whose call failed never serves again; the next instance of
// the same module starts with fresh memory and serves.
func TestModuleOutlivesAFailedInstance(t *testing.T) {
	ctx := context.Background()
	h := freshEngine(t)
	opts := InstanceConfig{Name: "hostile"}
	p, err := h.Load(ctx, guests["hostile"], opts)
	if err != nil {
		t.Fatal(err)
	}
	initPlugin(t, p, map[string]any{"mode": "panic"})
	if _, err := p.Handle(ctx, testBatch(1, 8)); err == nil {
		t.Fatal("the panicking plugin handled its batch")
	}
	if _, err := p.Handle(ctx, testBatch(1, 8)); err == nil {
		t.Fatal("a failed instance served again")
	}
	mod := p.module
	mod.retain() // as its unit does
	p.Close(ctx)
	q, err := mod.Instantiate(ctx, opts)
	mod.Release()
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close(ctx)
	initPlugin(t, q, map[string]any{"mode": "noop"})
	if out, err := q.Handle(ctx, testBatch(1, 8)); err != nil || len(out.Reply.Actions) != 1 {
		t.Fatalf("the next instance: %d actions, err %v", len(out.Reply.Actions), err)
	}
	wantModules(t, h, 1, 0, 1)
}

// anyGuestManifest runs echo, or hostile under the name echo.
const anyGuestManifest = `[plugin]
name = "echo"
kinds = ["policy"]

[grants]
subscribe = ["demo.>"]
publish = ["echo.>"]
call = ["kernel.ping"]

[config]
name = "echo"
subscribe = "demo.>"
`

// A unit keeps its module across restarts; a reload of the same bytes
// takes the old unit's module; new bytes are prepared and the old module
// is let go (kept idle, one at most), so reloads do not pile up modules; a
// removed plugin leaves none held.
func TestReloadReusesAndClosesModules(t *testing.T) {
	e := newManagerEnv(t)
	h := freshEngine(t)
	e.drop("echo", "echo", anyGuestManifest)
	e.startOn(h)
	e.waitState("echo", abi.PluginRunning)
	wantModules(t, h, 1, 0, 1)
	path := filepath.Join(e.dir, "echo.wasm")
	// asker says it is asker: refused, it still holds its module.
	rewrite := func(guest string) {
		t.Helper()
		state := abi.PluginRunning
		if guest == "asker" {
			state = abi.PluginRefused
		}
		if err := os.WriteFile(path+".tmp", guests[guest], 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
		if len(e.m.Rescan()) != 1 {
			t.Fatal("the rescan did not reload the plugin")
		}
		e.waitState("echo", state)
	}
	for range 3 {
		rewrite("echo")
	}
	wantModules(t, h, 1, 0, 1)
	// Other bytes (hostile, which takes the name its config gives it).
	rewrite("hostile")
	wantModules(t, h, 1, 1, 2)
	rewrite("echo") // put back: the idle module
	wantModules(t, h, 1, 1, 2)
	rewrite("hostile")
	rewrite("echo")
	rewrite("hostile")
	wantModules(t, h, 1, 1, 2)
	// A refused plugin holds no module.
	rewrite("asker")
	wantModules(t, h, 0, 1, 3)
	rewrite("hostile")
	wantModules(t, h, 1, 1, 4)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	e.m.Rescan()
	wantModules(t, h, 0, 1, 4)
	e.m.Stop()
	e.m = nil
	wantModules(t, h, 0, 1, 4)
}

// Every plugin's file written again at once, as `make plugins` does: each
// new unit takes its old unit's module, none is prepared again — more than
// the one idle module the host keeps.
func TestReloadOfAllKeepsEveryModule(t *testing.T) {
	e := newManagerEnv(t)
	h := freshEngine(t)
	const manifest = `[plugin]
name = "%s"
kinds = ["policy"]

[grants]
subscribe = ["demo.>"]
publish = ["echo.>"]
call = ["kernel.ping"]

[config]
name = "%s"
subscribe = "demo.>"
`
	e.drop("echo", "echo", fmt.Sprintf(manifest, "echo", "echo"))
	e.drop("two", "hostile", fmt.Sprintf(manifest, "two", "two"))
	e.startOn(h)
	wantModules(t, h, 2, 0, 2)
	for range 2 {
		e.drop("echo", "echo", "")
		e.drop("two", "hostile", "")
		for _, u := range e.m.Rescan() {
			u.waitStarted(context.Background())
		}
		e.waitState("echo", abi.PluginRunning)
		e.waitState("two", abi.PluginRunning)
		wantModules(t, h, 2, 0, 2)
	}
}

// New bytes are prepared by the rescan while the old unit still serves,
// and handed to the unit that replaces it.
func TestRescanPreparesNewBytesAhead(t *testing.T) {
	e := newManagerEnv(t)
	h := freshEngine(t)
	e.drop("echo", "echo", anyGuestManifest)
	e.startOn(h)
	e.waitState("echo", abi.PluginRunning)
	old, _ := e.m.unit("echo")
	wasm := guests["hostile"]
	if err := os.WriteFile(filepath.Join(e.dir, "echo.wasm"), wasm, 0o600); err != nil {
		t.Fatal(err)
	}
	e.holdAhead(old)
	wantModules(t, h, 2, 0, 2)
	e.m.hintMu.Lock()
	held := e.m.hints["echo"]
	e.m.hintMu.Unlock()
	if len(held.hints) != 2 || !bytes.Equal(held.hints[0].wasm, wasm) || &held.wasm[0] != &held.hints[0].wasm[0] {
		t.Fatalf("handed over %d modules, the new one first: %v", len(held.hints), held.hints)
	}
	e.m.dropHints()
	wantModules(t, h, 1, 1, 2)
	// The rescan does the same, and the new unit takes it.
	e.m.Rescan()
	e.waitState("echo", abi.PluginRunning)
	wantModules(t, h, 1, 1, 2)
}

func TestFileHolds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.wasm")
	want := bytes.Repeat([]byte("kairo"), 200_000) // over one piece
	for _, c := range []struct {
		name string
		file []byte
		ok   bool
	}{
		{"same", want, true},
		{"last byte", append(bytes.Clone(want[:len(want)-1]), 'x'), false},
		{"first byte", append([]byte("x"), want[1:]...), false},
		{"shorter", want[:len(want)-1], false},
		{"longer", append(bytes.Clone(want), 'x'), false},
	} {
		if err := os.WriteFile(path, c.file, 0o600); err != nil {
			t.Fatal(err)
		}
		if got := fileHolds(path, want); got != c.ok {
			t.Errorf("%s: fileHolds = %v, want %v", c.name, got, c.ok)
		}
	}
	if fileHolds(filepath.Join(t.TempDir(), "none"), want) {
		t.Error("a missing file holds the bytes")
	}
	// A FIFO in the module's place, with no writer: told at once.
	fifo := filepath.Join(t.TempDir(), "f.wasm")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool, 1)
	go func() { done <- fileHolds(fifo, want) }()
	select {
	case got := <-done:
		if got {
			t.Error("a FIFO holds the bytes")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("fileHolds blocks on a FIFO")
	}
}

// A module file written again is compared with the module the unit holds
// while an instance of that module is made: with the same bytes the
// instance is handed over initialised; with other bytes of the same size
// (here not a module at all, which is quicker to tell than to compile) it
// is let go.
func TestRescanMakesTheInstanceAhead(t *testing.T) {
	e := newManagerEnv(t)
	h := freshEngine(t)
	a := guests["echo"]
	b := bytes.Clone(a)
	b[0] = 'x'
	path := filepath.Join(e.dir, "echo.wasm")
	write := func(wasm []byte) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", wasm, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	e.drop("echo", "echo", anyGuestManifest)
	write(a)
	e.startOn(h)
	e.waitState("echo", abi.PluginRunning)
	old, _ := e.m.unit("echo")
	old.mu.Lock()
	mod := old.held.prep
	old.mu.Unlock()
	live := func() int { return len(*mod.live.Load()) }
	hold := func() *unitModule {
		t.Helper()
		e.holdAhead(old)
		e.m.hintMu.Lock()
		defer e.m.hintMu.Unlock()
		return e.m.hints["echo"]
	}

	write(a)
	r := hold().ready
	if r == nil {
		t.Fatal("no instance was made while the file was compared")
	}
	<-r.done
	if r.err != nil || r.p == nil || r.info.Name != "echo" || live() != 2 {
		t.Fatalf("the instance made ahead: %v, info %+v, %d live instances", r.err, r.info, live())
	}
	e.m.dropHints()
	if live() != 1 {
		t.Fatalf("%d live instances after the hints were dropped, want the old unit's", live())
	}
	wantModules(t, h, 1, 0, 1)

	write(b)
	if held := hold(); held.ready != nil {
		t.Fatal("other bytes of the same size: the instance made ahead was handed over")
	}
	e.m.dropHints()
	for deadline := time.Now().Add(5 * time.Second); live() != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("%d live instances, want the old unit's: the one made ahead was not let go", live())
		}
		time.Sleep(time.Millisecond)
	}
	wantModules(t, h, 1, 0, 1)

	// The rescan: the new unit serves the instance made ahead.
	write(a)
	if len(e.m.Rescan()) != 1 {
		t.Fatal("the rescan did not reload the plugin")
	}
	e.waitState("echo", abi.PluginRunning)
	if _, err := e.m.Decide(context.Background(), "echo", testBatch(1, 8)); err != nil {
		t.Fatal(err)
	}
	// Made while the old unit's instance lived, it was named apart.
	if names := slices.Collect(maps.Keys(*mod.live.Load())); len(names) != 1 || !strings.Contains(names[0], "#") {
		t.Fatalf("live instances after the reload: %q, want the one made ahead", names)
	}
	wantModules(t, h, 1, 0, 1)
}

// startOn starts the env's manager on engine h, its folder granted.
func (e *managerEnv) startOn(h *Engine) {
	e.t.Helper()
	e.m = NewManager(ManagerConfig{Engine: h, Kernel: e.kernel, Folders: []Folder{{Path: e.dir, Granted: true}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := e.m.Start(); err != nil {
		e.t.Fatal(err)
	}
}

// holdAhead does what a rescan does before it stops old, its files read
// again as they are now, and fails if old stopped meanwhile.
func (e *managerEnv) holdAhead(old *unit) {
	e.t.Helper()
	f := old.files
	f.stamp = stampOf(f.wasm)
	e.m.holdModule(old, &f)
	select {
	case <-old.done:
		e.t.Fatal("the old unit stopped")
	default:
	}
}
