// Package terminal is the input source of the terminal chat: each line
// typed at `kairo up`'s terminal or at `kairo chat` arrives as
// kairo.input.terminal, and this plugin turns it into the user message the
// agent is routed. It holds what a person types across lines: a line that
// ends with a backslash continues on the next, so a fragment waits for the
// rest; "@ID text" addresses the run loop whose id ends with ID.
//
// The kairo binary carries it built in (New); ./wasm builds the same
// package as a wasm module.
package terminal

import (
	_ "embed"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/plugin"
)

// Manifest is the plugin's manifest, terminal.toml.
//
//go:embed terminal.toml
var Manifest []byte

// New returns a terminal input source that publishes through host.
func New(host plugin.Host) plugin.Plugin {
	in := writers{}
	return plugin.Plugin{
		Init: func(abi.PluginConfig) (abi.PluginInfo, error) {
			return abi.PluginInfo{Name: "terminal", Version: "0.1.0", Kinds: []string{abi.KindInput}, Subscriptions: []string{abi.SubjectTerminalInput}}, nil
		},
		Handle: func(b *abi.Batch) (abi.Reply, error) {
			for i := range b.Events {
				var t abi.TerminalInput
				if msgpack.Unmarshal(b.Events[i].Data, &t) != nil {
					continue
				}
				m, ok := in.of(b.Events[i].Source).add(t)
				if !ok {
					continue
				}
				raw, err := msgpack.Marshal(m)
				if err != nil {
					return abi.Reply{}, err
				}
				ev := abi.Event{Type: abi.SubjectUserMessage, CausationID: b.Events[i].ID, Data: raw}
				if err := host.Publish(&ev); err != nil {
					return abi.Reply{}, err
				}
			}
			return abi.Reply{}, nil
		},
	}
}
