// Command rules is Kairo's rule policy, the embedded default: it needs no
// network and understands a small command language (see rules.go and
// `help`), asking when a required part is missing ("run" alone: "run
// what?"). It exists so that Kairo works out of the box; the LLM policy is
// the one that understands anything.
package main

import (
	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/plugin"
)

func init() {
	plugin.Register(plugin.Plugin{
		Init: func(abi.PluginConfig) (abi.PluginInfo, error) {
			return abi.PluginInfo{Name: "rules", Version: "0.1.0", Kinds: []string{abi.KindPolicy}}, nil
		},
		Handle: func(b *abi.Batch) (abi.Reply, error) { return decide(b), nil },
	})
}

func main() {}
