package wasm

import (
	"bytes"
	"cmp"
	"errors"
	"slices"
)

// memSpan is a range of a guest's linear memory, [off, end).
type memSpan struct{ off, end uint64 }

// minDataSpan is the smallest span dataSpans reports: a shorter one is
// cleared with the rest, which costs less than skipping it.
const minDataSpan = 4 << 10

// dataSpans are the ranges of linear memory that the active data segments
// of the module wasm write whenever it is instantiated, merged where they
// touch, of at least minDataSpan bytes each. It is nil when a segment's
// offset is not a constant (a global's value is known only to the
// instance) or the data section cannot be read: then none is known.
func dataSpans(wasm []byte) []memSpan {
	if !bytes.HasPrefix(wasm, wasmHeader) {
		return nil
	}
	var spans []memSpan
	var bad error
	err := eachSection(wasm, func(id byte, body []byte) bool {
		if id != 11 {
			return true
		}
		spans, bad = readDataSpans(body)
		return false
	})
	if err != nil || bad != nil {
		return nil
	}
	slices.SortFunc(spans, func(a, b memSpan) int { return cmp.Compare(a.off, b.off) })
	out := spans[:0]
	for _, s := range spans {
		if n := len(out); n > 0 && s.off <= out[n-1].end {
			out[n-1].end = max(out[n-1].end, s.end)
			continue
		}
		out = append(out, s)
	}
	return slices.DeleteFunc(out, func(s memSpan) bool { return s.end-s.off < minDataSpan })
}

var errDataOffset = errors.New("a data segment's offset is not a constant")

// readDataSpans reads the body of a data section: the span of each active
// segment of memory 0 whose offset is an i32.const.
func readDataSpans(b []byte) ([]memSpan, error) {
	n, i, err := readULEB32(b)
	if err != nil {
		return nil, err
	}
	var spans []memSpan
	for range n {
		flag, k, err := readULEB32(b[i:])
		if err != nil {
			return nil, err
		}
		i += k
		active := flag != 1
		switch flag {
		case 0, 1:
		case 2:
			mem, k, err := readULEB32(b[i:])
			if err != nil {
				return nil, err
			}
			if mem != 0 {
				return nil, errors.New("a data segment of another memory")
			}
			i += k
		default:
			return nil, errors.New("a data segment of an unknown kind")
		}
		var off uint32
		if active {
			// i32.const N end, and nothing else.
			if i >= len(b) || b[i] != 0x41 {
				return nil, errDataOffset
			}
			v, k, err := readSLEB32(b[i+1:])
			if err != nil {
				return nil, err
			}
			i += 1 + k
			if i >= len(b) || b[i] != 0x0b {
				return nil, errDataOffset
			}
			i++
			off = uint32(v) // an offset is unsigned
		}
		size, k, err := readULEB32(b[i:])
		if err != nil {
			return nil, err
		}
		i += k
		if uint64(size) > uint64(len(b)-i) {
			return nil, errors.New("a data segment runs past its section")
		}
		i += int(size)
		if active && size > 0 {
			spans = append(spans, memSpan{off: uint64(off), end: uint64(off) + uint64(size)})
		}
	}
	return spans, nil
}

func readSLEB32(b []byte) (int32, int, error) {
	var v int64
	for i := 0; i < 5; i++ {
		if i >= len(b) {
			return 0, 0, errors.New("truncated LEB128 number")
		}
		v |= int64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			if shift := 7 * (i + 1); shift < 64 && b[i]&0x40 != 0 {
				v |= -1 << shift
			}
			return int32(v), i + 1, nil
		}
	}
	return 0, 0, errors.New("LEB128 number longer than 5 bytes")
}

// clearExcept zeroes buf but for the spans, sorted and apart, which the
// next instance's data segments write again.
func clearExcept(buf []byte, spans []memSpan) {
	at := uint64(0)
	n := uint64(len(buf))
	for _, s := range spans {
		if s.off >= n {
			break
		}
		if s.off > at {
			clear(buf[at:s.off])
		}
		at = max(at, min(s.end, n))
	}
	clear(buf[at:])
}
