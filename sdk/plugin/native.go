package plugin

import (
	"log/slog"
	"time"

	"github.com/kairo-os/kairo/abi"
)

// HostABI is the host's side of the plugin ABI as a plugin built into the
// host binary reaches it: each method takes and gives what the import of
// its name in the host module [abi.HostModule] does for a wasm guest (the
// encoded event, the method name and encoded args, an errno or a token).
type HostABI interface {
	Call(method string, args []byte) int64
	Publish(event []byte) int32
	Log(level int32, msg []byte)
	Now() int64
}

// Native is a plugin built into the host binary, spoken to in the bytes a
// wasm module is: Init takes the encoded [abi.PluginConfig] and gives the
// encoded [abi.InitResult], Handle takes an encoded [abi.Batch] and gives an
// encoded [abi.Reply], as the exports [abi.ExportInit] and [abi.ExportHandle]
// do. So a built-in plugin crosses the same codecs, caps and grant checks
// as a module; what it does not get is a module's walls (its own memory,
// a deadline that stops it): it is trusted code of the host's.
//
// Calls run one at a time. A result is valid until the next call.
type Native struct {
	g instance
}

// NewNative starts a plugin built into the host: newPlugin makes a fresh
// plugin that reaches the host through the [Host] it is given, which calls
// host. Each start makes a new one, so a restart starts from nothing, as a
// module's new instance does.
func NewNative(newPlugin func(Host) Plugin, host HostABI) *Native {
	n := &Native{}
	n.g.p = newPlugin(&nativeHost{abi: host})
	return n
}

// Init answers [abi.ExportInit].
func (n *Native) Init(config []byte) []byte { return n.g.init(config) }

// Handle answers [abi.ExportHandle].
func (n *Native) Handle(batch []byte) []byte { return n.g.handle(batch) }

// nativeHost is the Host of a native plugin: its calls encode what they
// pass as a guest's do, and go to the host's HostABI.
type nativeHost struct {
	abi HostABI
	enc encoder
}

func (h *nativeHost) Publish(ev *abi.Event) error {
	if r := h.abi.Publish(h.enc.encodeEvent(ev)); r < 0 {
		return publishErr(ev.Type, r)
	}
	return nil
}

func (h *nativeHost) Call(method string, args any) (int64, error) {
	a, err := h.enc.encodeArgs(method, args)
	if err != nil {
		return 0, err
	}
	tok := h.abi.Call(method, a)
	if tok < 0 {
		return 0, callErr(method, tok)
	}
	return tok, nil
}

func (h *nativeHost) Log(level slog.Level, msg string) { h.abi.Log(int32(level), []byte(msg)) }

func (h *nativeHost) Now() time.Time { return time.Unix(0, h.abi.Now()) }

// Builtin is a plugin compiled into the host binary: its manifest (the
// text of its NAME.toml) and its constructor. The host runs it as a
// [Native], as it runs a module of its built-in folder, with its manifest's
// grants and limits.
type Builtin struct {
	Manifest []byte
	New      func(Host) Plugin
}
