// Command echo is the smallest Kairo plugin: it publishes every event of its
// batch back on the subject "echo.<type>" and answers each with a noop
// action. It shows the shape of a plugin and serves the host's tests and
// benchmarks.
package main

import (
	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/plugin"
)

func init() {
	plugin.Register(plugin.Plugin{Init: setup, Handle: handle})
}

// main never runs: the host starts a plugin with _initialize, which runs init.
func main() {}

// publish is off when the config says {"publish": false}, so a benchmark can
// measure the round trip alone; {"subscribe": "demo.>"} narrows what the
// plugin asks to receive (default everything).
var publish = true

func setup(cfg abi.PluginConfig) (abi.PluginInfo, error) {
	if v, ok := cfg.Config["publish"].(bool); ok {
		publish = v
	}
	sub := ">"
	if v, ok := cfg.Config["subscribe"].(string); ok {
		sub = v
	}
	return abi.PluginInfo{
		Name:          "echo",
		Version:       "0.1.0",
		Kinds:         []string{abi.KindPolicy},
		Subscriptions: []string{sub},
	}, nil
}

// actions is the reply's slice, reused: the SDK encodes each reply before
// the next batch.
var actions []abi.Action

func handle(b *abi.Batch) (abi.Reply, error) {
	reply := abi.Reply{Actions: actions[:0]}
	defer func() { actions = reply.Actions }()
	for i := range b.Events {
		ev := &b.Events[i]
		if publish {
			out := abi.Event{Type: "echo." + ev.Type, Data: ev.Data, CausationID: ev.ID, CorrelationID: ev.CorrelationID}
			if err := plugin.Publish(&out); err != nil {
				return reply, err
			}
		}
		reply.Actions = append(reply.Actions, abi.Action{ID: ev.ID, Type: abi.ActionNoop, CorrelationID: ev.CorrelationID, Data: ev.Data})
	}
	return reply, nil
}
