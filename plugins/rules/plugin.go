// Package rules is Kairo's rule policy, the embedded default: it needs no
// network and understands a small command language (see rules.go and
// `help`), asking when a required part is missing ("run" alone: "run
// what?"). It exists so that Kairo works out of the box; the LLM policy is
// the one that understands anything.
//
// The kairo binary carries it built in (New); ./wasm builds the same
// package as a wasm module.
package rules

import (
	_ "embed"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/plugin"
)

// Manifest is the plugin's manifest, rules.toml.
//
//go:embed rules.toml
var Manifest []byte

// New returns a rule policy. It decides from each batch alone, so it keeps
// no state and reaches nothing of its host.
func New(plugin.Host) plugin.Plugin {
	return plugin.Plugin{
		Init: func(abi.PluginConfig) (abi.PluginInfo, error) {
			return abi.PluginInfo{Name: "rules", Version: "0.1.0", Kinds: []string{abi.KindPolicy}}, nil
		},
		Handle: func(b *abi.Batch) (abi.Reply, error) { return decide(b), nil },
	}
}
