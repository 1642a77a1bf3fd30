// Package plugins holds Kairo's plugins, each a Go package in a folder of
// its own written against the guest SDK (sdk/plugin): the rule policy
// (rules), the LLM policy (llm), and the input sources of the terminal
// chat (terminal) and of time and the system (timer). Each is built into
// the kairo binary (Builtins) and, from its wasm folder, as a wasm module
// (`make plugins`); echo is the smallest plugin, a module only, which
// shows a plugin's shape and serves the host's tests.
//
// Built in, a plugin starts in microseconds and needs no compiler, which
// is what lets `go install` give a kairo that works and `kairo up` be
// ready at once; as a module, it runs in its own memory under a deadline.
// docs/RATIONALE.md#built-in-plugins-are-native weighs the two.
package plugins

import (
	"github.com/kairo-os/kairo/plugins/llm"
	"github.com/kairo-os/kairo/plugins/rules"
	"github.com/kairo-os/kairo/plugins/terminal"
	"github.com/kairo-os/kairo/plugins/timer"
	"github.com/kairo-os/kairo/sdk/plugin"
)

// Builtins are the plugins built into the kairo binary.
func Builtins() []plugin.Builtin {
	return []plugin.Builtin{
		{Manifest: llm.Manifest, New: llm.New},
		{Manifest: rules.Manifest, New: rules.New},
		{Manifest: terminal.Manifest, New: terminal.New},
		{Manifest: timer.Manifest, New: timer.New},
	}
}
