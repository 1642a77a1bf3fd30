package wasm

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/plugins"
	"github.com/kairo-os/kairo/sdk/plugin"
	"github.com/vmihailenco/msgpack/v5"
)

// A plugin built into the host crosses the imports' own checks: what its
// grants allow goes through, what they do not is refused and reported, and
// a panic stops it as a trap stops a module, with the stack where a module
// leaves its stderr. A new start begins from nothing.

// nativeEcho is a built-in plugin for the tests: it publishes each event's
// type under "echo." (or under the subject its data names), counts the
// batches it saw, and panics on "boom".
func nativeEcho(host plugin.Host) plugin.Plugin {
	batches := 0
	return plugin.Plugin{
		Init: func(abi.PluginConfig) (abi.PluginInfo, error) {
			return abi.PluginInfo{Name: "echo", Version: "0.2.0", Kinds: []string{abi.KindPolicy}}, nil
		},
		Handle: func(b *abi.Batch) (abi.Reply, error) {
			batches++
			var reply abi.Reply
			for _, ev := range b.Events {
				if ev.Type == "demo.boom" {
					panic("boom")
				}
				subject := "echo." + ev.Type
				if ev.Type == "demo.elsewhere" {
					subject = "kairo.system.forged"
				}
				err := host.Publish(&abi.Event{Type: subject, Data: ev.Data})
				if _, cerr := host.Call(abi.MethodLLMChat, nil); cerr != nil && err == nil {
					err = cerr
				}
				text := "ok"
				if err != nil {
					text = err.Error()
				}
				raw, _ := msgpack.Marshal(text)
				reply.Actions = append(reply.Actions, abi.Action{ID: ev.ID, Type: abi.ActionSay, Data: raw})
			}
			host.Log(0, "batch")
			raw, _ := msgpack.Marshal(batches)
			reply.Actions = append(reply.Actions, abi.Action{ID: "count", Type: abi.ActionNoop, Data: raw})
			return reply, nil
		},
	}
}

var nativeEchoManifest = []byte(`[plugin]
name = "echo"
version = "0.2.0"
kinds = ["policy"]

[grants]
publish = ["echo.>"]
`)

func TestNativePlugin(t *testing.T) {
	ctx := context.Background()
	var denied []Denial
	opts := InstanceConfig{Name: "echo", Grants: &Grants{Grants: kernel.Grants{Publish: []string{"echo.>"}}, OnDenied: func(d Denial) { denied = append(denied, d) }}}
	p, err := testEngine.LoadNative(ctx, plugin.Builtin{Manifest: nativeEchoManifest, New: nativeEcho}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	info, err := p.Init(ctx, configOf(nil))
	if err != nil || info.Name != "echo" || info.Version != "0.2.0" {
		t.Fatalf("init = %+v, %v", info, err)
	}

	// The control: a granted publish goes out, stamped with its source.
	out, err := p.Handle(ctx, &abi.Batch{Events: []abi.Event{{ID: "e1", Type: "demo.hi", Data: []byte("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Published) != 1 || out.Published[0].Type != "echo.demo.hi" || out.Published[0].Source != "plugin/echo" || string(out.Published[0].Data) != "x" {
		t.Fatalf("published %+v", out.Published)
	}
	// The call it was not granted is refused, with the errno a module gets.
	if len(out.Calls) != 0 || said(out, 0) != "call llm.chat: "+abi.ErrnoNotGranted.Error() {
		t.Fatalf("calls %+v, reply %+v", out.Calls, out.Reply.Actions)
	}
	// A subject outside its grants is refused and reported as a denial.
	out, err = p.Handle(ctx, &abi.Batch{Events: []abi.Event{{ID: "e2", Type: "demo.elsewhere"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Published) != 0 || !strings.Contains(said(out, 0), "publish kairo.system.forged") {
		t.Fatalf("forged publish: published %+v, reply %+v", out.Published, out.Reply.Actions)
	}
	if len(denied) < 2 || denied[0].Import != abi.ImportCall || denied[1].Target != "kairo.system.forged" {
		t.Fatalf("denials %+v", denied)
	}
	if c := count(out); c != 2 {
		t.Fatalf("the plugin counted %d batches, want 2", c)
	}

	// A panic stops the instance: it fails with the stack, and serves no
	// more.
	_, err = p.Handle(ctx, &abi.Batch{Events: []abi.Event{{ID: "e3", Type: "demo.boom"}}})
	var f *Failure
	if !errors.As(err, &f) || f.Reason != ReasonTrap || !strings.Contains(f.Err.Error(), "panicked: boom") || !strings.Contains(f.Stderr, "nativeEcho") {
		t.Fatalf("panic: %v (%+v)", err, f)
	}
	if _, err := p.Handle(ctx, &abi.Batch{}); !errors.Is(err, ErrStopped) {
		t.Fatalf("a stopped native plugin served: %v", err)
	}

	// A new start is a new plugin: its count starts again.
	p2, err := testEngine.LoadNative(ctx, plugin.Builtin{Manifest: nativeEchoManifest, New: nativeEcho}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close(ctx)
	initPlugin(t, p2, nil)
	out, err = p2.Handle(ctx, &abi.Batch{})
	if err != nil || count(out) != 1 {
		t.Fatalf("restarted: %+v, %v", out.Reply, err)
	}
}

func said(out Output, i int) string {
	var s string
	_ = msgpack.Unmarshal(out.Reply.Actions[i].Data, &s)
	return s
}

func count(out Output) int {
	var n int
	_ = msgpack.Unmarshal(out.Reply.Actions[len(out.Reply.Actions)-1].Data, &n)
	return n
}

// A native plugin's output is capped as a module's is.
func TestNativeOutputCap(t *testing.T) {
	ctx := context.Background()
	big := func(plugin.Host) plugin.Plugin {
		return plugin.Plugin{
			Init: func(abi.PluginConfig) (abi.PluginInfo, error) { return abi.PluginInfo{Name: "big"}, nil },
			Handle: func(*abi.Batch) (abi.Reply, error) {
				return abi.Reply{Actions: []abi.Action{{ID: "a", Type: abi.ActionSay, Data: msgpack.RawMessage(append([]byte{0xc6, 0, 1, 0, 0}, make([]byte, 64<<10)...))}}}, nil
			},
		}
	}
	p, err := testEngine.LoadNative(ctx, plugin.Builtin{New: big}, InstanceConfig{Name: "big", MaxOutput: 32 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	initPlugin(t, p, nil)
	_, err = p.Handle(ctx, &abi.Batch{})
	var f *Failure
	if !errors.As(err, &f) || f.Reason != ReasonLimit {
		t.Fatalf("an output over the cap: %v", err)
	}
}

// The manager runs the built-ins: listed as native, serving their
// subscriptions; a drop-in of a built-in's name is refused (the built-in
// runs), while a module in a built-in folder replaces it.
func TestManagerRunsBuiltins(t *testing.T) {
	builtins := append(plugins.Builtins(), plugin.Builtin{Manifest: nativeEchoManifest, New: nativeEcho})
	e := newManagerEnv(t)
	e.drop("echo", "echo", echoManifest)
	users := e.watch(abi.SubjectUserMessage)
	e.startFolder(ManagerConfig{Builtins: builtins}, Folder{Path: e.dir})
	for _, name := range []string{"echo", "llm", "rules", "terminal", "timer"} {
		s := e.waitState(name, abi.PluginRunning)
		if !s.Native || !s.Builtin || !s.Trusted || s.File != "" {
			t.Fatalf("%s: %+v", name, s)
		}
	}
	e.publish(abi.SubjectTerminalInput, abi.TerminalInput{Text: "run true", MessageID: "m1"})
	if evs := users.wait(t, 1); evs[0].Source != "plugin/terminal" {
		t.Fatalf("the terminal's message %+v", evs[0])
	}

	// A module beside the binary replaces the built-in of its name.
	e2 := newManagerEnv(t)
	e2.drop("echo", "echo", echoManifest)
	e2.startFolder(ManagerConfig{Builtins: builtins}, Folder{Path: e2.dir, Builtin: true})
	if s := e2.waitState("echo", abi.PluginRunning); s.Native || s.File == "" || s.Version != "0.1.0" {
		t.Fatalf("echo from the built-in folder: %+v", s)
	}
	if s := e2.waitState("rules", abi.PluginRunning); !s.Native {
		t.Fatalf("rules: %+v", s)
	}
}

// A plugin's calls of kernel methods carry its grants: the kernel refuses
// what they do not list, as the host module does, and serves what they do.
func TestPluginCallsCarryGrants(t *testing.T) {
	e := newManagerEnv(t)
	s := newPluginSession(context.Background(), "p", &Grants{Grants: kernel.Grants{Call: []string{abi.MethodKernelPing}}})
	if _, aerr := e.kernel.Invoke(context.Background(), abi.MethodKernelPing, &kernel.Call{Session: s, Params: msgpack.RawMessage{0x80}}); aerr != nil {
		t.Fatalf("the granted kernel.ping: %v", aerr)
	}
	if _, aerr := e.kernel.Invoke(context.Background(), abi.MethodEventsReplay, &kernel.Call{Session: s, Params: msgpack.RawMessage{0x80}}); aerr == nil || aerr.Code != abi.CodePermissionDenied {
		t.Fatalf("events.replay, not granted: %v", aerr)
	}
}

// An import's cap stops a native plugin as it stops a module: call args
// over InstanceConfig.MaxCallArgs are a limit, not a call (the calls of
// TestNativePlugin are the control).
func TestNativeImportCap(t *testing.T) {
	ctx := context.Background()
	big := func(host plugin.Host) plugin.Plugin {
		return plugin.Plugin{
			Init: func(abi.PluginConfig) (abi.PluginInfo, error) { return abi.PluginInfo{Name: "big"}, nil },
			Handle: func(*abi.Batch) (abi.Reply, error) {
				_, err := host.Call(abi.MethodKernelPing, make([]byte, 4096))
				return abi.Reply{}, err
			},
		}
	}
	p, err := testEngine.LoadNative(ctx, plugin.Builtin{New: big}, InstanceConfig{Name: "big", MaxCallArgs: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	initPlugin(t, p, nil)
	out, err := p.Handle(ctx, &abi.Batch{})
	var f *Failure
	if !errors.As(err, &f) || f.Reason != ReasonLimit || len(out.Calls) != 0 {
		t.Fatalf("call args over the cap: %v, calls %d, reply %q", err, len(out.Calls), out.Reply.Error)
	}
}
