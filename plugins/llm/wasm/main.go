// Command wasm builds the llm plugin as a wasm module (see package llm).
package main

import (
	"github.com/kairo-os/kairo/plugins/llm"
	"github.com/kairo-os/kairo/sdk/plugin"
)

func init() { plugin.Register(llm.New(plugin.Imports)) }

// main never runs: the host starts a plugin with _initialize, which runs init.
func main() {}
