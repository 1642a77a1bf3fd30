// Command wasm builds the timer plugin as a wasm module (see package timer).
package main

import (
	"github.com/kairo-os/kairo/plugins/timer"
	"github.com/kairo-os/kairo/sdk/plugin"
)

func init() { plugin.Register(timer.New(plugin.Imports)) }

// main never runs: the host starts a plugin with _initialize, which runs init.
func main() {}
