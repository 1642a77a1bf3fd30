// Command llm is Kairo's LLM policy: it asks a model, through the host's
// llm.chat (an OpenAI-compatible endpoint from [llm] in kairo.toml), what
// the agent should do about what it observed. See policy.go.
package main

import (
	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/plugin"
)

func init() {
	plugin.Register(plugin.Plugin{
		Init: func(cfg abi.PluginConfig) (abi.PluginInfo, error) {
			st.config = cfg.Config
			return abi.PluginInfo{Name: "llm", Version: "0.1.0", Kinds: []string{abi.KindPolicy}}, nil
		},
		Handle: func(b *abi.Batch) (abi.Reply, error) { return decide(b, plugin.Call), nil },
	})
}

func main() {}
