package wasm

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/manifests"
)

// denials records what OnDenied was told.
type denials struct {
	mu   sync.Mutex
	list []Denial
}

func (d *denials) add(x Denial) {
	d.mu.Lock()
	d.list = append(d.list, x)
	d.mu.Unlock()
}

func (d *denials) get() []Denial {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.list)
}

// A call of a method the grants leave out fails inside the plugin with
// "not granted" and is reported to OnDenied, and the plugin keeps serving;
// granted, the same call gets its token. The hostile guest in mode
// "imports" calls kernel.ping and fails its batch when the call fails.
func TestCallNotGranted(t *testing.T) {
	t.Run("granted", func(t *testing.T) {
		var seen denials
		p := load(t, "hostile", InstanceConfig{Grants: &Grants{Grants: kernel.Grants{Call: []string{"events.query", abi.MethodKernelPing}, Publish: []string{"flood"}}, OnDenied: seen.add}})
		initPlugin(t, p, map[string]any{"mode": "imports"})
		out, err := p.Handle(context.Background(), testBatch(0, 0))
		if err != nil || out.Reply.Error != "" {
			t.Fatalf("handle: %v %q", err, out.Reply.Error)
		}
		if len(out.Calls) != 1 || out.Calls[0].Method != abi.MethodKernelPing || out.Calls[0].Token != 1 || out.Reply.Actions[0].ID != "1" {
			t.Fatalf("calls = %+v, reply %+v; want kernel.ping with token 1", out.Calls, out.Reply)
		}
		if d := seen.get(); len(d) != 0 {
			t.Fatalf("denials = %+v; want none", d)
		}
	})
	t.Run("not granted", func(t *testing.T) {
		var seen denials
		p := load(t, "hostile", InstanceConfig{Grants: &Grants{Grants: kernel.Grants{Call: []string{"events.query"}, Publish: []string{"flood"}}, OnDenied: seen.add}})
		initPlugin(t, p, map[string]any{"mode": "imports"})
		for round := range 2 {
			out, err := p.Handle(context.Background(), testBatch(0, 0))
			if err != nil {
				t.Fatalf("round %d: a refused call stopped the plugin: %v", round, err)
			}
			if len(out.Calls) != 0 || !strings.Contains(out.Reply.Error, "call kernel.ping: not granted") {
				t.Fatalf("round %d: calls %+v, reply error %q; want none and the plugin's not granted error", round, out.Calls, out.Reply.Error)
			}
		}
		want := Denial{Plugin: "hostile", Import: abi.ImportCall, Target: abi.MethodKernelPing}
		if d := seen.get(); len(d) != 2 || d[0] != want || d[1] != want {
			t.Fatalf("denials = %+v; want %+v twice", d, want)
		}
		if msg := want.Error(); msg != "plugin hostile: call: not granted: kernel.ping" {
			t.Fatalf("Denial.Error() = %q", msg)
		}
	})
}

// Publishing on a subject the grants leave out fails inside the plugin
// with "not granted" and is reported; granted, the same subject goes
// through. The hostile guest in mode "flood" publishes "flood" until the
// host refuses, and says why.
func TestPublishNotGranted(t *testing.T) {
	t.Run("granted", func(t *testing.T) {
		var seen denials
		p := load(t, "hostile", InstanceConfig{MaxPublishes: 10, Grants: &Grants{Grants: kernel.Grants{Call: []string{abi.MethodKernelPing}, Publish: []string{"kairo.>", "flood"}}, OnDenied: seen.add}})
		initPlugin(t, p, map[string]any{"mode": "flood"})
		out, err := p.Handle(context.Background(), testBatch(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Published) != 10 || out.Published[0].Type != "flood" || !strings.Contains(out.Reply.Thought, "refused after 10") || strings.Contains(out.Reply.Thought, "not granted") {
			t.Fatalf("published %d, thought %q; want 10, then busy", len(out.Published), out.Reply.Thought)
		}
		if d := seen.get(); len(d) != 0 {
			t.Fatalf("denials = %+v; want none", d)
		}
	})
	t.Run("not granted", func(t *testing.T) {
		var seen denials
		p := load(t, "hostile", InstanceConfig{MaxPublishes: 10, Grants: &Grants{Grants: kernel.Grants{Call: []string{abi.MethodKernelPing}, Publish: []string{"kairo.>", "flood.*"}}, OnDenied: seen.add}})
		initPlugin(t, p, map[string]any{"mode": "flood"})
		out, err := p.Handle(context.Background(), testBatch(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Published) != 0 || !strings.Contains(out.Reply.Thought, "refused after 0: publish flood: not granted") {
			t.Fatalf("published %d, thought %q; want none and not granted", len(out.Published), out.Reply.Thought)
		}
		want := Denial{Plugin: "hostile", Import: abi.ImportPublish, Target: "flood"}
		if d := seen.get(); len(d) != 1 || d[0] != want {
			t.Fatalf("denials = %+v; want %+v", d, want)
		}
		if _, err := p.Handle(context.Background(), testBatch(0, 0)); err != nil {
			t.Fatalf("the next batch: %v", err)
		}
	})
}

// Publish grants match subjects as the bus does: "*" one token, ">" the rest.
func TestAllowPublish(t *testing.T) {
	g := &Grants{Grants: kernel.Grants{Publish: []string{"agent.*.said", "tool.>", "exact"}}}
	if err := g.compile(); err != nil {
		t.Fatal(err)
	}
	for subject, want := range map[string]bool{
		"agent.a.said": true, "agent.said": false, "agent.a.b.said": false,
		"tool.x": true, "tool.x.y": true, "tool": false,
		"exact": true, "exact.x": false, "other": false,
	} {
		if got := g.allowPublish(subject); got != want {
			t.Errorf("allowPublish(%q) = %v, want %v", subject, got, want)
		}
	}
	if g.allowCall("anything") {
		t.Error("allowCall with no call grants = true")
	}
	var all *Grants
	if !all.allowCall("anything") || !all.allowPublish("anything") {
		t.Error("nil grants refuse")
	}
}

// No grant covers a kernel subject: a plugin granted "kairo.>" or ">" still
// cannot publish kairo.process.exited or kairo.intent.cancel; the control is
// that the same grants publish the subjects next to them.
func TestKernelSubjectsNotGranted(t *testing.T) {
	for _, grant := range []string{">", "kairo.>", "kairo.process.exited"} {
		g := &Grants{Grants: kernel.Grants{Publish: []string{grant}}}
		if err := g.compile(); err != nil {
			t.Fatal(err)
		}
		for _, subject := range []string{"kairo.process.exited", "kairo.intent.cancel", "kairo.tool.result", "kairo.agent.action", "kairo.plugin.failed", "kairo.system.stopping"} {
			if g.allowPublish(subject) {
				t.Errorf("grant %q allows the kernel subject %s", grant, subject)
			}
		}
	}
	g := &Grants{Grants: kernel.Grants{Publish: []string{"kairo.>", "app.>"}}}
	g.compile()
	for _, subject := range []string{"kairo.user.message", "kairo.observation", "kairo.timer.fired", "app.order.created"} {
		if !g.allowPublish(subject) {
			t.Errorf("grants %v refuse %s", g.Publish, subject)
		}
	}
}

// A module that imports call or publish while its grants list no method or
// no subject at all is refused at load, with a message that says which; a
// module that does not import them loads with empty grants.
func TestImportNotGrantedRefusedAtLoad(t *testing.T) {
	cases := []struct {
		name   string
		wasm   []byte
		grants *Grants
		says   string // "" when it loads
	}{
		{"Go guest importing call", guests["hostile"], &Grants{Grants: kernel.Grants{Publish: []string{"flood"}}}, "imports kairo.call, but its manifest grants no method to call"},
		{"Go guest importing publish", guests["hostile"], &Grants{Grants: kernel.Grants{Call: []string{abi.MethodKernelPing}}}, "imports kairo.publish, but its manifest grants no subject"},
		{"hand-assembled guest importing call", asmGuest{version: 1, extraImport: abi.ImportCall}.bytes(), &Grants{}, "imports kairo.call"},
		{"a bad publish grant", guests["echo"], &Grants{Grants: kernel.Grants{Publish: []string{"echo.>.x"}}}, "grants: publish: invalid subject \"echo.>.x\""},
		{"echo imports publish only", guests["echo"], &Grants{Grants: kernel.Grants{Publish: []string{"echo.>"}}}, ""},
		{"hand-assembled guest importing only log", asmGuest{version: 1}.bytes(), &Grants{}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := testEngine.Load(context.Background(), c.wasm, InstanceConfig{Name: c.name, Grants: c.grants})
			if c.says == "" {
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				p.Close(context.Background())
				return
			}
			var f *Failure
			if !errors.As(err, &f) || f.Reason != ReasonRefused || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("err = %v; want refused, saying %q", err, c.says)
			}
			t.Log(err)
		})
	}
}

func TestCheckSubscriptions(t *testing.T) {
	m, err := manifests.ParsePlugin("p.toml", []byte("[plugin]\nname = \"p\"\nkinds = [\"policy\"]\n[grants]\nsubscribe = [\"kairo.user.>\", \"kairo.tick\"]\ncall = [\"events.query\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	g := GrantsFor(m, nil)
	if !slices.Equal(g.Call, []string{"events.query"}) {
		t.Fatalf("GrantsFor = %+v", g)
	}
	if err := g.CheckSubscriptions([]string{"kairo.user.message", "kairo.user.*", "kairo.tick"}); err != nil {
		t.Fatal(err)
	}
	err = g.CheckSubscriptions([]string{"kairo.tick", ">", "kairo.tick.x", "bad..x"})
	if err == nil || !strings.Contains(err.Error(), `not granted: subscribe ">", "kairo.tick.x", "bad..x"`) {
		t.Fatalf("err = %v", err)
	}
	var none *Grants
	if err := none.CheckSubscriptions([]string{">"}); err != nil {
		t.Fatalf("nil grants: %v", err)
	}
}
