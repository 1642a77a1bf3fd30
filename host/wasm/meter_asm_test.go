package wasm

// Hand-assembled guests for the deadline tests: the plugin ABI of asmGuest
// (asm_test.go), with bodies of our choosing for _initialize and
// kairo_handle, a helper function for recursion, and locals.

// loopGuest is a plugin whose _initialize and kairo_handle run the given
// bodies; both have the i64 locals 1 and 2 (_initialize's are 0 and 1, as it
// takes no parameter). Function 5, "work", (i32) -> i32, runs work.
type loopGuest struct {
	initialize []byte
	handle     []byte // before the return of the empty reply
	work       []byte
	// start, when set, is the body of function 6, the module's start
	// function (its start section), with the i64 locals 0 and 1.
	start []byte
	// exportName, when set, exports kairo_handle a second time under this
	// name.
	exportName string
}

func (g loopGuest) bytes() []byte {
	i32, i64 := byte(0x7f), byte(0x7e)
	types := [][2][]byte{
		{nil, nil},     // 0: () -> ()
		{nil, {i32}},   // 1: () -> i32
		{{i32}, {i32}}, // 2: (i32) -> i32
		{{i32}, {i64}}, // 3: (i32) -> i64
	}
	twoI64 := []byte{2, i64} // two i64 locals
	funcs := []struct {
		export string
		typ    byte
		locals []byte
		body   []byte
	}{
		{"_initialize", 0, twoI64, g.initialize},
		{"kairo_abi_version", 1, nil, i32const(1)},
		{"kairo_input", 2, nil, i32const(asmInput)},
		{"kairo_init", 3, nil, returns(asmInit, uint32(len(asmInitOut)))},
		{"kairo_handle", 3, twoI64, append(append([]byte{}, g.handle...), returns(asmEmpty, 1)...)},
		{"work", 2, nil, g.work},
	}
	if funcs[5].body == nil {
		funcs[5].body = []byte{0x20, 0x00} // local.get 0
	}
	if g.start != nil {
		funcs = append(funcs, struct {
			export string
			typ    byte
			locals []byte
			body   []byte
		}{"start", 0, twoI64, g.start})
	}

	m := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	sec := uleb(nil, uint64(len(types)))
	for _, t := range types {
		sec = append(sec, 0x60)
		sec = vec(sec, t[0])
		sec = vec(sec, t[1])
	}
	m = section(m, 1, sec)

	sec = uleb(nil, uint64(len(funcs)))
	for _, f := range funcs {
		sec = append(sec, f.typ)
	}
	m = section(m, 3, sec)
	m = section(m, 5, []byte{1, 0x00, 1})

	exports := 1 + len(funcs)
	if g.exportName != "" {
		exports++
	}
	sec = uleb(nil, uint64(exports))
	sec = append(name(sec, "memory"), 0x02, 0)
	for i, f := range funcs {
		sec = uleb(append(name(sec, f.export), 0x00), uint64(i))
	}
	if g.exportName != "" {
		sec = append(name(sec, g.exportName), 0x00, 4)
	}
	m = section(m, 7, sec)
	if g.start != nil {
		m = section(m, 8, []byte{6})
	}

	sec = uleb(nil, uint64(len(funcs)))
	for _, f := range funcs {
		body := uleb(nil, uint64(min(len(f.locals), 1)))
		body = append(body, f.locals...)
		body = append(body, f.body...)
		sec = vec(sec, append(body, 0x0b))
	}
	m = section(m, 10, sec)

	segs := []struct {
		at   int64
		data []byte
	}{{asmInit, asmInitOut}, {asmEmpty, []byte{0x80}}}
	sec = uleb(nil, uint64(len(segs)))
	for _, s := range segs {
		sec = append(append(sec, 0x00, 0x41), sleb(s.at)...)
		sec = vec(append(sec, 0x0b), s.data)
	}
	return section(m, 11, sec)
}

func i32const(v int64) []byte { return append([]byte{0x41}, sleb(v)...) }

func i64const(v int64) []byte { return append([]byte{0x42}, sleb(v)...) }

// countTo is a loop that counts the i64 local l up to n: the tightest loop a
// guest can write.
func countTo(l byte, n int64) []byte {
	b := []byte{0x03, 0x40, 0x20, l} // loop; local.get l
	b = append(b, i64const(1)...)
	b = append(b, 0x7c, 0x22, l) // i64.add; local.tee l
	b = append(b, i64const(n)...)
	return append(b, 0x54, 0x0d, 0x00, 0x0b) // i64.lt_u; br_if 0; end
}

// nestedLoops runs an outer loop n times, counting in local outer, around an
// inner loop of m passes, counting in local inner.
func nestedLoops(outer, inner byte, n, m int64) []byte {
	b := []byte{0x03, 0x40} // loop
	b = append(b, i64const(0)...)
	b = append(b, 0x21, inner) // local.set inner
	b = append(b, countTo(inner, m)...)
	b = append(b, 0x20, outer)
	b = append(b, i64const(1)...)
	b = append(b, 0x7c, 0x22, outer)
	b = append(b, i64const(n)...)
	return append(b, 0x54, 0x0d, 0x00, 0x0b)
}

// doubling is the body of work, (i32 n) -> i32: 2^n calls of itself, and no
// loop.
var doubling = []byte{
	0x20, 0x00, 0x45, 0x04, 0x7f, // local.get 0; i32.eqz; if (result i32)
	0x41, 0x01, 0x05, // i32.const 1; else
	0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x05, // work(n - 1)
	0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x05, // work(n - 1)
	0x6a, 0x0b, // i32.add; end
}

// callWork calls work(n) and drops what it returns.
func callWork(n int64) []byte {
	return append(i32const(n), 0x10, 0x05, 0x1a)
}
