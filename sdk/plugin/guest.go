//go:build wasip1

package plugin

import (
	"fmt"
	"log/slog"
	"unsafe"

	"github.com/kairo-os/kairo/abi"
)

// The exports and imports of a wasm guest. One call runs at a time, so the
// buffers are package state, reused from call to call: the host writes into
// input, and what a call returns stays valid until the next call. The work
// is module's (instance.go), which a plugin built into the host shares.
var (
	input []byte
	enc   encoder
)

//go:wasmexport kairo_abi_version
func kairoABIVersion() int32 { return abi.PluginABIVersion }

//go:wasmexport kairo_input
func kairoInput(size uint32) unsafe.Pointer {
	if int(size) > cap(input) {
		input = make([]byte, size)
	}
	input = input[:cap(input)]
	if len(input) == 0 {
		input = make([]byte, 64)
	}
	return unsafe.Pointer(&input[0])
}

//go:wasmexport kairo_init
func kairoInit(n uint32) uint64 {
	if int(n) > len(input) {
		return pack(module.initError(fmt.Sprintf("plugin config: input of %d bytes is longer than the buffer (%d)", n, len(input))))
	}
	return pack(module.init(input[:n]))
}

//go:wasmexport kairo_handle
func kairoHandle(n uint32) uint64 {
	if int(n) > len(input) {
		return pack(module.handleError(fmt.Sprintf("batch: input of %d bytes is longer than the buffer (%d)", n, len(input))))
	}
	return pack(module.handle(input[:n]))
}

// handleError is the encoded abi.Reply of a batch that failed with msg.
func (g *instance) handleError(msg string) []byte {
	g.out = abi.AppendReply(g.out[:0], &abi.Reply{Error: msg})
	return g.out
}

func pack(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return abi.PackPtrLen(uint32(uintptr(unsafe.Pointer(&b[0]))), uint32(len(b)))
}

//go:wasmimport kairo call
//go:noescape
func hostCall(method unsafe.Pointer, methodLen uint32, args unsafe.Pointer, argsLen uint32) int64

//go:wasmimport kairo publish
//go:noescape
func hostPublish(ev unsafe.Pointer, evLen uint32) int32

//go:wasmimport kairo log
//go:noescape
func hostLog(level int32, msg unsafe.Pointer, msgLen uint32)

//go:wasmimport kairo now
func hostNow() int64

func publish(ev *abi.Event) error {
	b := enc.encodeEvent(ev)
	if r := hostPublish(unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b))); r < 0 {
		return publishErr(ev.Type, r)
	}
	return nil
}

func call(method string, args any) (int64, error) {
	a, err := enc.encodeArgs(method, args)
	if err != nil {
		return 0, err
	}
	tok := hostCall(unsafe.Pointer(unsafe.StringData(method)), uint32(len(method)),
		unsafe.Pointer(unsafe.SliceData(a)), uint32(len(a)))
	if tok < 0 {
		return 0, callErr(method, tok)
	}
	return tok, nil
}

func logLine(level slog.Level, msg string) {
	hostLog(int32(level), unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}

func now() int64 { return hostNow() }
