package kernel

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/sandbox"
	"github.com/vmihailenco/msgpack/v5"
)

// testSession is an in-process door into the kernel for one principal, as
// the plugin engine and the agent are.
type testSession struct {
	ctx    context.Context
	caller Caller
}

func (s *testSession) Caller() Caller                       { return s.caller }
func (s *testSession) Context() context.Context             { return s.ctx }
func (s *testSession) PushEvents(uint64, []abi.Event) error { return nil }
func (s *testSession) PushChunks([]abi.StreamChunk) error   { return nil }
func (s *testSession) EndStream(uint64, *abi.Error) error   { return nil }

func newTestKernel(t *testing.T) *Kernel {
	t.Helper()
	b := bus.New(bus.NewMemoryStore(0), bus.Config{})
	k := New(b, Config{})
	t.Cleanup(func() { k.Close(); b.Close() })
	return k
}

// call invokes method as caller and decodes the result into out (when not
// nil); it returns the kernel's error.
func call(t *testing.T, k *Kernel, caller Caller, method string, params, out any) *abi.Error {
	t.Helper()
	raw, err := msgpack.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	s := &testSession{ctx: t.Context(), caller: caller}
	res, aerr := k.Invoke(t.Context(), method, &Call{Session: s, Params: raw})
	if aerr == nil && out != nil {
		if err := msgpack.Unmarshal(res, out); err != nil {
			t.Fatal(err)
		}
	}
	return aerr
}

func wantDenied(t *testing.T, what string, aerr *abi.Error, words string) {
	t.Helper()
	if aerr == nil {
		t.Fatalf("%s: allowed, want it refused with %q", what, words)
	}
	if !strings.Contains(aerr.Message, words) {
		t.Fatalf("%s: refused with %q, want %q in it", what, aerr.Message, words)
	}
}

func wantAllowed(t *testing.T, what string, aerr *abi.Error) {
	t.Helper()
	if aerr != nil {
		t.Fatalf("%s: refused: %s", what, aerr.Message)
	}
}

// TestKernelSubjects: nobody publishes a kernel subject through
// events.publish — not the operator, not a skill granted "kairo.>" — so a
// forged kairo.process.exited or kairo.intent.cancel never reaches the
// bus. The control: an application subject is published, with the source
// the kernel stamps.
func TestKernelSubjects(t *testing.T) {
	k := newTestKernel(t)
	operator := Caller{UID: 1000, PID: 42}
	skill := Caller{Kind: KindSkill, Name: "s", Grants: &Grants{Call: []string{abi.MethodEventsPublish}, Publish: []string{">"}}}
	for _, subject := range []string{"kairo.process.exited", "kairo.intent.cancel", "kairo.tool.result", "kairo.agent.action",
		"kairo.plugin.failed", "kairo.sandbox.denied", "kairo.system.started", "kairo.llm.response", "kairo.approval.decided"} {
		for _, who := range []Caller{operator, skill} {
			aerr := call(t, k, who, abi.MethodEventsPublish, abi.PublishParams{Event: abi.Event{Type: subject}}, nil)
			wantDenied(t, fmt.Sprintf("%s publishes %s", who, subject), aerr, "is a kernel subject")
		}
	}
	var res abi.PublishResult
	wantAllowed(t, "operator publishes app.order.created", call(t, k, operator, abi.MethodEventsPublish, abi.PublishParams{Event: abi.Event{Type: "app.order.created"}}, &res))
	wantAllowed(t, "skill publishes kairo.user.message", call(t, k, skill, abi.MethodEventsPublish, abi.PublishParams{Event: abi.Event{Type: abi.SubjectUserMessage}}, nil))
	var got []string
	k.Bus.Replay(t.Context(), bus.Query{}, func(ev *abi.Event) error {
		got = append(got, ev.Type+" "+ev.Source)
		return nil
	})
	want := []string{"app.order.created operator/1000", "kairo.user.message skill/s"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the bus holds %q, want %q", got, want)
	}
}

// TestSourceIsStamped: a caller cannot name another as the source of what
// it publishes; leaving it empty, or naming itself, works.
func TestSourceIsStamped(t *testing.T) {
	k := newTestKernel(t)
	plugin := Caller{Kind: KindPlugin, Name: "echo"}
	aerr := call(t, k, plugin, abi.MethodEventsPublish, abi.PublishParams{Event: abi.Event{Type: "app.x", Source: "kernel/proc"}}, nil)
	wantDenied(t, "a plugin names the kernel as source", aerr, `the kernel sets the source from who publishes (here "plugin/echo")`)
	wantAllowed(t, "a plugin names itself", call(t, k, plugin, abi.MethodEventsPublish, abi.PublishParams{Event: abi.Event{Type: "app.x", Source: "plugin/echo"}}, nil))
}

// TestCancelIsTheKernels: the cancel of a run loop reaches the bus only
// through intent.cancel, as the kernel's record of who asked.
func TestCancelIsTheKernels(t *testing.T) {
	k := newTestKernel(t)
	skill := Caller{Kind: KindSkill, Name: "s", Grants: &Grants{Call: []string{abi.MethodEventsPublish}, Publish: []string{"kairo.>"}}}
	wantDenied(t, "a skill without intent.cancel cancels", call(t, k, skill, abi.MethodIntentCancel, abi.CancelParams{CorrelationID: "run-1"}, nil), "not granted: intent.cancel")
	granted := Caller{Kind: KindSkill, Name: "s", Grants: &Grants{Call: []string{abi.MethodIntentCancel}}}
	wantDenied(t, "a skill granted intent.cancel cancels another's run loop", call(t, k, granted, abi.MethodIntentCancel, abi.CancelParams{CorrelationID: "run-1"}, nil), "may cancel only its own run loop")
	wantAllowed(t, "the operator cancels", call(t, k, Caller{UID: 7}, abi.MethodIntentCancel, abi.CancelParams{CorrelationID: "run-1"}, nil))
	var got []abi.Event
	k.Bus.Replay(t.Context(), bus.Query{}, func(ev *abi.Event) error { got = append(got, *ev); return nil })
	if len(got) != 1 || got[0].Type != abi.SubjectIntentCancel || got[0].Source != "operator/7" || got[0].CorrelationID != "run-1" {
		t.Fatalf("the bus holds %+v, want one kairo.intent.cancel of run-1 from operator/7", got)
	}
}

// TestSpawnAttenuated: a principal other than the operator starts no more
// than it holds. It names no manifest file, works in no folder outside its
// grants (a link inside one that leads out included), and runs only the
// installed skills it is allowed, by name. Each refusal has its allowed
// neighbour.
func TestSpawnAttenuated(t *testing.T) {
	k := newTestKernel(t)
	dir := t.TempDir()
	skillDir := filepath.Join(dir, "skills", "hello")
	os.MkdirAll(skillDir, 0o755)
	manifest := filepath.Join(skillDir, "skill.toml")
	os.WriteFile(manifest, []byte("[skill]\nname = \"hello\"\ncommand = [\"/bin/true\"]\n\n[fs]\nexec = [\"/bin/true\"]\n"), 0o644)
	k.SetSkills(func(name string) (string, bool) { return manifest, name == "hello" })
	granted := filepath.Join(dir, "granted")
	os.MkdirAll(filepath.Join(granted, "sub"), 0o755)
	os.Symlink("/etc", filepath.Join(granted, "out"))

	agent := Caller{Kind: KindAgent, Name: "default", Spawn: &SpawnAuthority{Skills: []string{"hello"}, Commands: true, Folders: []string{granted}}}
	plugin := Caller{Kind: KindPlugin, Name: "p", Spawn: &SpawnAuthority{Skills: []string{"*"}}}
	spawn := func(who Caller, p abi.SpawnParams) *abi.Error {
		var info abi.ProcessInfo
		aerr := call(t, k, who, abi.MethodProcessSpawn, p, &info)
		if aerr == nil {
			s, _ := k.Proc.Get(info.ID)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			s.Wait(ctx)
		}
		return aerr
	}

	wantDenied(t, "the agent names a manifest", spawn(agent, abi.SpawnParams{Manifest: manifest}), "may not name a manifest file")
	wantAllowed(t, "the agent runs an installed skill by name", spawn(agent, abi.SpawnParams{Skill: "hello"}))
	wantDenied(t, "the agent runs a skill it is not allowed", spawn(plugin, abi.SpawnParams{Skill: "nope"}), `no skill named "nope"`)
	wantDenied(t, "the agent runs a skill outside its list", spawn(Caller{Kind: KindAgent, Name: "a", Spawn: &SpawnAuthority{Skills: []string{"other"}}}, abi.SpawnParams{Skill: "hello"}), `may not run the skill "hello"`)

	wantDenied(t, "the agent works in /etc", spawn(agent, abi.SpawnParams{Argv: []string{"/bin/true"}, Cwd: "/etc"}), `cwd "/etc" is outside what agent default may write`)
	wantDenied(t, "the agent works through a link out of its folder", spawn(agent, abi.SpawnParams{Argv: []string{"/bin/true"}, Cwd: filepath.Join(granted, "out")}), "is outside what agent default may write")
	wantAllowed(t, "the agent works in its folder", spawn(agent, abi.SpawnParams{Argv: []string{"/bin/true"}, Cwd: filepath.Join(granted, "sub")}))
	wantAllowed(t, "the agent works in a workspace Kairo makes", spawn(agent, abi.SpawnParams{Argv: []string{"/bin/true"}}))

	wantDenied(t, "a plugin allowed skills only runs a command", spawn(plugin, abi.SpawnParams{Argv: []string{"/bin/true"}}), "may run only installed skills by name")
	wantAllowed(t, "the plugin runs a skill", spawn(plugin, abi.SpawnParams{Skill: "hello"}))

	// The operator names any manifest and any folder.
	wantAllowed(t, "the operator names a manifest", spawn(Caller{}, abi.SpawnParams{Manifest: manifest}))
	wantAllowed(t, "the operator works in /etc", spawn(Caller{}, abi.SpawnParams{Argv: []string{"/bin/true"}, Cwd: "/etc"}))
}

// TestIntersect: a child's sandbox is its own grants cut to its spawner's.
func TestIntersect(t *testing.T) {
	ceiling := &sandbox.Policy{
		Read: []string{"/usr", "/data"}, Write: []string{"/data/out", "/w0"}, Exec: []string{"/usr/bin"},
		ConnectTCP: []uint16{443}, UDP: false, Hosts: []string{"*.github.com", "pypi.org:443"},
		Limits: sandbox.Limits{Memory: 1 << 30, Processes: 64, Wall: time.Minute},
	}
	ceiling.Env = []string{"PATH=/usr/bin", "SHARED=yes"}
	child := &sandbox.Policy{
		Read: []string{"/", "/data/in"}, Write: []string{"/data", "/home/u1"}, Exec: []string{"/usr/bin/python3", "/opt/bin"},
		ConnectTCP: []uint16{443, 22}, UDP: true,
		// A name the spawner's list covers stays, one without a port keeps
		// the port the spawner has, and what it lacks goes.
		Hosts:  []string{"api.github.com:443", "pypi.org", "evil.example"},
		Limits: sandbox.Limits{Memory: 4 << 30, CPUSeconds: 10},
		Env:    []string{"PATH=/usr/local/bin", "HOME=/w1", "DEPLOY_TOKEN=secret", "SHARED=yes", "SHARED2=no"},
	}
	got := Intersect(child, ceiling, "/w1", "/t1")
	want := &sandbox.Policy{
		Read: []string{"/usr", "/data", "/data/out", "/w0", "/usr/bin", "/data/in"}, Write: []string{"/data/out", "/w1", "/t1"},
		Exec: []string{"/usr/bin/python3"}, Unix: []string{}, ConnectTCP: []uint16{443}, BindTCP: []uint16{},
		Hosts:  []string{"api.github.com:443", "pypi.org:443"},
		Limits: sandbox.Limits{Memory: 1 << 30, Processes: 64, CPUSeconds: 10, Wall: time.Minute},
		Env:    []string{"PATH=/usr/local/bin", "HOME=/w1", "SHARED=yes"}, // not the child's own secrets
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Intersect:\n got  %+v\n want %+v", got, want)
	}
}

// TestOnlyTheOperatorLooksPastItsOwn: the agent runs with the daemon's uid
// (root here), yet sees and attaches to only the processes it spawned; the
// operator, the control, sees and attaches to the agent's.
func TestOnlyTheOperatorLooksPastItsOwn(t *testing.T) {
	k := newTestKernel(t)
	operator := &testSession{ctx: t.Context(), caller: Caller{UID: 0}}
	agent := &testSession{ctx: t.Context(), caller: Caller{Kind: KindAgent, Name: "default", UID: 0, Spawn: &SpawnAuthority{Commands: true}}}
	spawn := func(s *testSession) string {
		raw, _ := msgpack.Marshal(abi.SpawnParams{Argv: []string{"/bin/sleep", "30"}})
		res, aerr := k.Invoke(t.Context(), abi.MethodProcessSpawn, &Call{Session: s, Params: raw})
		if aerr != nil {
			t.Fatal(aerr)
		}
		var info abi.ProcessInfo
		msgpack.Unmarshal(res, &info)
		return info.ID
	}
	mine, theirs := spawn(agent), spawn(operator)
	list := func(s *testSession) []string {
		res, aerr := k.Invoke(t.Context(), abi.MethodProcessStatus, &Call{Session: s})
		if aerr != nil {
			t.Fatal(aerr)
		}
		var infos []abi.ProcessInfo
		msgpack.Unmarshal(res, &infos)
		var ids []string
		for _, i := range infos {
			ids = append(ids, i.ID)
		}
		return ids
	}
	if got := list(agent); !reflect.DeepEqual(got, []string{mine}) {
		t.Fatalf("the agent lists %v, want only its own %s", got, mine)
	}
	raw, _ := msgpack.Marshal(abi.ProcessRef{ProcessID: theirs})
	_, aerr := k.Invoke(t.Context(), abi.MethodProcessAttach, &Call{Session: agent, Params: raw})
	wantDenied(t, "the agent attaches to the operator's process", aerr, "belongs to another user")
	if got := list(operator); len(got) != 2 {
		t.Fatalf("root as the operator lists %v, want both processes", got)
	}
	raw, _ = msgpack.Marshal(abi.ProcessRef{ProcessID: mine})
	_, aerr = k.Invoke(t.Context(), abi.MethodProcessAttach, &Call{Session: operator, Params: raw})
	wantAllowed(t, "the operator attaches to the agent's process", aerr)
}
