package wasm

import "encoding/binary"

// Guests written against the ABI in WebAssembly itself, assembled here byte
// by byte: they show the ABI needs no Go and no SDK, they can return what no
// SDK would (a pointer past memory, garbage MsgPack), and they compile in
// microseconds where a Go guest takes seconds under the race detector.

// asmGuest describes a hand-assembled guest. Its one page of memory holds
// the input buffer at asmInput and the outputs at the addresses below.
type asmGuest struct {
	version     int32
	extraImport string // a kairo import besides log, of type () -> i32
	handle      []byte // the body of kairo_handle, which returns an i64
}

const (
	asmInit    = 1024 // InitResult {info: {name: "asm"}}
	asmGarbage = 2048 // 0xc1 0xc1 0xc1 0xc1: 0xc1 is never used in MsgPack
	asmEmpty   = 3072 // {}
	asmInput   = 4096
)

var asmInitOut = []byte("\x81\xa4info\x81\xa4name\xa3asm")

// returns is a body that returns the packed ptr<<32 | n.
func returns(ptr, n uint32) []byte {
	return append([]byte{0x42}, sleb(int64(uint64(ptr)<<32|uint64(n)))...) // i64.const
}

func (g asmGuest) bytes() []byte {
	if g.handle == nil {
		g.handle = returns(asmEmpty, 1)
	}
	i32, i64 := byte(0x7f), byte(0x7e)
	types := [][2][]byte{
		{nil, nil},             // 0: () -> ()
		{nil, {i32}},           // 1: () -> i32
		{{i32}, {i32}},         // 2: (i32) -> i32
		{{i32}, {i64}},         // 3: (i32) -> i64
		{{i32, i32, i32}, nil}, // 4: (i32, i32, i32) -> (), kairo.log
	}
	var m []byte
	m = append(m, 0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00)

	var sec []byte
	sec = uleb(sec, uint64(len(types)))
	for _, t := range types {
		sec = append(sec, 0x60)
		sec = vec(sec, t[0])
		sec = vec(sec, t[1])
	}
	m = section(m, 1, sec)

	imports := [][3]any{{"kairo", "log", 4}}
	if g.extraImport != "" {
		imports = append(imports, [3]any{"kairo", g.extraImport, 1})
	}
	sec = uleb(nil, uint64(len(imports)))
	for _, imp := range imports {
		sec = name(sec, imp[0].(string))
		sec = name(sec, imp[1].(string))
		sec = append(sec, 0x00, byte(imp[2].(int)))
	}
	m = section(m, 2, sec)

	funcs := []struct {
		export string
		typ    byte
		body   []byte
	}{
		{"_initialize", 0, nil},
		{"kairo_abi_version", 1, append([]byte{0x41}, sleb(int64(g.version))...)},
		{"kairo_input", 2, append([]byte{0x41}, sleb(asmInput)...)},
		{"kairo_init", 3, returns(asmInit, uint32(len(asmInitOut)))},
		{"kairo_handle", 3, g.handle},
	}
	sec = uleb(nil, uint64(len(funcs)))
	for _, f := range funcs {
		sec = append(sec, f.typ)
	}
	m = section(m, 3, sec)

	m = section(m, 5, []byte{1, 0x00, 1}) // one memory, min 1 page, no max

	sec = uleb(nil, uint64(len(funcs)+1))
	sec = name(sec, "memory")
	sec = append(sec, 0x02, 0)
	for i, f := range funcs {
		sec = name(sec, f.export)
		sec = append(sec, 0x00)
		sec = uleb(sec, uint64(len(imports)+i))
	}
	m = section(m, 7, sec)

	sec = uleb(nil, uint64(len(funcs)))
	for _, f := range funcs {
		body := append([]byte{0}, f.body...) // no locals
		body = append(body, 0x0b)            // end
		sec = vec(sec, body)
	}
	m = section(m, 10, sec)

	segs := []struct {
		at   int64
		data []byte
	}{{asmInit, asmInitOut}, {asmGarbage, []byte{0xc1, 0xc1, 0xc1, 0xc1}}, {asmEmpty, []byte{0x80}}}
	sec = uleb(nil, uint64(len(segs)))
	for _, s := range segs {
		sec = append(sec, 0x00, 0x41) // active, memory 0, i32.const
		sec = append(sec, sleb(s.at)...)
		sec = append(sec, 0x0b)
		sec = vec(sec, s.data)
	}
	return section(m, 11, sec)
}

// callLog is a body that calls kairo.log (function 0) with level 0 and
// the range ptr, n, then returns the empty reply.
func callLog(ptr, n uint32) []byte {
	b := []byte{0x41, 0x00, 0x41}
	b = append(b, sleb(int64(int32(ptr)))...)
	b = append(b, 0x41)
	b = append(b, sleb(int64(int32(n)))...)
	b = append(b, 0x10, 0x00) // call 0
	return append(b, returns(asmEmpty, 1)...)
}

func section(m []byte, id byte, body []byte) []byte {
	return vec(append(m, id), body)
}

func vec(b, items []byte) []byte { return append(uleb(b, uint64(len(items))), items...) }

func name(b []byte, s string) []byte { return vec(b, []byte(s)) }

func uleb(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func sleb(v int64) []byte {
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
