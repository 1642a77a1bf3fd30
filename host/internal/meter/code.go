package meter

import "fmt"

// The immediates of the one-byte opcodes, and what the walker does at them.
const (
	opUnknown      = iota // not an opcode the walker knows
	opNone                // no immediate
	opLEB                 // one LEB128 of up to 5 bytes: an index or an i32
	opI64                 // i64.const
	opF32                 // f32.const
	opF64                 // f64.const
	opMem                 // a memory argument
	opBlock               // block
	opLoop                // loop
	opIf                  // if
	opEnd                 // end
	opJump                // else, return: no immediate, not straight on
	opBr                  // br, br_if
	opBrTable             // br_table
	opCall                // call, return_call: a function index
	opRefFunc             // ref.func: a function index
	opCallIndirect        // call_indirect, return_call_indirect
	opGlobal              // global.get, global.set
	opSelectT             // select t*
	opRefNull             // ref.null
	opMisc                // the 0xfc prefix
	opVector              // the 0xfd prefix
	opAtomic              // the 0xfe prefix
)

var opKinds = func() (k [256]uint8) {
	set := func(kind uint8, ops ...int) {
		for _, op := range ops {
			k[op] = kind
		}
	}
	for op := 0x45; op <= 0xc4; op++ { // numeric, sign extension
		k[op] = opNone
	}
	for op := 0x28; op <= 0x3e; op++ { // loads and stores
		k[op] = opMem
	}
	set(opNone, 0x00, 0x01, 0x1a, 0x1b, 0xd1)
	set(opLEB, 0x20, 0x21, 0x22, 0x25, 0x26, 0x3f, 0x40, 0x41) // locals, tables, memory.size and grow, i32.const
	set(opI64, 0x42)
	set(opF32, 0x43)
	set(opF64, 0x44)
	set(opBlock, 0x02)
	set(opLoop, 0x03)
	set(opIf, 0x04)
	set(opEnd, 0x0b)
	set(opJump, 0x05, 0x0f)
	set(opBr, 0x0c, 0x0d)
	set(opBrTable, 0x0e)
	set(opCall, 0x10, 0x12)
	set(opRefFunc, 0xd2)
	set(opCallIndirect, 0x11, 0x13)
	set(opGlobal, 0x23, 0x24)
	set(opSelectT, 0x1c)
	set(opRefNull, 0xd0)
	set(opMisc, 0xfc)
	set(opVector, 0xfd)
	set(opAtomic, 0xfe)
	return k
}()

// function appends the body of one function to out, with checks inserted at
// the head of every loop and, if the function calls and reaches no loop
// first, on entry.
//
// Instructions are copied in runs; only a loop (after which the check goes)
// and a function index (which moves past the yield import) break a run. A Go
// module holds megabytes of code, and the host rewrites it on every load:
// the walk looks each opcode up in a table and skips one-byte LEB128s inline.
func (w *rewriter) function(out, body []byte) ([]byte, error) {
	i, err := w.locals(body)
	if err != nil {
		return nil, err
	}
	locals := body[:i]
	b := w.body[:0]
	from := i // start of the run not yet copied to b
	depth := 0
	globals := w.fuelGlobal()
	// prefix holds while every instruction so far runs straight on: if a
	// loop comes first, its check runs before any call, so the function
	// needs none on entry.
	prefix, loopFirst, calls := true, false, false
	fail := func(at int, err error) ([]byte, error) {
		return nil, fmt.Errorf("instruction %#x at byte %#x of the body: %w", body[at], at, err)
	}
	for {
		// Most instructions are one byte, or an opcode and a one-byte
		// index: skip them in a loop of their own.
		for i+2 < len(body) {
			k, c := opKinds[body[i]], body[i+1]
			if k == opNone {
				i++
			} else if c < 0x80 && (k == opLEB || (k == opGlobal && uint32(c) < globals)) {
				i += 2
			} else if k == opMem && c < 0x40 && body[i+2] < 0x80 { // small alignment and offset
				i += 3
			} else {
				break
			}
		}
		if i >= len(body) {
			return nil, fmt.Errorf("the body ends before its last end: %w", errShort)
		}
		at := i
		op := body[i]
		i++
		switch opKinds[op] {
		case opNone:
		case opLEB:
			if i < len(body) && body[i] < 0x80 {
				i++
			} else {
				i, err = skipLEB(body, i, 5)
			}
		case opMem:
			if i+1 < len(body) && body[i] < 0x40 && body[i+1] < 0x80 { // small alignment and offset
				i += 2
			} else {
				i, err = memArg(body, i)
			}
		case opGlobal:
			var idx uint32
			if i < len(body) && body[i] < 0x80 {
				idx = uint32(body[i])
				i++
			} else {
				idx, i, err = readU32(body, i)
			}
			if err == nil && idx >= globals {
				err = fmt.Errorf("global %d does not exist (the module has %d)", idx, globals)
			}
		case opBr:
			if i < len(body) && body[i] < 0x80 {
				i++
			} else {
				i, err = skipLEB(body, i, 5)
			}
			prefix = false
		case opBlock, opLoop, opIf:
			if i < len(body) && (body[i] == 0x40 || isValType(body[i])) {
				i++
			} else if i, err = blockType(body, i); err != nil {
				return fail(at, err)
			}
			depth++
			if op == 0x03 {
				b = append(b, body[from:i]...)
				b = append(b, w.checkSeq...)
				from = i
				if prefix {
					loopFirst = true
				}
			}
			if op != 0x02 {
				prefix = false
			}
		case opEnd:
			if depth == 0 {
				if i != len(body) {
					return fail(at, fmt.Errorf("%d bytes after the function's end", len(body)-i))
				}
				b = append(b, body[from:i]...)
				w.body = b
				size := uint64(len(locals)) + uint64(len(b))
				entry := calls && !loopFirst
				if entry {
					size += uint64(len(w.checkSeq))
				}
				if size > 1<<32-1 {
					return nil, fmt.Errorf("the body grows past 4 GiB")
				}
				out = appendU32(out, uint32(size))
				out = append(out, locals...)
				if entry {
					out = append(out, w.checkSeq...)
				}
				return append(out, b...), nil
			}
			depth--
			prefix = false
		case opJump:
			prefix = false
		case opCall, opRefFunc:
			var idx uint32
			if idx, i, err = readU32(body, i); err != nil {
				return fail(at, err)
			}
			b = append(b, body[from:at+1]...)
			b = appendU32(b, w.funcIndex(idx))
			from = i
			if op != 0xd2 {
				calls, prefix = true, false
			}
		case opCallIndirect:
			if i, err = skipLEB(body, i, 5); err == nil {
				i, err = skipLEB(body, i, 5)
			}
			calls, prefix = true, false
		case opBrTable:
			var n uint32
			if n, i, err = readU32(body, i); err == nil {
				for k := uint64(0); k <= uint64(n) && err == nil; k++ {
					i, err = skipLEB(body, i, 5)
				}
			}
			prefix = false
		case opI64:
			i, err = skipLEB(body, i, 10)
		case opF32:
			i, err = skipBytes(body, i, 4)
		case opF64:
			i, err = skipBytes(body, i, 8)
		case opSelectT:
			var n uint32
			if n, i, err = readU32(body, i); err == nil {
				for k := uint32(0); k < n && err == nil; k++ {
					if i >= len(body) {
						err = errShort
					} else if !isValType(body[i]) {
						err = fmt.Errorf("value type %#x: %w", body[i], ErrUnsupported)
					}
					i++
				}
			}
		case opRefNull:
			if i >= len(body) {
				err = errShort
			} else if body[i] != 0x70 && body[i] != 0x6f {
				err = fmt.Errorf("heap type %#x: %w", body[i], ErrUnsupported)
			}
			i++
		case opMisc:
			i, err = miscOp(body, i)
		case opVector:
			i, err = vectorOp(body, i)
		case opAtomic:
			i, err = atomicOp(body, i)
		default:
			err = ErrUnsupported
		}
		if err != nil {
			return fail(at, err)
		}
	}
}

// locals returns the index after the local declarations.
func (w *rewriter) locals(body []byte) (int, error) {
	n, i, err := readU32(body, 0)
	for k := uint32(0); k < n && err == nil; k++ {
		if _, i, err = readU32(body, i); err != nil {
			break
		}
		if i >= len(body) {
			err = errShort
		} else if !isValType(body[i]) {
			err = fmt.Errorf("local of value type %#x: %w", body[i], ErrUnsupported)
		}
		i++
	}
	if err != nil {
		return 0, fmt.Errorf("locals: %w", err)
	}
	return i, nil
}

func isValType(t byte) bool {
	switch t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		return true
	}
	return false
}

// blockType skips a block type: empty, one value type, or a type index
// (multi-value), a non-negative 33-bit signed LEB128.
func blockType(b []byte, i int) (int, error) {
	if i >= len(b) {
		return i, errShort
	}
	if c := b[i]; c == 0x40 || isValType(c) {
		return i + 1, nil
	}
	var v int64
	for k := 0; k < 5; k++ {
		if i >= len(b) {
			return i, errShort
		}
		c := b[i]
		i++
		v |= int64(c&0x7f) << (7 * k)
		if c < 0x80 {
			if v>>(7*(k+1)-1)&1 != 0 { // negative: a heap or value type this walker does not know
				return i, fmt.Errorf("block type %#x: %w", b[i-k-1], ErrUnsupported)
			}
			return i, nil
		}
	}
	return i, errLEB
}

// memArg skips a memory argument: alignment (with bit 6 set, a memory index
// follows, as multi-memory encodes it) and offset.
func memArg(b []byte, i int) (int, error) {
	align, i, err := readU32(b, i)
	if err != nil {
		return i, err
	}
	if align&0x40 != 0 {
		if i, err = skipLEB(b, i, 5); err != nil {
			return i, err
		}
	}
	return skipLEB(b, i, 10)
}

func skipBytes(b []byte, i, n int) (int, error) {
	if len(b)-i < n {
		return i, errShort
	}
	return i + n, nil
}

// miscOp skips the 0xfc instructions: saturating truncations (0-7), bulk
// memory and table instructions (8-17).
func miscOp(b []byte, i int) (int, error) {
	sub, i, err := readU32(b, i)
	if err != nil {
		return i, err
	}
	var n int // LEB128 immediates
	switch {
	case sub <= 7:
	case sub == 8 || sub == 10 || sub == 12 || sub == 14: // memory.init, memory.copy, table.init, table.copy
		n = 2
	case sub <= 17: // data.drop, memory.fill, elem.drop, table.grow, table.size, table.fill
		n = 1
	default:
		return i, fmt.Errorf("0xfc %d: %w", sub, ErrUnsupported)
	}
	for ; n > 0 && err == nil; n-- {
		i, err = skipLEB(b, i, 5)
	}
	return i, err
}

// vectorOp skips the 0xfd (SIMD) instructions of WebAssembly 2.0; relaxed
// SIMD is not decoded.
func vectorOp(b []byte, i int) (int, error) {
	sub, i, err := readU32(b, i)
	if err != nil {
		return i, err
	}
	switch {
	case sub <= 11 || sub == 92 || sub == 93: // loads, store, load zero
		return memArg(b, i)
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		return skipBytes(b, i, 16)
	case sub >= 21 && sub <= 34: // extract and replace lane
		return skipBytes(b, i, 1)
	case sub >= 84 && sub <= 91: // load and store lane
		if i, err = memArg(b, i); err != nil {
			return i, err
		}
		return skipBytes(b, i, 1)
	case sub <= 255 && !vectorGap(sub):
		return i, nil
	}
	return i, fmt.Errorf("0xfd %d: %w", sub, ErrUnsupported)
}

// vectorGap reports the opcodes SIMD leaves unassigned below 256.
func vectorGap(sub uint32) bool {
	switch sub {
	case 0x9a, 0xa2, 0xa5, 0xa6, 0xaf, 0xb0, 0xb2, 0xb3, 0xb4, 0xbb,
		0xc2, 0xc5, 0xc6, 0xcf, 0xd0, 0xd2, 0xd3, 0xd4, 0xe2, 0xee:
		return true
	}
	return false
}

// atomicOp skips the 0xfe (threads) instructions.
func atomicOp(b []byte, i int) (int, error) {
	sub, i, err := readU32(b, i)
	if err != nil {
		return i, err
	}
	switch {
	case sub <= 2 || (sub >= 0x10 && sub <= 0x4e): // notify, wait, loads, stores, read-modify-writes
		return memArg(b, i)
	case sub == 3: // atomic.fence
		return skipBytes(b, i, 1)
	}
	return i, fmt.Errorf("0xfe %d: %w", sub, ErrUnsupported)
}

// constExpr copies a constant expression (a global's initializer, a
// segment's offset, an element) from r to out, moving function indices. It
// takes the instructions of WebAssembly 2.0 and of extended constant
// expressions.
func (w *rewriter) constExpr(r *reader, out []byte) ([]byte, error) {
	for r.err == nil {
		from := r.off
		op := r.byte()
		switch op {
		case 0x0b: // end
			return append(out, op), nil
		case 0x41: // i32.const
			r.skip(5)
		case 0x42: // i64.const
			r.skip(10)
		case 0x43:
			r.bytes(4)
		case 0x44:
			r.bytes(8)
		case 0xd0: // ref.null
			r.refType()
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // i32 and i64 add, sub, mul
		case 0x23: // global.get
			if idx := r.u32(); r.err == nil && idx >= w.fuelGlobal() {
				return nil, fmt.Errorf("global %d does not exist (the module has %d)", idx, w.fuelGlobal())
			}
		case 0xd2: // ref.func
			idx := r.u32()
			if r.err == nil {
				out = appendU32(append(out, op), w.funcIndex(idx))
				continue
			}
		case 0xfd: // v128.const
			if sub := r.u32(); sub != 12 && r.err == nil {
				return nil, fmt.Errorf("0xfd %d in a constant expression: %w", sub, ErrUnsupported)
			}
			r.bytes(16)
		default:
			if r.err == nil {
				return nil, fmt.Errorf("instruction %#x in a constant expression: %w", op, ErrUnsupported)
			}
		}
		if r.err == nil {
			out = append(out, r.b[from:r.off]...)
		}
	}
	return nil, r.err
}
