// Package timer is the input source of time and of the system: it fires
// the timers its config lists — each a kairo.timer.fired event and, when
// the timer says something, a user message to the agent, as if typed at
// that moment (a scheduled task: "run ./backup.sh" every day) — and turns
// the system events its config forwards (by default a plugin that failed
// too often, or was refused) into kairo.observation events the agent
// notices.
//
// Timers fire at the multiples of their period since the Unix epoch (plus
// their offset), so a restart neither fires one twice — the message id is
// the timer and the time it was due — nor shifts the schedule; a firing
// missed while Kairo was down is not made up.
//
// The kairo binary carries it built in (New); ./wasm builds the same
// package as a wasm module.
package timer

import (
	_ "embed"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/plugin"
)

// Manifest is the plugin's manifest, timer.toml.
//
//go:embed timer.toml
var Manifest []byte

// New returns a timer source that publishes and waits through host.
func New(host plugin.Host) plugin.Plugin {
	var s *source
	return plugin.Plugin{
		Init: func(cfg abi.PluginConfig) (abi.PluginInfo, error) {
			var err error
			if s, err = newSource(cfg.Config); err != nil {
				return abi.PluginInfo{}, err
			}
			return abi.PluginInfo{Name: "timer", Version: "0.1.0", Kinds: []string{abi.KindInput}, Subscriptions: s.subscriptions()}, nil
		},
		Handle: func(b *abi.Batch) (abi.Reply, error) {
			out := s.handle(b)
			for i := range out.events {
				if err := host.Publish(&out.events[i]); err != nil {
					return abi.Reply{}, err
				}
			}
			if !out.wait.IsZero() {
				token, err := host.Call(abi.MethodClockWait, abi.ClockWaitParams{Until: out.wait})
				if err != nil {
					return abi.Reply{}, err
				}
				s.waiting = token
			}
			return abi.Reply{}, nil
		},
	}
}

func encode(v any) []byte {
	raw, _ := msgpack.Marshal(v)
	return raw
}
