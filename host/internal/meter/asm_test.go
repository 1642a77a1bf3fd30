package meter

import "encoding/binary"

// A small assembler for the modules of the tests: sections are written from
// the fields below, in order; instructions are bytes.

const (
	i32     = 0x7f
	i64     = 0x7e
	f32     = 0x7d
	v128    = 0x7b
	funcref = 0x70
)

type asmFunc struct {
	typ    uint32
	locals []byte // raw local declarations after their count: (n, type) pairs
	nLocal uint32 // how many pairs locals holds
	body   []byte // the instructions, without the final end
	export string
	name   string // in the name section, if set
}

type asmModule struct {
	types   [][2][]byte // params, results
	imports [][3]any    // module, name, type index (functions only)
	funcs   []asmFunc
	tables  []byte   // raw table section content, if set
	memory  bool     // one memory of one page, exported as "mem"
	globals [][]byte // raw: type, mutability, init expression with end
	start   *uint32
	elems   [][]byte // raw element segments
	data    [][]byte // raw data segments
	customs [][2]string
}

func (m asmModule) bytes() []byte {
	out := append([]byte{}, header...)
	if len(m.types) > 0 {
		sec := uleb(nil, uint64(len(m.types)))
		for _, t := range m.types {
			sec = append(sec, 0x60)
			sec = vec(sec, t[0])
			sec = vec(sec, t[1])
		}
		out = sect(out, secType, sec)
	}
	if len(m.imports) > 0 {
		sec := uleb(nil, uint64(len(m.imports)))
		for _, imp := range m.imports {
			sec = str(sec, imp[0].(string))
			sec = str(sec, imp[1].(string))
			sec = uleb(append(sec, 0x00), uint64(imp[2].(int)))
		}
		out = sect(out, secImport, sec)
	}
	if len(m.funcs) > 0 {
		sec := uleb(nil, uint64(len(m.funcs)))
		for _, f := range m.funcs {
			sec = uleb(sec, uint64(f.typ))
		}
		out = sect(out, secFunction, sec)
	}
	if m.tables != nil {
		out = sect(out, secTable, m.tables)
	}
	if m.memory {
		out = sect(out, secMemory, []byte{1, 0x00, 1})
	}
	if len(m.globals) > 0 {
		sec := uleb(nil, uint64(len(m.globals)))
		for _, g := range m.globals {
			sec = append(sec, g...)
		}
		out = sect(out, secGlobal, sec)
	}
	var exports [][]byte
	for i, f := range m.funcs {
		if f.export != "" {
			e := str(nil, f.export)
			exports = append(exports, uleb(append(e, 0x00), uint64(len(m.imports)+i)))
		}
	}
	if m.memory {
		exports = append(exports, append(str(nil, "mem"), 0x02, 0))
	}
	if len(exports) > 0 {
		sec := uleb(nil, uint64(len(exports)))
		for _, e := range exports {
			sec = append(sec, e...)
		}
		out = sect(out, secExport, sec)
	}
	if m.start != nil {
		out = sect(out, secStart, uleb(nil, uint64(*m.start)))
	}
	if len(m.elems) > 0 {
		sec := uleb(nil, uint64(len(m.elems)))
		for _, e := range m.elems {
			sec = append(sec, e...)
		}
		out = sect(out, secElement, sec)
	}
	if len(m.funcs) > 0 {
		sec := uleb(nil, uint64(len(m.funcs)))
		for _, f := range m.funcs {
			body := uleb(nil, uint64(f.nLocal))
			body = append(body, f.locals...)
			body = append(body, f.body...)
			body = append(body, 0x0b)
			sec = vec(sec, body)
		}
		out = sect(out, secCode, sec)
	}
	if len(m.data) > 0 {
		sec := uleb(nil, uint64(len(m.data)))
		for _, d := range m.data {
			sec = append(sec, d...)
		}
		out = sect(out, secData, sec)
	}
	var names []byte
	n := 0
	for i, f := range m.funcs {
		if f.name != "" {
			names = str(uleb(names, uint64(len(m.imports)+i)), f.name)
			n++
		}
	}
	if n > 0 {
		sub := append(uleb(nil, uint64(n)), names...)
		sec := str(nil, "name")
		sec = vec(append(sec, 1), sub)
		out = sect(out, secCustom, sec)
	}
	for _, c := range m.customs {
		out = sect(out, secCustom, append(str(nil, c[0]), c[1]...))
	}
	return out
}

func sect(m []byte, id byte, body []byte) []byte { return vec(append(m, id), body) }

func vec(b, items []byte) []byte { return append(uleb(b, uint64(len(items))), items...) }

func str(b []byte, s string) []byte { return vec(b, []byte(s)) }

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

// Instruction helpers.

func i32c(v int32) []byte { return append([]byte{0x41}, sleb(int64(v))...) }

func local(op byte, idx uint32) []byte { return uleb([]byte{op}, uint64(idx)) }

func call(idx uint32) []byte { return uleb([]byte{0x10}, uint64(idx)) }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}
