package kernel

import (
	"strings"
	"testing"

	"github.com/kairo-os/kairo/abi"
	"github.com/vmihailenco/msgpack/v5"
)

func TestGrantsAllow(t *testing.T) {
	g := &Grants{
		Call:      []string{abi.MethodEventsPublish, abi.MethodEventsSubscribe, abi.MethodKernelPing},
		Publish:   []string{"kairo.skill.demo.>"},
		Subscribe: []string{"kairo.process.*"},
	}
	enc := func(v any) msgpack.RawMessage {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pub := func(subject string) msgpack.RawMessage {
		return enc(abi.PublishParams{Event: abi.Event{Type: subject}})
	}
	sub := func(pattern string) msgpack.RawMessage { return enc(abi.SubscribeParams{Pattern: pattern}) }
	for _, c := range []struct {
		method string
		params msgpack.RawMessage
		denied string // "" when allowed
	}{
		{abi.MethodKernelPing, nil, ""},
		{abi.MethodProcessSpawn, nil, "not granted: process.spawn"},
		{abi.MethodEventsPublish, pub("kairo.skill.demo.done"), ""},
		{abi.MethodEventsPublish, pub("kairo.skill.other"), `not granted: events.publish of "kairo.skill.other"`},
		{abi.MethodEventsSubscribe, sub("kairo.process.exited"), ""},
		{abi.MethodEventsSubscribe, sub(""), `not granted: events.subscribe of ">"`},
		{abi.MethodEventsSubscribe, sub("kairo.>"), "not granted"},
		{abi.MethodEventsReplay, sub("kairo.process.spawned"), "not granted: events.replay"}, // not in Call
	} {
		err := g.allow(c.method, c.params)
		switch {
		case c.denied == "" && err != nil:
			t.Errorf("%s: denied: %v", c.method, err)
		case c.denied != "" && (err == nil || !strings.Contains(err.Error(), c.denied)):
			t.Errorf("%s: got %v, want an error with %q", c.method, err, c.denied)
		}
	}
}
