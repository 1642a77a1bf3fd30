package wasm

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
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/manifests"
)

// The plugin manager's tests run real plugins from a real folder against a
// real kernel over a SQLite event store.

type managerEnv struct {
	t      *testing.T
	dir    string // the drop-in folder
	kernel *kernel.Kernel
	bus    *bus.Bus
	m      *Manager
}

func newManagerEnv(t *testing.T) *managerEnv {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "events.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b := bus.New(store, bus.Config{})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	k := kernel.New(b, kernel.Config{Logger: logger})
	e := &managerEnv{t: t, dir: t.TempDir(), kernel: k, bus: b}
	t.Cleanup(func() {
		if e.m != nil {
			e.m.Stop()
		}
		k.Close()
		b.Close()
	})
	return e
}

// start starts a manager over the test's folder, whose manifests' grants
// hold (Folder.Granted); cfg's Host, Kernel and Folders are filled in.
func (e *managerEnv) start(cfg ManagerConfig) *Manager {
	e.t.Helper()
	return e.startFolder(cfg, Folder{Path: e.dir, Granted: true})
}

// startFolder starts a manager over the folder f.
func (e *managerEnv) startFolder(cfg ManagerConfig, f Folder) *Manager {
	e.t.Helper()
	cfg.Engine, cfg.Kernel = testEngine, e.kernel
	cfg.Folders = []Folder{f}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.BackoffMin == 0 {
		cfg.BackoffMin = 10 * time.Millisecond
	}
	e.m = NewManager(cfg)
	if err := e.m.Start(); err != nil {
		e.t.Fatal(err)
	}
	return e.m
}

// drop writes a guest and its manifest into the drop-in folder as NAME.
func (e *managerEnv) drop(name, guest, manifest string) {
	e.t.Helper()
	if manifest != "" {
		if err := os.WriteFile(filepath.Join(e.dir, name+".toml"), []byte(manifest), 0o600); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(e.dir, name+".wasm"), guests[guest], 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// watch subscribes to pattern and returns the events it receives.
func (e *managerEnv) watch(pattern string) *received {
	e.t.Helper()
	r := &received{wake: make(chan struct{}, 1)}
	sub, err := e.bus.Subscribe(context.Background(), pattern, bus.SubscribeConfig{}, func(evs []abi.Event) error {
		r.mu.Lock()
		for _, ev := range evs {
			ev.Data = append([]byte(nil), ev.Data...)
			r.evs = append(r.evs, ev)
		}
		r.mu.Unlock()
		select {
		case r.wake <- struct{}{}:
		default:
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(sub.Close)
	return r
}

func (e *managerEnv) publish(subject string, data any) {
	e.t.Helper()
	raw, err := msgpack.Marshal(data)
	if err != nil {
		e.t.Fatal(err)
	}
	// As the operator: what a plugin makes of a skill's event is the
	// skill's (writer_test.go).
	if _, err := e.bus.Publish(context.Background(), &abi.Event{Type: subject, Source: "operator/0", Data: raw}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *managerEnv) status(name string) abi.PluginStatus {
	for _, s := range e.m.List() {
		if s.Name == name {
			return s
		}
	}
	return abi.PluginStatus{}
}

// waitState waits until the plugin is in state.
func (e *managerEnv) waitState(name, state string) abi.PluginStatus {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := e.status(name)
		if s.State == state {
			return s
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("plugin %s is %q (%s), want %q", name, s.State, s.Error, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type received struct {
	mu   sync.Mutex
	evs  []abi.Event
	wake chan struct{}
}

// wait returns the events once there are at least n.
func (r *received) wait(t *testing.T, n int) []abi.Event {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		r.mu.Lock()
		if len(r.evs) >= n {
			evs := append([]abi.Event(nil), r.evs...)
			r.mu.Unlock()
			return evs
		}
		got := len(r.evs)
		r.mu.Unlock()
		select {
		case <-r.wake:
		case <-timeout:
			t.Fatalf("received %d events, want %d", got, n)
		}
	}
}

func decode[T any](t *testing.T, ev abi.Event) T {
	t.Helper()
	var v T
	if err := msgpack.Unmarshal(ev.Data, &v); err != nil {
		t.Fatalf("decode %s: %v", ev.Type, err)
	}
	return v
}

const echoManifest = `[plugin]
name = "echo"
version = "0.1.0"
kinds = ["policy"]

[grants]
subscribe = ["demo.>"]
publish = ["echo.>"]

[config]
subscribe = "demo.>"
`

// A plugin dropped into the folder is loaded with its manifest, receives
// the events it subscribed to, and what it publishes reaches the bus.
func TestManagerRunsAFolder(t *testing.T) {
	e := newManagerEnv(t)
	e.drop("echo", "echo", echoManifest)
	echoes := e.watch("echo.>")
	e.start(ManagerConfig{})

	s := e.waitState("echo", abi.PluginRunning)
	if s.Version != "0.1.0" || s.Trusted || s.Builtin || len(s.Subscribe) != 1 || s.Subscribe[0] != "demo.>" || s.Publish[0] != "echo.>" {
		t.Fatalf("status = %+v", s)
	}
	e.publish("demo.hello", "hi")
	e.publish("other.hello", "not for echo")
	e.publish("demo.again", "hi again")
	evs := echoes.wait(t, 2)
	if len(evs) != 2 || evs[0].Type != "echo.demo.hello" || evs[1].Type != "echo.demo.again" || evs[0].Source != "plugin/echo" {
		t.Fatalf("echoes = %+v", evs)
	}
	if got := decode[string](t, evs[0]); got != "hi" {
		t.Fatalf("echoed data %q", got)
	}

	// plugins.list is in the kernel's method table.
	raw, aerr := e.kernel.Invoke(context.Background(), abi.MethodPluginsList, &kernel.Call{Params: msgpack.RawMessage{0x80}})
	if aerr != nil {
		t.Fatal(aerr)
	}
	var list abi.PluginsListResult
	if err := msgpack.Unmarshal(raw, &list); err != nil || len(list.Plugins) != 1 || list.Plugins[0].State != abi.PluginRunning {
		t.Fatalf("plugins.list = %+v, %v", list, err)
	}
}

// A module with its manifest in a custom section needs no file beside it.
func TestManifestInCustomSection(t *testing.T) {
	e := newManagerEnv(t)
	manifest := "[plugin]\nname = \"asm\"\nkinds = [\"policy\"]\n"
	wasm := section(asmGuest{version: 1}.bytes(), 0, append(name(nil, ManifestSection), manifest...))
	if err := os.WriteFile(filepath.Join(e.dir, "asm.wasm"), wasm, 0o600); err != nil {
		t.Fatal(err)
	}
	// Control: the same module without the section has no manifest.
	if err := os.WriteFile(filepath.Join(e.dir, "bare.wasm"), asmGuest{version: 1}.bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	e.start(ManagerConfig{})
	if s := e.waitState("asm", abi.PluginRunning); s.Kinds[0] != abi.KindPolicy {
		t.Fatalf("status = %+v", s)
	}
	s := e.waitState("bare", abi.PluginRefused)
	if !strings.Contains(s.Error, "has no manifest: put bare.toml beside it, or embed the manifest in a custom section \"kairo.manifest\"") {
		t.Fatalf("error = %q", s.Error)
	}
}

// What the manifest and the module disagree on, or what the operator
// refuses, keeps a plugin from running, with a message that says which.
func TestManagerRefuses(t *testing.T) {
	for _, c := range []struct {
		name, file, manifest, says string
	}{
		// Asks for every event; its manifest grants demo.> only.
		{"a subscription not granted", "echo", strings.Replace(echoManifest, `subscribe = "demo.>"`, `subscribe = ">"`, 1), `not granted: subscribe ">"`},
		// Its init says "echo".
		{"another name", "impostor", strings.Replace(echoManifest, `name = "echo"`, `name = "impostor"`, 1), `its init says it is "echo"`},
		{"another kind", "echo", strings.Replace(echoManifest, `kinds = ["policy"]`, `kinds = ["tool"]`, 1), `its init says it is of kind "policy", which its manifest does not declare`},
		{"an override that widens", "echo", echoManifest, `plugins.echo.publish: ">" is not granted by the manifest`},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newManagerEnv(t)
			e.drop(c.file, "echo", c.manifest)
			var ops map[string]manifests.PluginOverride
			if c.name == "an override that widens" {
				ops = map[string]manifests.PluginOverride{"echo": {Publish: []string{">"}}}
			}
			e.start(ManagerConfig{Overrides: ops})
			if s := e.waitState(c.file, abi.PluginRefused); !strings.Contains(s.Error, c.says) {
				t.Errorf("error %q, want it to say %q", s.Error, c.says)
			}
		})
	}
	// The controls: the plugin as its manifest describes it runs, narrowed
	// by the operator; one the operator turned off is listed as such.
	e := newManagerEnv(t)
	e.drop("echo", "echo", echoManifest)
	e.drop("off", "echo", strings.Replace(echoManifest, `name = "echo"`, `name = "off"`, 1))
	off := false
	e.start(ManagerConfig{Overrides: map[string]manifests.PluginOverride{
		"echo": {Publish: []string{"echo.demo.>"}},
		"off":  {Enabled: &off},
	}})
	e.waitState("off", abi.PluginDisabled)
	if s := e.waitState("echo", abi.PluginRunning); len(s.Publish) != 1 || s.Publish[0] != "echo.demo.>" {
		t.Fatalf("echo's publish grants = %q, want the override's", s.Publish)
	}
}

const hostileManifest = `[plugin]
name = "hostile"
kinds = ["policy"]

[grants]
subscribe = ["boom.>"]
publish = ["ping.>", "recurse.>", "file.>"]
call = %s

[limits]
deadline = "%s"

[config]
mode = "%s"
subscribe = "boom.>"
`

func hostile(mode string, call string, extra string) string {
	return fmt.Sprintf(hostileManifest, call, "2s", mode) + extra
}

// A plugin that fails is reported, restarted with backoff, and after
// MaxFailures within the window stays stopped; its neighbour serves
// throughout; an operator's restart brings it back.
func TestFailureRestartAndGiveUp(t *testing.T) {
	e := newManagerEnv(t)
	e.drop("hostile", "hostile", hostile("panic", `["kernel.ping"]`, ""))
	e.drop("echo", "echo", echoManifest)
	failed := e.watch("kairo.plugin.failed")
	stopped := e.watch("kairo.plugin.stopped")
	echoes := e.watch("echo.>")
	e.start(ManagerConfig{MaxFailures: 3, FailureWindow: time.Minute})
	e.waitState("echo", abi.PluginRunning)

	for i := 1; i <= 3; i++ {
		e.waitState("hostile", abi.PluginRunning)
		e.publish("boom.now", i)
		evs := failed.wait(t, i)
		f := decode[abi.PluginFailed](t, evs[i-1])
		if f.Plugin != "hostile" || f.Op != "handle" || f.Reason != string(ReasonTrap) || f.Failures != i ||
			!strings.Contains(f.Stderr, "hostile plugin panics in handle") {
			t.Fatalf("failure %d = %+v", i, f)
		}
		if i < 3 && f.RestartIn != 10*time.Millisecond<<(i-1) {
			t.Fatalf("failure %d restarts in %v, want %v", i, f.RestartIn, 10*time.Millisecond<<(i-1))
		}
		if i == 3 && f.RestartIn != 0 {
			t.Fatalf("the last failure restarts in %v, want never", f.RestartIn)
		}
		// The neighbour serves between failures.
		e.publish("demo.between", i)
		echoes.wait(t, i)
	}
	s := e.waitState("hostile", abi.PluginStopped)
	if s.Failures != 3 || s.Restarts != 2 || !strings.Contains(s.Error, "failed 3 times within 1m0s") {
		t.Fatalf("status = %+v", s)
	}
	if st := decode[abi.PluginState](t, stopped.wait(t, 1)[0]); st.Plugin != "hostile" {
		t.Fatalf("stopped = %+v", st)
	}
	if err := e.m.Restart("hostile"); err != nil {
		t.Fatal(err)
	}
	if s := e.waitState("hostile", abi.PluginRunning); s.Failures != 0 {
		t.Fatalf("after a restart: %+v", s)
	}
	if err := e.m.Restart("nobody"); err == nil || !strings.Contains(err.Error(), `no plugin "nobody"`) {
		t.Fatalf("Restart(nobody) = %v", err)
	}
}

// A call the manifest grants reaches the kernel and its result comes back
// in a later batch; a call it does not grant fails inside the plugin with
// "not granted" and is reported as kairo.plugin.denied.
func TestCallsThroughTheManager(t *testing.T) {
	e := newManagerEnv(t)
	results := e.watch("ping.result")
	denied := e.watch("kairo.plugin.denied")
	e.drop("hostile", "hostile", hostile("ping", `["kernel.ping", "no.such.method"]`, ""))
	e.start(ManagerConfig{})
	e.waitState("hostile", abi.PluginRunning)

	e.publish("boom.ping", 1)
	if r := decode[result](t, results.wait(t, 1)[0]); !r.OK {
		t.Fatalf("granted kernel.ping: %+v", r)
	}
	e.m.Stop()
	e.m = nil

	// The same plugin granted another method only.
	if err := os.WriteFile(filepath.Join(e.dir, "hostile.toml"), []byte(hostile("ping", `["events.replay"]`, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	e.start(ManagerConfig{})
	e.waitState("hostile", abi.PluginRunning)
	e.publish("boom.ping", 2)
	r := decode[result](t, results.wait(t, 2)[1])
	if r.OK || !strings.Contains(r.Error, "call kernel.ping: not granted") {
		t.Fatalf("kernel.ping not granted: %+v", r)
	}
	d := decode[abi.PluginDenied](t, denied.wait(t, 1)[0])
	if d.Plugin != "hostile" || d.Import != "call" || d.Target != abi.MethodKernelPing || d.Count != 1 {
		t.Fatalf("denied = %+v", d)
	}
	if s := e.status("hostile"); s.State != abi.PluginRunning || s.Denied != 1 {
		t.Fatalf("status after a denial = %+v", s)
	}
}

// result is what the hostile guest's manager modes publish.
type result struct {
	OK    bool   `msgpack:"ok"`
	Error string `msgpack:"error,omitempty"`
	Text  string `msgpack:"text,omitempty"`
}

// A plugin that calls its own service from inside it, for ever, is cut off
// at the depth limit with an error it sees; it and the host keep serving.
func TestRecursiveServiceCalls(t *testing.T) {
	e := newManagerEnv(t)
	results := e.watch("recurse.result")
	e.drop("hostile", "hostile", hostile("recurse", `["hostile.recurse"]`, ""))
	e.drop("echo", "echo", echoManifest)
	echoes := e.watch("echo.>")
	e.start(ManagerConfig{})
	e.waitState("hostile", abi.PluginRunning)

	e.publish("boom.go", 1)
	evs := results.wait(t, maxServiceDepth+1)
	var ok, cut int
	var msg string
	for _, ev := range evs {
		r := decode[result](t, ev)
		if r.OK {
			ok++
		} else {
			cut++
			msg = r.Error
		}
	}
	if ok != maxServiceDepth || cut != 1 || !strings.Contains(msg, "nested deeper than 8 (hostile → hostile → hostile") {
		t.Fatalf("%d answered, %d cut off (%q); want %d and 1", ok, cut, msg, maxServiceDepth)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(results.wait(t, 0)); n != maxServiceDepth+1 {
		t.Fatalf("%d results after the cut; the chain did not stop", n)
	}
	if s := e.status("hostile"); s.State != abi.PluginRunning {
		t.Fatalf("status = %+v", s)
	}
	e.publish("demo.after", 1)
	echoes.wait(t, 1)
}

// WASI gives a plugin no files unless its manifest grants a folder, and then
// that folder only, read-only.
func TestWASIFileGrants(t *testing.T) {
	granted := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	for _, f := range []string{filepath.Join(granted, "note"), secret} {
		if err := os.WriteFile(f, []byte("contents of "+filepath.Base(f)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, path, fs string
		ok             bool
	}{
		{"no grant", filepath.Join(granted, "note"), "", false},
		{"granted folder", filepath.Join(granted, "note"), fmt.Sprintf("\n[grants.wasi]\nfs = [%q]\n", granted), true},
		{"outside the granted folder", secret, fmt.Sprintf("\n[grants.wasi]\nfs = [%q]\n", granted), false},
		{"escape by ..", filepath.Join(granted, "..", filepath.Base(filepath.Dir(secret)), "secret"), fmt.Sprintf("\n[grants.wasi]\nfs = [%q]\n", granted), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newManagerEnv(t)
			reads := e.watch("file.read")
			// [grants.wasi] must come after [config]'s keys: append it as
			// a table of its own.
			manifest := strings.Replace(hostile("readfile", `["kernel.ping"]`, ""), "[config]\n", fmt.Sprintf("[config]\npath = %q\n", c.path), 1) + c.fs
			e.drop("hostile", "hostile", manifest)
			e.start(ManagerConfig{})
			e.waitState("hostile", abi.PluginRunning)
			e.publish("boom.read", 1)
			r := decode[result](t, reads.wait(t, 1)[0])
			if r.OK != c.ok {
				t.Fatalf("read %s: %+v; want ok=%v", c.path, r, c.ok)
			}
			if c.ok && r.Text != "contents of note" {
				t.Fatalf("read %q", r.Text)
			}
		})
	}
}

// With Watch, a plugin dropped in is loaded, a changed one reloaded and a
// removed one unloaded, while the host runs.
func TestHotReload(t *testing.T) {
	e := newManagerEnv(t)
	started := e.watch("kairo.plugin.started")
	unloaded := e.watch("kairo.plugin.unloaded")
	echoes := e.watch("echo.>")
	e.start(ManagerConfig{Watch: true})
	if n := len(e.m.List()); n != 0 {
		t.Fatalf("%d plugins in an empty folder", n)
	}

	e.drop("echo", "echo", echoManifest)
	started.wait(t, 1)
	e.waitState("echo", abi.PluginRunning)
	e.publish("demo.one", 1)
	echoes.wait(t, 1)

	// A new manifest: echo now asks for, and is granted, only demo.two.
	changed := strings.ReplaceAll(echoManifest, `"demo.>"`, `"demo.two"`)
	if err := os.WriteFile(filepath.Join(e.dir, "echo.toml"), []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	started.wait(t, 2)
	if s := e.waitState("echo", abi.PluginRunning); s.Subscribe[0] != "demo.two" {
		t.Fatalf("after the reload: %+v", s)
	}
	e.publish("demo.one", 2)
	e.publish("demo.two", 3)
	evs := echoes.wait(t, 2)
	if evs[1].Type != "echo.demo.two" {
		t.Fatalf("after the reload echo got %s", evs[1].Type)
	}

	if err := os.Remove(filepath.Join(e.dir, "echo.wasm")); err != nil {
		t.Fatal(err)
	}
	unloaded.wait(t, 1)
	if n := len(e.m.List()); n != 0 {
		t.Fatalf("%d plugins after the removal", n)
	}
}

// A plugin whose deadline is short and which loops is stopped by it, and the
// failure names the deadline.
func TestManagerStopsALoop(t *testing.T) {
	e := newManagerEnv(t)
	failed := e.watch("kairo.plugin.failed")
	e.drop("hostile", "hostile", fmt.Sprintf(hostileManifest, `["kernel.ping"]`, "100ms", "loop"))
	e.start(ManagerConfig{})
	e.waitState("hostile", abi.PluginRunning)
	e.publish("boom.loop", 1)
	f := decode[abi.PluginFailed](t, failed.wait(t, 1)[0])
	if f.Reason != string(ReasonDeadline) || !strings.Contains(f.Error, "deadline of 100ms") {
		t.Fatalf("failure = %+v", f)
	}
}
