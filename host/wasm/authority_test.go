package wasm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/manifests"
)

// The manifest of a drop-in that grants itself a kernel method, 4 GiB and
// a one-hour deadline: a drop-in's manifest only asks.
const askerManifest = `[plugin]
name = "asker"
kinds = ["policy"]

[grants]
subscribe = ["boom.>", "plugin.asker.>"]
publish = ["plugin.asker.>", "app.>"]
call = ["process.spawn"]

[limits]
memory = "4GiB"
deadline = "1h"

[config]
mode = "%s"
method = "process.spawn"
n = %d
subscribe = "plugin.asker.go,boom.>"
`

// askerResult is what the asker guest publishes.
type askerResult struct {
	OK      bool   `msgpack:"ok"`
	Error   string `msgpack:"error,omitempty"`
	Refused int    `msgpack:"refused,omitempty"`
}

// askSpawn has the asker call process.spawn once and returns what it got.
func (e *managerEnv) askSpawn(results *received, n int) askerResult {
	e.t.Helper()
	e.publish("plugin.asker.go", n)
	return decode[askerResult](e.t, results.wait(e.t, n)[n-1])
}

// A drop-in whose manifest grants itself process.spawn, 4 GiB and an hour
// gets none of it: its call fails "not granted", reported as one denied
// event; its limits are capped; `kairo plugins` shows what it asked. The
// operator's grant in [plugins.NAME.grants] lets the same plugin call it,
// and a built-in with the same manifest keeps its grants.
func TestDropInGetsWhatTheOperatorGrants(t *testing.T) {
	t.Run("drop-in", func(t *testing.T) {
		e := newManagerEnv(t)
		results := e.watch("plugin.asker.result")
		denied := e.watch("kairo.plugin.denied")
		e.drop("asker", "asker", fmt.Sprintf(askerManifest, "call", 0))
		e.startFolder(ManagerConfig{}, Folder{Path: e.dir})
		s := e.waitState("asker", abi.PluginRunning)

		if len(s.Call) != 0 || !slices.Equal(s.Publish, []string{"plugin.asker.>"}) || !slices.Equal(s.Subscribe, []string{"plugin.asker.>"}) {
			t.Errorf("granted: call %q, publish %q, subscribe %q; want no method and its namespace", s.Call, s.Publish, s.Subscribe)
		}
		want := &abi.PluginGrant{Plugin: "asker", Call: []string{abi.MethodProcessSpawn}, Publish: []string{"app.>"}, Subscribe: []string{"boom.>"}}
		if fmt.Sprint(s.Requested) != fmt.Sprint(want) {
			t.Errorf("requested = %+v, want %+v", s.Requested, want)
		}
		if !slices.Equal(s.Capped, []string{"memory 4GiB capped to 256MiB", "deadline 1h0m0s capped to 5s"}) {
			t.Errorf("capped = %q", s.Capped)
		}
		// Its subscription to boom.> was refused at start, as one event.
		d := decode[abi.PluginDenied](t, denied.wait(t, 1)[0])
		if d.Import != ImportSubscribe || d.Target != "boom.>" || d.Count != 1 {
			t.Errorf("denied at start = %+v", d)
		}

		if r := e.askSpawn(results, 1); r.OK || !strings.Contains(r.Error, "call process.spawn: not granted") {
			t.Fatalf("process.spawn from a drop-in: %+v, want not granted", r)
		}
		d = decode[abi.PluginDenied](t, denied.wait(t, 2)[1])
		if d.Plugin != "asker" || d.Import != abi.ImportCall || d.Target != abi.MethodProcessSpawn || d.Count != 1 {
			t.Errorf("denied = %+v", d)
		}
		// The host loads it with the ceilings, not what it asked.
		u, _ := e.m.unit("asker")
		u.mu.Lock()
		lim := u.manifest.Limits
		u.mu.Unlock()
		if lim.MemoryPages() != 4096 || lim.DeadlineDuration().Seconds() != 5 {
			t.Errorf("limits as loaded = %+v", lim)
		}
	})

	t.Run("granted in kairo.toml", func(t *testing.T) {
		e := newManagerEnv(t)
		results := e.watch("plugin.asker.result")
		e.drop("asker", "asker", fmt.Sprintf(askerManifest, "call", 0))
		e.startFolder(ManagerConfig{Overrides: map[string]manifests.PluginOverride{
			"asker": {Grants: manifests.OperatorGrants{Call: []string{abi.MethodProcessSpawn}}},
		}}, Folder{Path: e.dir})
		s := e.waitState("asker", abi.PluginRunning)
		if !slices.Equal(s.Call, []string{abi.MethodProcessSpawn}) || s.Requested == nil || len(s.Requested.Call) != 0 {
			t.Errorf("granted call %q, requested %+v", s.Call, s.Requested)
		}
		if r := e.askSpawn(results, 1); strings.Contains(r.Error, "not granted") {
			t.Fatalf("process.spawn granted by the operator: %+v", r)
		}
	})

	t.Run("built-in", func(t *testing.T) {
		e := newManagerEnv(t)
		results := e.watch("plugin.asker.result")
		e.drop("asker", "asker", strings.Replace(fmt.Sprintf(askerManifest, "call", 0), "plugin.asker.go,boom.>", "plugin.asker.go", 1))
		e.startFolder(ManagerConfig{}, Folder{Path: e.dir, Builtin: true})
		s := e.waitState("asker", abi.PluginRunning)
		if !slices.Equal(s.Call, []string{abi.MethodProcessSpawn}) || s.Requested != nil {
			t.Errorf("built-in: call %q, requested %+v; want its manifest's grants", s.Call, s.Requested)
		}
		if r := e.askSpawn(results, 1); strings.Contains(r.Error, "not granted") {
			t.Fatalf("process.spawn from a built-in that grants it: %+v", r)
		}
	})
}

// 100,000 publishes refused in one batch are one kairo.plugin.denied event
// that counts them, not 100,000 events.
func TestDeniedOncePerBatch(t *testing.T) {
	e := newManagerEnv(t)
	results := e.watch("plugin.asker.result")
	denied := e.watch("kairo.plugin.denied")
	e.drop("asker", "asker", strings.Replace(fmt.Sprintf(askerManifest, "deny", 100000), "plugin.asker.go,boom.>", "plugin.asker.go", 1))
	// 100,000 refusals can take over the default deadline of a second on
	// a loaded machine.
	e.startFolder(ManagerConfig{Deadline: 30 * time.Second}, Folder{Path: e.dir})
	e.waitState("asker", abi.PluginRunning)
	e.publish("plugin.asker.go", 1)
	if r := decode[askerResult](t, results.wait(t, 1)[0]); !r.OK || r.Refused != 100000 {
		t.Fatalf("the guest says %+v, want 100000 refused", r)
	}
	evs := denied.wait(t, 1)
	d := decode[abi.PluginDenied](t, evs[0])
	if d.Count != 100000 || d.Import != abi.ImportPublish || d.Target != "forbidden.flood" || !slices.Equal(d.Targets, []string{"publish forbidden.flood"}) {
		t.Errorf("denied = %+v", d)
	}
	// The result was published after the batch's denials were reported,
	// so a second denied event would have arrived by now.
	var n int
	err := e.bus.Replay(context.Background(), queryAll(t, "kairo.plugin.denied"), func(*abi.Event) error { n++; return nil })
	if err != nil || n != 1 {
		t.Errorf("%d kairo.plugin.denied events stored (%v), want 1", n, err)
	}
	if s := e.status("asker"); s.Denied != 100000 || s.State != abi.PluginRunning {
		t.Errorf("status: denied %d, state %s", s.Denied, s.State)
	}
}

// operatorSession is a session of the operator, as the IPC door makes one
// for a local client.
func operatorSession() *pluginSession {
	return &pluginSession{ctx: context.Background(), caller: kernel.Caller{Kind: kernel.KindOperator, UID: 1000}}
}

func (e *managerEnv) invoke(s kernel.Session, method string, params any) (msgpack.RawMessage, *abi.Error) {
	e.t.Helper()
	raw, err := msgpack.Marshal(params)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.kernel.Invoke(context.Background(), method, &kernel.Call{Session: s, Params: raw})
}

// plugins.grant is the operator's alone; what it grants applies at once,
// is recorded in the log and survives a restart of the daemon;
// plugins.revoke takes it back.
func TestGrantMethod(t *testing.T) {
	e := newManagerEnv(t)
	results := e.watch("plugin.asker.result")
	e.drop("asker", "asker", fmt.Sprintf(askerManifest, "call", 0))
	drop := Folder{Path: e.dir}
	e.startFolder(ManagerConfig{}, drop)
	e.waitState("asker", abi.PluginRunning)
	grant := abi.PluginGrant{Plugin: "asker", Call: []string{abi.MethodProcessSpawn}}

	for _, s := range []kernel.Session{newPluginSession(context.Background(), "asker", &Grants{Grants: kernel.Grants{Call: []string{abi.MethodPluginsGrant}}}),
		&pluginSession{ctx: context.Background(), caller: kernel.Caller{Kind: kernel.KindSkill, Name: "s"}}} {
		if _, aerr := e.invoke(s, abi.MethodPluginsGrant, grant); aerr == nil || aerr.Code != abi.CodePermissionDenied {
			t.Errorf("plugins.grant by %s: %v, want permission_denied", s.Caller(), aerr)
		}
	}
	if r := e.askSpawn(results, 1); !strings.Contains(r.Error, "not granted") {
		t.Fatalf("before the grant: %+v", r)
	}
	if _, aerr := e.invoke(operatorSession(), abi.MethodPluginsGrant, abi.PluginGrant{Plugin: "nosuch", Call: []string{"x"}}); aerr == nil || aerr.Code != abi.CodeNotFound {
		t.Errorf("a grant to no plugin: %v", aerr)
	}
	raw, aerr := e.invoke(operatorSession(), abi.MethodPluginsGrant, grant)
	if aerr != nil {
		t.Fatal(aerr)
	}
	var st abi.PluginStatus
	if err := msgpack.Unmarshal(raw, &st); err != nil || !slices.Equal(st.Call, []string{abi.MethodProcessSpawn}) {
		t.Fatalf("plugins.grant answered %+v (%v)", st, err)
	}
	var recorded []abi.PluginGrant
	err := e.bus.Replay(context.Background(), queryAll(t, "kairo.plugin.granted"), func(ev *abi.Event) error {
		recorded = append(recorded, decode[abi.PluginGrant](t, *ev))
		if ev.Source != abi.PrincipalHost {
			t.Errorf("kairo.plugin.granted from %q", ev.Source)
		}
		return nil
	})
	if err != nil || len(recorded) != 1 || recorded[0].By != "operator/1000" || !slices.Equal(recorded[0].Call, []string{abi.MethodProcessSpawn}) {
		t.Fatalf("the log holds %+v (%v), want the one grant, by operator/1000", recorded, err)
	}
	e.waitState("asker", abi.PluginRunning)
	if r := e.askSpawn(results, 2); strings.Contains(r.Error, "not granted") {
		t.Fatalf("after plugins.grant: %+v", r)
	}

	// A restart folds the grant from the log.
	e.m.Stop()
	e.start2(drop)
	if s := e.waitState("asker", abi.PluginRunning); !slices.Equal(s.Call, []string{abi.MethodProcessSpawn}) {
		t.Fatalf("after a restart: call %q, want the grant of the log", s.Call)
	}
	if r := e.askSpawn(results, 3); strings.Contains(r.Error, "not granted") {
		t.Fatalf("after a restart: %+v", r)
	}

	if _, aerr := e.invoke(operatorSession(), abi.MethodPluginsRevoke, grant); aerr != nil {
		t.Fatal(aerr)
	}
	e.m.Stop()
	e.start2(drop)
	if s := e.waitState("asker", abi.PluginRunning); len(s.Call) != 0 {
		t.Fatalf("after plugins.revoke and a restart: call %q", s.Call)
	}
	if r := e.askSpawn(results, 4); !strings.Contains(r.Error, "not granted") {
		t.Fatalf("after plugins.revoke: %+v", r)
	}
}

// start2 starts a new manager over the same kernel and log, as a daemon
// restarted.
func (e *managerEnv) start2(f Folder) {
	e.t.Helper()
	e.m = nil
	e.startFolder(ManagerConfig{}, f)
}

// The ceilings bound the operator's own [plugins.NAME] as well, and a
// drop-in that imports call with nothing granted still loads.
func TestCeilingsBoundOverrides(t *testing.T) {
	e := newManagerEnv(t)
	e.drop("asker", "asker", strings.Replace(fmt.Sprintf(askerManifest, "call", 0), "plugin.asker.go,boom.>", "plugin.asker.go", 1))
	e.startFolder(ManagerConfig{MaxMemoryPages: 2048, MaxDeadline: 2e9, Overrides: map[string]manifests.PluginOverride{
		"asker": {Memory: 3 * manifests.GiB, Deadline: "10s"},
	}}, Folder{Path: e.dir})
	s := e.waitState("asker", abi.PluginRunning)
	if !slices.Equal(s.Capped, []string{"memory 3GiB capped to 128MiB", "deadline 10s capped to 2s"}) {
		t.Errorf("capped = %q", s.Capped)
	}
}

func queryAll(t *testing.T, subject string) bus.Query {
	t.Helper()
	pt, err := abi.CompilePattern(subject)
	if err != nil {
		t.Fatal(err)
	}
	return bus.Query{Pattern: pt}
}

// On a store several hosts share, a grant the operator recorded on
// another host is that host's: a restart does not fold it. The control: the
// same grant recorded by this host is folded.
func TestGrantOfAnotherHost(t *testing.T) {
	e := newManagerEnv(t)
	e.drop("asker", "asker", fmt.Sprintf(askerManifest, "call", 0))
	drop := Folder{Path: e.dir}
	record := func(id, host string) {
		t.Helper()
		data, err := msgpack.Marshal(abi.PluginGrant{Plugin: "asker", Call: []string{abi.MethodProcessSpawn}, By: "operator/1000"})
		if err != nil {
			t.Fatal(err)
		}
		ev := &abi.Event{ID: id, Type: abi.SubjectPluginGranted, Source: abi.PrincipalHost, Time: time.Now(), Data: data, Host: host}
		if err := e.bus.Store().Append([]*abi.Event{ev}, nil, make([]bool, 1)); err != nil {
			t.Fatal(err)
		}
	}
	record("grant-of-b", "b")
	e.startFolder(ManagerConfig{}, drop)
	if s := e.waitState("asker", abi.PluginRunning); len(s.Call) != 0 {
		t.Fatalf("a grant recorded on host b was folded here: call %q", s.Call)
	}
	e.m.Stop()
	record("grant-of-this-host", e.bus.Host())
	e.start2(drop)
	if s := e.waitState("asker", abi.PluginRunning); !slices.Equal(s.Call, []string{abi.MethodProcessSpawn}) {
		t.Fatalf("this host's own grant: call %q, want it folded", s.Call)
	}
}
