// Command timer is the input source of time and of the system: it fires the
// timers its config lists — each a kairo.timer.fired event and, when the
// timer says something, a user message to the agent, as if typed at that
// moment (a scheduled task: "run ./backup.sh" every day) — and turns the
// system events its config forwards (by default a plugin that failed too
// often, or was refused) into kairo.observation events the agent notices.
//
// Timers fire at the multiples of their period since the Unix epoch (plus
// their offset), so a restart neither fires one twice — the message id is
// the timer and the time it was due — nor shifts the schedule; a firing
// missed while Kairo was down is not made up.
package main

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/plugin"
)

func init() {
	var s *source
	plugin.Register(plugin.Plugin{
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
				if err := plugin.Publish(&out.events[i]); err != nil {
					return abi.Reply{}, err
				}
			}
			if !out.wait.IsZero() {
				token, err := plugin.Call(abi.MethodClockWait, abi.ClockWaitParams{Until: out.wait})
				if err != nil {
					return abi.Reply{}, err
				}
				s.waiting = token
			}
			return abi.Reply{}, nil
		},
	})
}

func main() {}

func encode(v any) []byte {
	raw, _ := msgpack.Marshal(v)
	return raw
}
