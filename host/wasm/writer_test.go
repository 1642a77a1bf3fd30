package wasm

import (
	"context"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// What any plugin makes of a skill's event is the skill's: the echo
// drop-in, handed a skill's demo.hello, publishes echo.demo.hello as
// "skill/chatty via plugin/echo".
// The control: the operator's demo.again, published just after, is echoed
// as the plugin's own, in a batch of its own.
func TestRelayedEventNamesItsWriter(t *testing.T) {
	e := newManagerEnv(t)
	e.drop("echo", "echo", echoManifest)
	echoes := e.watch("echo.>")
	e.start(ManagerConfig{})
	e.waitState("echo", abi.PluginRunning)
	for _, ev := range []struct{ subject, source string }{{"demo.hello", "skill/chatty"}, {"demo.again", "operator/0"}} {
		raw, _ := msgpack.Marshal("hi")
		if _, err := e.bus.Publish(context.Background(), &abi.Event{Type: ev.subject, Source: ev.source, Data: raw}); err != nil {
			t.Fatal(err)
		}
	}
	evs := echoes.wait(t, 2)
	if evs[0].Type != "echo.demo.hello" || evs[0].Source != "skill/chatty via plugin/echo" {
		t.Fatalf("the echo of a skill's event: %+v", evs[0])
	}
	if evs[1].Type != "echo.demo.again" || evs[1].Source != "plugin/echo" {
		t.Fatalf("the echo of the operator's event: %+v", evs[1])
	}
}

// On a store several hosts share, another host's event is never this
// host's operator's word, whoever wrote it there: a plugin that relays it
// names that writer and host, and the relay is not vouched for. The
// control: the same event written on this host is the operator's.
func TestAnotherHostsEventIsNotVouched(t *testing.T) {
	other := &abi.Event{Type: "kairo.input.terminal", Source: "operator/0", Host: "b"}
	if w := writerOf(other, "a"); w != "operator/0@b" {
		t.Fatalf("the writer of host b's operator event, on host a: %q", w)
	}
	if src := abi.RelayedSource(writerOf(other, "a"), "plugin/terminal"); abi.Vouched(src) {
		t.Fatalf("its relay %q is vouched for", src)
	}
	if w := batchWriter(&abi.Batch{Events: []abi.Event{{Source: "operator/0", Host: "a"}, *other}}, "a"); w != "operator/0@b" {
		t.Fatalf("a batch holding it: writer %q", w)
	}
	own := &abi.Event{Type: "kairo.input.terminal", Source: "operator/0", Host: "a"}
	if w := writerOf(own, "a"); w != "" {
		t.Fatalf("this host's operator event: writer %q, want none (vouched)", w)
	}
}
