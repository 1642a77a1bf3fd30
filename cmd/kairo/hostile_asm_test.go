package main

import (
	"encoding/binary"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// Hand-assembled guests: modules the SDK would never build, written byte
// by byte. One speaks the ABI well: its kairo_handle publishes
// plugin.NAME.done and returns a reply; the fields make it lie.

// The layout of an assembled guest's memory.
const (
	asmInitAt  = 1024
	asmEventAt = 4096
	asmInputAt = 8192 // to the end of the first page
	asmReplyAt = 65536
)

type asmModule struct {
	name        string
	version     int32     // kairo_abi_version; 0 is the host's
	noHandle    bool      // leave kairo_handle out
	extraImport [2]string // an import of type () -> i64
	extraFuncs  int       // functions besides the ABI's, never called
	customs     int       // custom sections of customSize bytes each
	customSize  int
	minPages    uint32    // the memory's initial size; 0 is what the data needs
	input       uint32    // what kairo_input returns; 0 is asmInputAt
	output      uint64    // what kairo_handle returns; 0 is the reply's place
	reply       []byte    // the reply; nil is {"thought": "asm"}
	logAt       [2]uint32 // kairo.log's range in kairo_handle, when set
	manifest    string    // embedded as the custom section kairo.manifest
	initOut     []byte    // what kairo_init answers; nil is initOutput(name, nil)
	initOutput  uint64    // what kairo_init returns; 0 is initOut's place
}

// initOutput is an InitResult naming the plugin name, subscribed to its
// namespace, serving services.
func initOutput(name string, services []string) []byte {
	b, err := msgpack.Marshal(abi.InitResult{Info: abi.PluginInfo{Name: name, Kinds: []string{abi.KindPolicy},
		Subscriptions: []string{"plugin." + name + ".>"}, Services: services}})
	if err != nil {
		panic(err)
	}
	return b
}

// claimSubscriptions is an InitResult whose subscriptions array header
// claims n entries and holds one.
func claimSubscriptions(name string, n uint32) []byte {
	b := []byte{0x81, 0xa4}
	b = append(b, "info"...)
	b = append(b, 0x82, 0xa4)
	b = append(b, "name"...)
	b = append(b, 0xd9, byte(len(name)))
	b = append(b, name...)
	b = append(b, 0xad)
	b = append(b, "subscriptions"...)
	b = binary.BigEndian.AppendUint32(append(b, 0xdd), n)
	b = append(b, 0xd9, byte(len(name)+9))
	return append(b, "plugin."+name+".>"...)
}

// packed is a ptr and length as kairo_handle returns them.
func packed(ptr, n uint32) uint64 { return uint64(ptr)<<32 | uint64(n) }

func (g asmModule) bytes() []byte {
	if g.version == 0 {
		g.version = abi.PluginABIVersion
	}
	if g.reply == nil {
		g.reply, _ = msgpack.Marshal(abi.Reply{Thought: "asm"})
	}
	if g.input == 0 {
		g.input = asmInputAt
	}
	if g.output == 0 {
		g.output = packed(asmReplyAt, uint32(len(g.reply)))
	}
	initOut := g.initOut
	if initOut == nil {
		initOut = initOutput(g.name, nil)
	}
	if g.initOutput == 0 {
		g.initOutput = packed(asmInitAt, uint32(len(initOut)))
	}
	event := abi.AppendEvent(nil, &abi.Event{Type: "plugin." + g.name + ".done", Data: msgpack.RawMessage("\x81\xa2ok\xc3")})
	pages := uint32((asmReplyAt+len(g.reply))>>16) + 1
	if g.minPages == 0 {
		g.minPages = pages
	}

	i32, i64 := byte(0x7f), byte(0x7e)
	types := [][2][]byte{
		{nil, nil},             // 0: () -> ()
		{nil, {i32}},           // 1: () -> i32
		{{i32}, {i32}},         // 2: (i32) -> i32
		{{i32}, {i64}},         // 3: (i32) -> i64
		{{i32, i32, i32}, nil}, // 4: kairo.log
		{{i32, i32}, {i32}},    // 5: kairo.publish
		{nil, {i64}},           // 6: () -> i64, as kairo.now
	}
	m := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	sec := asmUleb(nil, uint64(len(types)))
	for _, t := range types {
		sec = append(sec, 0x60)
		sec = asmVec(sec, t[0])
		sec = asmVec(sec, t[1])
	}
	m = asmSection(m, 1, sec)

	type imp struct {
		mod, name string
		typ       byte
	}
	imports := []imp{{"kairo", "log", 4}, {"kairo", "publish", 5}}
	if g.extraImport[0] != "" {
		imports = append(imports, imp{g.extraImport[0], g.extraImport[1], 6})
	}
	sec = asmUleb(nil, uint64(len(imports)))
	for _, im := range imports {
		sec = asmName(sec, im.mod)
		sec = asmName(sec, im.name)
		sec = append(sec, 0x00, im.typ)
	}
	m = asmSection(m, 2, sec)

	handle := []byte{0x41}
	handle = append(handle, asmSleb(asmEventAt)...)
	handle = append(handle, 0x41)
	handle = append(handle, asmSleb(int64(len(event)))...)
	handle = append(handle, 0x10, 0x01, 0x1a) // call publish, drop
	if g.logAt != [2]uint32{} {
		handle = append(handle, 0x41, 0x00, 0x41)
		handle = append(handle, asmSleb(int64(int32(g.logAt[0])))...)
		handle = append(handle, 0x41)
		handle = append(handle, asmSleb(int64(int32(g.logAt[1])))...)
		handle = append(handle, 0x10, 0x00) // call log
	}
	handle = append(handle, 0x42)
	handle = append(handle, asmSleb(int64(g.output))...)

	type fn struct {
		export string
		typ    byte
		body   []byte
	}
	funcs := []fn{
		{"_initialize", 0, nil},
		{"kairo_abi_version", 1, append([]byte{0x41}, asmSleb(int64(g.version))...)},
		{"kairo_input", 2, append([]byte{0x41}, asmSleb(int64(int32(g.input)))...)},
		{"kairo_init", 3, append([]byte{0x42}, asmSleb(int64(g.initOutput))...)},
	}
	if !g.noHandle {
		funcs = append(funcs, fn{"kairo_handle", 3, handle})
	}
	for range g.extraFuncs {
		funcs = append(funcs, fn{"", 0, nil})
	}
	sec = asmUleb(nil, uint64(len(funcs)))
	for _, f := range funcs {
		sec = append(sec, f.typ)
	}
	m = asmSection(m, 3, sec)

	m = asmSection(m, 5, append([]byte{1, 0x00}, asmUleb(nil, uint64(g.minPages))...))

	var exports []byte
	n := 1
	exports = asmName(exports, "memory")
	exports = append(exports, 0x02, 0)
	for i, f := range funcs {
		if f.export == "" {
			continue
		}
		n++
		exports = asmName(exports, f.export)
		exports = append(exports, 0x00)
		exports = asmUleb(exports, uint64(len(imports)+i))
	}
	m = asmSection(m, 7, append(asmUleb(nil, uint64(n)), exports...))

	sec = asmUleb(nil, uint64(len(funcs)))
	for _, f := range funcs {
		body := append([]byte{0}, f.body...) // no locals
		sec = asmVec(sec, append(body, 0x0b))
	}
	m = asmSection(m, 10, sec)

	segs := []struct {
		at   int64
		data []byte
	}{{asmInitAt, initOut}, {asmEventAt, event}, {asmReplyAt, g.reply}}
	sec = asmUleb(nil, uint64(len(segs)))
	for _, s := range segs {
		sec = append(sec, 0x00, 0x41)
		sec = append(sec, asmSleb(s.at)...)
		sec = append(sec, 0x0b)
		sec = asmVec(sec, s.data)
	}
	m = asmSection(m, 11, sec)

	if g.manifest != "" {
		m = asmSection(m, 0, append(asmName(nil, "kairo.manifest"), g.manifest...))
	}
	for i := range g.customs {
		body := asmName(nil, fmt.Sprintf("pad%d", i))
		m = asmSection(m, 0, append(body, make([]byte, g.customSize)...))
	}
	return m
}

// claimActions is a reply whose actions array header claims n entries and
// holds have empty ones.
func claimActions(n uint32, have int) []byte {
	b := []byte{0x81, 0xa7}
	b = append(b, "actions"...)
	b = binary.BigEndian.AppendUint32(append(b, 0xdd), n)
	for range have {
		b = append(b, 0x80)
	}
	return b
}

// deepReply is a reply with a key the decoder does not know whose value is
// arrays nested depth deep.
func deepReply(depth int) []byte {
	b := []byte{0x81, 0xa4}
	b = append(b, "deep"...)
	for range depth {
		b = append(b, 0x91)
	}
	return append(b, 0xc0)
}

func asmSection(m []byte, id byte, body []byte) []byte { return asmVec(append(m, id), body) }

func asmVec(b, items []byte) []byte { return append(asmUleb(b, uint64(len(items))), items...) }

func asmName(b []byte, s string) []byte { return asmVec(b, []byte(s)) }

func asmUleb(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func asmSleb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
