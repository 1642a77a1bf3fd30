// Command wasm builds the terminal plugin as a wasm module (see package terminal).
package main

import (
	"github.com/kairo-os/kairo/plugins/terminal"
	"github.com/kairo-os/kairo/sdk/plugin"
)

func init() { plugin.Register(terminal.New(plugin.Imports)) }

// main never runs: the host starts a plugin with _initialize, which runs init.
func main() {}
