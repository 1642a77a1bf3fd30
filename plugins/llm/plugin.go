// Package llm is Kairo's LLM policy: it asks a model, through the host's
// llm.chat (an OpenAI-compatible endpoint from [llm] in kairo.toml), what
// the agent should do about what it observed. See policy.go.
//
// The kairo binary carries it built in (New); ./wasm builds the same
// package as a wasm module.
package llm

import (
	_ "embed"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/plugin"
)

// Manifest is the plugin's manifest, llm.toml.
//
//go:embed llm.toml
var Manifest []byte

// New returns an LLM policy that asks the model through host.
func New(host plugin.Host) plugin.Plugin {
	st := &state{}
	return plugin.Plugin{
		Init: func(cfg abi.PluginConfig) (abi.PluginInfo, error) {
			st.config = cfg.Config
			return abi.PluginInfo{Name: "llm", Version: "0.1.0", Kinds: []string{abi.KindPolicy}}, nil
		},
		Handle: func(b *abi.Batch) (abi.Reply, error) { return st.decide(b, host.Call), nil },
	}
}
