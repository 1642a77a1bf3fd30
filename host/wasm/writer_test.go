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
