// Package plugin is the Go guest SDK for Kairo plugins: a plugin is a main
// package, built with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o NAME.wasm
//
// that registers its handlers from an init function. The SDK provides the
// exports the host calls (abi.ExportInit, abi.ExportHandle and the others of
// the plugin ABI), keeps the input buffer, encodes and decodes MsgPack, and
// wraps the host imports as Publish, Call, Log and Now.
//
// A c-shared module is a WASI reactor: the host runs its _initialize once,
// which runs the package init functions, and never runs main. So Register
// must be called from init, and main stays empty. Goroutines started by a
// plugin do not run between the host's calls.
//
// Outside GOOS=wasip1 the package compiles, so tools and tests that load it
// work, but the host functions return ErrNotWasm.
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
}

// ErrNotWasm is returned by the host functions outside a wasm guest.
var ErrNotWasm = errors.New("plugin: host functions exist only in a GOOS=wasip1 guest")

var registered Plugin

// Register sets the plugin's handlers. Call it from an init function of the
// main package; a later call replaces the handlers.
func Register(p Plugin) { registered = p }

// Publish publishes ev on the bus, if the plugin's manifest grants its
// subject. The host sets Source to the plugin when it is empty.
func Publish(ev *abi.Event) error { return publish(ev) }

// Call starts the kernel or host method with MsgPack-encodable args and
// returns its token at once; the abi.CallResult with that token arrives in
// a later batch.
func Call(method string, args any) (int64, error) { return call(method, args) }

// Log writes a line to the host's log, attributed to the plugin.
func Log(level slog.Level, msg string) { logLine(level, msg) }

// Now returns the time of the batch being handled. It does not move during a
// call, so a replayed run sees the same times.
func Now() time.Time { return time.Unix(0, now()) }
