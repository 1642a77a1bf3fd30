// Package plugin is the Go guest SDK for Kairo plugins: a plugin is a main
// package, built with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o NAME.wasm
//
// that registers its handlers from an init function. The SDK provides the
// exports the host calls ([abi.ExportInit], [abi.ExportHandle] and the others of
// the plugin ABI), keeps the input buffer, encodes and decodes MsgPack, and
// wraps the host imports as [Publish], [Call], [Log] and [Now].
//
// A c-shared module is a WASI reactor: the host runs its _initialize once,
// which runs the package init functions, and never runs main. So [Register]
// must be called from init, and main stays empty. Goroutines started by a
// plugin do not run between the host's calls.
//
// Outside GOOS=wasip1 the package compiles, so tools and tests that load it
// work, but the package's host functions return [ErrNotWasm]. A plugin that
// may also be built into the host binary (as Kairo's own are: see
// [Builtin] and [NewNative]) is written against a [Host] it is given — New(host
// Host) Plugin — and its wasm main registers New(Imports).
package plugin

import (
	"errors"
	"log/slog"
	"time"

	"github.com/kairo-os/kairo/abi"
)

// Plugin holds a plugin's handlers.
type Plugin struct {
	// Init runs once, before the first batch, with the config from the
	// plugin's manifest, and describes the plugin. An error keeps the
	// plugin from starting; the host reports it.
	Init func(config abi.PluginConfig) (abi.PluginInfo, error)
	// Handle answers one batch. An error is reported in Reply.Error and
	// the plugin keeps running; a panic stops the plugin.
	//
	// The batch, its slices and the events in them are the SDK's, and the
	// next batch is decoded into them: to keep an event past the call,
	// keep a copy of the abi.Event value, not a pointer into the batch or
	// the slice. Strings and raw values (such as Event.Data) stay valid
	// for good. The reply is encoded before Handle's next call, so its
	// slices may be reused from call to call.
	Handle func(batch *abi.Batch) (abi.Reply, error)
	// Tools are the plugin's tools, for a plugin of kind tool. The SDK
	// adds their definitions to the PluginInfo that Init returns, and
	// runs each tool call of a batch with the tool of its name before
	// Handle sees the batch. A call of a tool not here stays in the batch
	// for Handle, which answers it in Reply.ToolResults, in this reply or
	// a later one; without a Handle it gets an error result. Handle may be
	// nil in a plugin that only serves Tools.
	Tools []Tool
}

// Tool is one tool of a plugin: its definition in the OpenAI function
// format, and Run, which carries out a call. Run's string is the result's
// content; an error makes an error result of its text (the call failed,
// the plugin keeps running); a panic stops the plugin, as in Handle.
// call.Arguments is the JSON object of the arguments.
type Tool struct {
	abi.Tool
	Run func(call *abi.ToolCall) (string, error)
}

// ErrNotWasm is returned by the host functions outside a wasm guest.
var ErrNotWasm = errors.New("plugin: host functions exist only in a GOOS=wasip1 guest")

// module is the plugin of a wasm guest: one per module, set by Register.
var module instance

// Register sets the plugin's handlers. [Call] it from an init function of the
// main package; a later call replaces the handlers.
func Register(p Plugin) { module.p = p }

// Host is what a plugin reaches of Kairo while it handles a call: the
// imports of the plugin ABI. A plugin built as a wasm module reaches them
// through the package's functions (or [Imports]); a plugin that may also be
// built into the host ([NewNative]) takes the Host it is given instead, so
// that each of its instances reaches its own.
type Host interface {
	// Publish publishes ev on the bus, if the plugin's manifest grants
	// its subject. The host sets Source to the plugin.
	Publish(ev *abi.Event) error
	// Call starts the kernel or host method with MsgPack-encodable args
	// and returns its token at once; the abi.CallResult with that token
	// arrives in a later batch.
	Call(method string, args any) (int64, error)
	// Log writes a line to the host's log, attributed to the plugin.
	Log(level slog.Level, msg string)
	// Now returns the time of the batch being handled. It does not move
	// during a call, so a replayed run sees the same times.
	Now() time.Time
}

// Imports is the [Host] of a wasm guest: the package's functions.
var Imports Host = imports{}

type imports struct{}

func (imports) Publish(ev *abi.Event) error                 { return Publish(ev) }
func (imports) Call(method string, args any) (int64, error) { return Call(method, args) }
func (imports) Log(level slog.Level, msg string)            { Log(level, msg) }
func (imports) Now() time.Time                              { return Now() }

// Publish publishes ev on the bus, if the plugin's manifest grants its
// subject. The host sets Source to the plugin when it is empty.
func Publish(ev *abi.Event) error { return publish(ev) }

// Call starts the kernel or host method with MsgPack-encodable args and
// returns its token at once; the [abi.CallResult] with that token arrives in
// a later batch.
func Call(method string, args any) (int64, error) { return call(method, args) }

// Log writes a line to the host's log, attributed to the plugin.
func Log(level slog.Level, msg string) { logLine(level, msg) }

// Now returns the time of the batch being handled. It does not move during a
// call, so a replayed run sees the same times.
func Now() time.Time { return time.Unix(0, now()) }
