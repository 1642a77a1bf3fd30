// Command wasm builds the rule policy as a wasm module (see package rules).
package main

import (
	"github.com/kairo-os/kairo/plugins/rules"
	"github.com/kairo-os/kairo/sdk/plugin"
)

func init() { plugin.Register(rules.New(plugin.Imports)) }

// main never runs: the host starts a plugin with _initialize, which runs init.
func main() {}
