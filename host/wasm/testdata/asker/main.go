// Command asker is a plugin built with the SDK whose manifest asks for more
// than a drop-in gets, for the tests of what the operator grants. It
// subscribes to what its config's "subscribe" lists (comma-separated) and,
// for each event:
//
//   - "call" mode calls the method of its config's "method" and publishes
//     each answer (or refusal) as plugin.asker.result;
//   - "deny" mode publishes its config's "n" events on "forbidden.flood"
//     in one batch, then plugin.asker.done saying how many were refused.
package main

import (
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/plugin"
)

func init() { plugin.Register(plugin.Plugin{Init: setup, Handle: handle}) }

func main() {}

var config map[string]any

func setup(cfg abi.PluginConfig) (abi.PluginInfo, error) {
	config = cfg.Config
	info := abi.PluginInfo{Name: "asker", Kinds: []string{abi.KindPolicy}}
	if sub, _ := cfg.Config["subscribe"].(string); sub != "" {
		info.Subscriptions = strings.Split(sub, ",")
	}
	return info, nil
}

// result is what the guest publishes.
type result struct {
	OK      bool   `msgpack:"ok"`
	Error   string `msgpack:"error,omitempty"`
	Refused int    `msgpack:"refused,omitempty"`
}

func emit(r result) error {
	data, err := msgpack.Marshal(r)
	if err != nil {
		return err
	}
	return plugin.Publish(&abi.Event{Type: "plugin.asker.result", Data: data})
}

func handle(b *abi.Batch) (abi.Reply, error) {
	for _, r := range b.CallResults {
		res := result{OK: r.Error == nil}
		if r.Error != nil {
			res.Error = r.Error.Code + ": " + r.Error.Message
		}
		if err := emit(res); err != nil {
			return abi.Reply{}, err
		}
	}
	mode, _ := config["mode"].(string)
	for range b.Events {
		switch mode {
		case "call":
			method, _ := config["method"].(string)
			if _, err := plugin.Call(method, map[string]any{}); err != nil {
				if err := emit(result{Error: err.Error()}); err != nil {
					return abi.Reply{}, err
				}
			}
		case "deny":
			n, _ := config["n"].(int64)
			refused := 0
			for i := int64(0); i < n; i++ {
				if plugin.Publish(&abi.Event{Type: "forbidden.flood"}) != nil {
					refused++
				}
			}
			if err := emit(result{OK: true, Refused: refused}); err != nil {
				return abi.Reply{}, err
			}
		}
	}
	return abi.Reply{}, nil
}
