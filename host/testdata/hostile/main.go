// Command hostile is a plugin built with the SDK that misbehaves as its
// config says: {"mode": "loop"} loops in Handle, "loopinit" in Init, "panic"
// panics in Handle, "grow" allocates until memory runs out, "flood"
// publishes until the host says no, "imports" calls, logs and reads the
// clock; any other mode answers with one noop.
package main

import (
	"fmt"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/plugin"
)

func init() { plugin.Register(plugin.Plugin{Init: setup, Handle: handle}) }

func main() {}

var (
	mode string
	sink [][]byte
	spin int
)

func setup(cfg abi.PluginConfig) (abi.PluginInfo, error) {
	mode, _ = cfg.Config["mode"].(string)
	if mode == "loopinit" {
		for {
			spin++
		}
	}
	return abi.PluginInfo{Name: "hostile", Kinds: []string{abi.KindPolicy}}, nil
}

func handle(b *abi.Batch) (abi.Reply, error) {
	switch mode {
	case "loop":
		for {
			spin++
		}
	case "panic":
		panic("hostile plugin panics in handle")
	case "grow":
		for {
			sink = append(sink, make([]byte, 1<<20))
		}
	case "flood":
		for i := 0; ; i++ {
			if err := plugin.Publish(&abi.Event{Type: "flood"}); err != nil {
				return abi.Reply{Thought: fmt.Sprintf("refused after %d: %v", i, err)}, nil
			}
		}
	case "imports":
		tok, err := plugin.Call("kernel.ping", map[string]any{"n": 1})
		if err != nil {
			return abi.Reply{}, err
		}
		plugin.Log(0, fmt.Sprintf("called kernel.ping, token %d", tok))
		return abi.Reply{Thought: plugin.Now().UTC().Format(time.RFC3339Nano), Actions: []abi.Action{{ID: fmt.Sprint(tok), Type: abi.ActionNoop}}}, nil
	}
	return abi.Reply{Thought: "fine", Actions: []abi.Action{{Type: abi.ActionNoop}}}, nil
}
