//go:build wasip1

package plugin

import (
	"bytes"
	"fmt"
	"log/slog"
	"unsafe"

	"github.com/kairo-os/kairo/abi"
	"github.com/vmihailenco/msgpack/v5"
)

// The guest side of the plugin ABI. One call runs at a time, so the buffers
// are package state, reused from call to call: the host writes into input,
// and output stays valid until the next call. Batches and replies, which
// cross on every call, take abi's hand-written codecs; the config and the
// init result, which cross once, the reflection codec.
//
// Every allocation counts inside a guest, where the Go collector's work
// lands on the calls that allocate: batch is decoded call after call into
// the same events (Plugin.Handle says what a handler may keep).
var (
	input  []byte
	batch  abi.Batch
	output bytes.Buffer
	enc    = msgpack.NewEncoder(&output)
	rd     bytes.Reader
	dec    = msgpack.NewDecoder(&rd)
	outBuf []byte
	pubBuf []byte
	argBuf bytes.Buffer
	argEnc = msgpack.NewEncoder(&argBuf)
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
	var cfg abi.PluginConfig
	var res abi.InitResult
	if err := decode(n, &cfg); err != nil {
		res.Error = "plugin config: " + err.Error()
	} else if registered.Init == nil {
		res.Error = "the plugin registered no Init (call plugin.Register from an init function)"
	} else if res.Info, err = registered.Init(cfg); err != nil {
		res.Error = err.Error()
	} else {
		describe(&res.Info)
	}
	return encode(&res)
}

//go:wasmexport kairo_handle
func kairoHandle(n uint32) uint64 {
	var reply abi.Reply
	// The batch decodes from a copy of its own, since its strings alias
	// what they decode from and the handler may keep them past this call.
	if int(n) > len(input) {
		reply.Error = fmt.Sprintf("batch: input of %d bytes is longer than the buffer (%d)", n, len(input))
	} else if err := abi.DecodeBatchReusing(bytes.Clone(input[:n]), &batch); err != nil {
		reply.Error = "batch: " + err.Error()
	} else if reply, err = handle(&batch); err != nil {
		reply.Error = err.Error()
	}
	outBuf = abi.AppendReply(outBuf[:0], &reply)
	return abi.PackPtrLen(uint32(uintptr(unsafe.Pointer(&outBuf[0]))), uint32(len(outBuf)))
}

func decode(n uint32, v any) error {
	if int(n) > len(input) {
		return fmt.Errorf("input of %d bytes is longer than the buffer (%d)", n, len(input))
	}
	rd.Reset(input[:n])
	dec.Reset(&rd)
	return dec.Decode(v)
}

func encode(v any) uint64 {
	output.Reset()
	if err := enc.Encode(v); err != nil {
		// Only a value the codec cannot write gets here; say so in the
		// shape the host expects.
		output.Reset()
		_ = enc.Encode(&abi.Reply{Error: "encode reply: " + err.Error()})
	}
	b := output.Bytes()
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
	pubBuf = abi.AppendEvent(pubBuf[:0], ev)
	if r := hostPublish(unsafe.Pointer(unsafe.SliceData(pubBuf)), uint32(len(pubBuf))); r < 0 {
		return fmt.Errorf("publish %s: %w", ev.Type, abi.Errno(r))
	}
	return nil
}

func call(method string, args any) (int64, error) {
	argBuf.Reset()
	if err := argEnc.Encode(args); err != nil {
		return 0, fmt.Errorf("call %s: encode args: %w", method, err)
	}
	a := argBuf.Bytes()
	tok := hostCall(unsafe.Pointer(unsafe.StringData(method)), uint32(len(method)),
		unsafe.Pointer(unsafe.SliceData(a)), uint32(len(a)))
	if tok < 0 {
		return 0, fmt.Errorf("call %s: %w", method, abi.Errno(tok))
	}
	return tok, nil
}

func logLine(level slog.Level, msg string) {
	hostLog(int32(level), unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}

func now() int64 { return hostNow() }
