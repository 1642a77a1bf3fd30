package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/client"
)

// What the hostile suite (hostile_test.go) reads of a running daemon, and
// the wants each kind's plugins are held to.

// observer collects the events the suite reads: kairo.plugin.>, what the
// drop-ins publish in their namespaces, and the echoes.
type observer struct {
	mu  sync.Mutex
	evs []abi.Event
}

func observe(t *testing.T, d *upProc) *observer {
	t.Helper()
	o := &observer{}
	for _, pattern := range []string{"kairo.plugin.>", "plugin.>", "echo.>"} {
		c := d.dial() // a client each: a flood on one holds up no other
		t.Cleanup(func() { c.Close() })
		sub, err := c.Subscribe(context.Background(), pattern, 0)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				ev, err := sub.Next(context.Background())
				if err != nil {
					return
				}
				o.mu.Lock()
				o.evs = append(o.evs, *ev)
				o.mu.Unlock()
			}
		}()
	}
	return o
}

// pluginOf is the plugin a kairo.plugin.* event is about.
type pluginOf struct {
	Plugin string `msgpack:"plugin"`
}

// find returns the events of subject: kairo.plugin.* events about the
// plugin name, or any other subject's events.
func (o *observer) find(subject, name string) []abi.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []abi.Event
	for _, ev := range o.evs {
		if ev.Type != subject {
			continue
		}
		if strings.HasPrefix(subject, "kairo.plugin.") {
			var p pluginOf
			if msgpack.Unmarshal(ev.Data, &p) != nil || p.Plugin != name {
				continue
			}
		}
		out = append(out, ev)
	}
	return out
}

func (o *observer) has(subject, name string) bool { return len(o.find(subject, name)) > 0 }

func (o *observer) publish(t *testing.T, c *client.Client, subject string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Publish(ctx, abi.Event{Type: subject, Data: msgpack.RawMessage{0x01}}); err != nil {
		t.Fatalf("publish %s: %v", subject, err)
	}
}

// echoes says what is missing for the built-in echo's answer to demo.KIND.
func (o *observer) echoes(kind string) string {
	for _, ev := range o.find("echo.demo."+kind, "") {
		if ev.Source == "plugin/echo" {
			return ""
		}
	}
	return "the built-in echo has not answered demo." + kind + "; "
}

// await polls until check says nothing is missing, or the deadline passes.
func (o *observer) await(t *testing.T, wait time.Duration, check func() string) string {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		m := check()
		if m == "" || time.Now().After(deadline) {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reason is how the hostile plugin was reported, for the log.
func (o *observer) reason(name string) string {
	for _, s := range []string{"failed", "refused", "denied", "throttled"} {
		if evs := o.find("kairo.plugin."+s, name); len(evs) > 0 {
			var v map[string]any
			_ = msgpack.Unmarshal(evs[0].Data, &v)
			delete(v, "plugin")
			delete(v, "stderr")
			delete(v, "file")
			msg, _, _ := strings.Cut(fmt.Sprint(v), "\n")
			if len(msg) > 160 {
				msg = msg[:160] + "…"
			}
			return s + " " + msg
		}
	}
	for _, sub := range []string{"ping.result", "recurse.result", "file.read"} {
		for _, ev := range o.find("plugin."+name+"."+sub, "") {
			if r := decodeResult(ev); !r.OK {
				return sub + " " + r.Error
			}
		}
	}
	return ""
}

// dump lists the events about the plugins names, for a failure.
func (o *observer) dump(names ...string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var b strings.Builder
	for _, ev := range o.evs {
		var p pluginOf
		_ = msgpack.Unmarshal(ev.Data, &p)
		for _, n := range names {
			if p.Plugin == n || strings.HasPrefix(ev.Type, "plugin."+n+".") {
				var v any
				_ = msgpack.Unmarshal(ev.Data, &v)
				s := fmt.Sprintf("%s %v", ev.Type, v)
				if len(s) > 600 {
					s = s[:600] + "…"
				}
				fmt.Fprintln(&b, s)
			}
		}
	}
	return b.String()
}

// hostileResult is what the hostile guest publishes.
type hostileResult struct {
	OK    bool   `msgpack:"ok"`
	Error string `msgpack:"error,omitempty"`
	Text  string `msgpack:"text,omitempty"`
}

func decodeResult(ev abi.Event) hostileResult {
	var r hostileResult
	_ = msgpack.Unmarshal(ev.Data, &r)
	return r
}

// The wants: each says what is missing, "" when it was seen.

// failed wants kairo.plugin.failed with op, reason (any when "") and an
// error or guest stderr that says says.
func failed(op, reason, says string) func(*observer, string) string {
	return func(o *observer, name string) string {
		for _, ev := range o.find("kairo.plugin.failed", name) {
			var f abi.PluginFailed
			if msgpack.Unmarshal(ev.Data, &f) != nil {
				continue
			}
			if f.Op == op && (reason == "" || f.Reason == reason) && strings.Contains(f.Error+"\n"+f.Stderr, says) {
				return ""
			}
		}
		return fmt.Sprintf("no kairo.plugin.failed op %s reason %q saying %q", op, reason, says)
	}
}

// refused wants kairo.plugin.refused whose reason says says.
func refused(says string) func(*observer, string) string {
	return func(o *observer, name string) string {
		for _, ev := range o.find("kairo.plugin.refused", name) {
			var s abi.PluginState
			if msgpack.Unmarshal(ev.Data, &s) == nil && s.Reason != "" && strings.Contains(s.Reason, says) {
				return ""
			}
		}
		return fmt.Sprintf("no kairo.plugin.refused saying %q", says)
	}
}

// denied wants one kairo.plugin.denied of import and target counting count.
func denied(imp, target string, count int) func(*observer, string) string {
	return func(o *observer, name string) string {
		evs := o.find("kairo.plugin.denied", name)
		for _, ev := range evs {
			var d abi.PluginDenied
			if msgpack.Unmarshal(ev.Data, &d) == nil && d.Import == imp && d.Target == target && d.Count == count {
				if len(evs) > 1 {
					return fmt.Sprintf("%d kairo.plugin.denied events, want one", len(evs))
				}
				return ""
			}
		}
		return fmt.Sprintf("no kairo.plugin.denied %s %s count %d", imp, target, count)
	}
}

// throttled wants kairo.plugin.throttled over the cap named of limit.
func throttled(cap string, limit int) func(*observer, string) string {
	return func(o *observer, name string) string {
		for _, ev := range o.find("kairo.plugin.throttled", name) {
			var tr abi.PluginThrottled
			if msgpack.Unmarshal(ev.Data, &tr) != nil {
				continue
			}
			for _, c := range tr.Caps {
				if c.Cap == cap && c.Limit == limit && c.Over > 0 {
					return ""
				}
			}
		}
		return fmt.Sprintf("no kairo.plugin.throttled over %s (%d)", cap, limit)
	}
}

// failedWith wants a result on plugin.NAME.subject that failed saying says.
func failedWith(subject, says string) func(*observer, string) string {
	return func(o *observer, name string) string {
		for _, ev := range o.find("plugin."+name+"."+subject, "") {
			if r := decodeResult(ev); !r.OK && strings.Contains(r.Error, says) {
				return ""
			}
		}
		return fmt.Sprintf("no %s saying %q", subject, says)
	}
}

// results wants n results on plugin.NAME.subject, every one ok.
func results(subject string, n int) func(*observer, string) string {
	return func(o *observer, name string) string {
		evs := o.find("plugin."+name+"."+subject, "")
		for _, ev := range evs {
			if r := decodeResult(ev); !r.OK {
				return fmt.Sprintf("%s failed: %s", subject, r.Error)
			}
		}
		if len(evs) != n {
			return fmt.Sprintf("%d ok %s, want %d", len(evs), subject, n)
		}
		return ""
	}
}

// done wants the guest's done event, its text holding says.
func done(says string) func(*observer, string) string {
	return func(o *observer, name string) string {
		for _, ev := range o.find("plugin."+name+".done", "") {
			if r := decodeResult(ev); r.OK && strings.Contains(r.Text, says) {
				return ""
			}
		}
		return fmt.Sprintf("no done saying %q", says)
	}
}

func started() func(*observer, string) string {
	return func(o *observer, name string) string {
		if o.has("kairo.plugin.started", name) {
			return ""
		}
		return "not started"
	}
}

func all(wants ...func(*observer, string) string) func(*observer, string) string {
	return func(o *observer, name string) string {
		var m []string
		for _, w := range wants {
			if s := w(o, name); s != "" {
				m = append(m, s)
			}
		}
		return strings.Join(m, "; ")
	}
}
