package secrets

import (
	"encoding/binary"
	"errors"
)

// MaskMsgpack masks raw, one MsgPack value (an event's data).
//
// A MsgPack string is its bytes, whole, after a header, so when raw holds
// no value in any form, no string in it does: raw itself is returned, and
// that scan is the whole cost. Otherwise each string and binary value,
// map keys included, is masked where it stands and given the header of
// its new length; every other byte is copied as it was, so numbers,
// timestamps and extensions keep their exact encoding.
//
// It never returns MsgPack that does not decode, nor one that still holds
// a value: when raw is not one well-formed value, or a value remains once
// the strings are masked (it was in an extension, a number, or across the
// bytes of two strings), the result is one MsgPack string holding raw
// masked as bytes. What reads it finds a string where it expected a map:
// an error it can report, where garbage would be a crash or a leak.
func (m *Masker) MaskMsgpack(raw []byte) []byte {
	mt := m.index()
	if mt == nil || !mt.any(raw) {
		return raw
	}
	if out, err := maskMsgpack(mt, raw); err == nil && !mt.any(out) {
		return out
	}
	return appendStr(nil, mt.mask(raw))
}

var errMsgpack = errors.New("not one well-formed MsgPack value")

// maskMsgpack is raw with its strings and binaries masked; an error when
// raw is not one well-formed value. Containers are counted, not recursed
// into: left is the values still to read, so nesting costs no stack, and a
// count that claims more values than raw has bytes is refused before
// anything is read.
func maskMsgpack(mt *matcher, raw []byte) ([]byte, error) {
	out := make([]byte, 0, len(raw)+64)
	i, left := 0, 1
	for ; left > 0; left-- {
		if i >= len(raw) {
			return nil, errMsgpack
		}
		c := raw[i]
		head, size, kind := msgpackItem(c)
		if kind == kindBad || i+head > len(raw) {
			return nil, errMsgpack
		}
		n := msgpackLen(c, raw[i+1:i+head])
		if n < 0 || n > len(raw) { // more than raw could hold (or past int, on 32 bits)
			return nil, errMsgpack
		}
		switch kind {
		case kindArray:
			left += n
		case kindMap:
			left += 2 * n
		case kindStr, kindBin:
			size = n
		case kindExt:
			size = 1 + n // its type byte, then its data
		}
		if left > len(raw)-i || i+head+size > len(raw) {
			return nil, errMsgpack
		}
		out = appendMaskedItem(out, mt, raw[i:i+head+size], head, kind)
		i += head + size
	}
	if i != len(raw) {
		return nil, errMsgpack
	}
	return out, nil
}

// appendMaskedItem appends item, whose header is head bytes long, with its
// body masked when it is a string or a binary.
func appendMaskedItem(out []byte, mt *matcher, item []byte, head, kind int) []byte {
	if kind != kindStr && kind != kindBin {
		return append(out, item...)
	}
	body := item[head:]
	rs := mt.regions(body)
	switch {
	case rs == nil:
		return append(out, item...)
	case kind == kindStr:
		return appendStr(out, appendMasked(nil, body, rs, 0))
	}
	return appendBin(out, appendMasked(nil, body, rs, 0))
}

// Kinds of MsgPack items, as far as masking tells them apart.
const (
	kindBad = iota
	kindFixed
	kindArray
	kindMap
	kindStr
	kindBin
	kindExt
)

// msgpackItem reads the first byte c of an item: the length of its header
// (c and the length bytes after it), the size of its body when it is
// fixed, and its kind. A str, bin or ext body's size, and an array's or a
// map's count, is msgpackLen of the header.
func msgpackItem(c byte) (head, size, kind int) {
	switch {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		return 1, 0, kindFixed // fixint, nil, bool
	case c <= 0x8f:
		return 1, 0, kindMap
	case c <= 0x9f:
		return 1, 0, kindArray
	case c <= 0xbf:
		return 1, 0, kindStr
	}
	switch c {
	case 0xc4, 0xc5, 0xc6:
		return 1 + 1<<(c-0xc4), 0, kindBin
	case 0xc7, 0xc8, 0xc9:
		return 1 + 1<<(c-0xc7), 0, kindExt
	case 0xca, 0xcb:
		return 1, 4 << (c - 0xca), kindFixed // float32, float64
	case 0xcc, 0xcd, 0xce, 0xcf:
		return 1, 1 << (c - 0xcc), kindFixed // uint8 to uint64
	case 0xd0, 0xd1, 0xd2, 0xd3:
		return 1, 1 << (c - 0xd0), kindFixed // int8 to int64
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		return 1, 1 + 1<<(c-0xd4), kindFixed // fixext: type, then 1 to 16 bytes
	case 0xd9, 0xda, 0xdb:
		return 1 + 1<<(c-0xd9), 0, kindStr
	case 0xdc, 0xdd:
		return 1 + 2<<(c-0xdc), 0, kindArray
	case 0xde, 0xdf:
		return 1 + 2<<(c-0xde), 0, kindMap
	}
	return 0, 0, kindBad // 0xc1, never used
}

// msgpackLen is the length or count an item's header gives: in c itself
// for the fix forms, else big-endian in the bytes after it.
func msgpackLen(c byte, b []byte) int {
	switch len(b) {
	case 1:
		return int(b[0])
	case 2:
		return int(binary.BigEndian.Uint16(b))
	case 4:
		return int(binary.BigEndian.Uint32(b))
	}
	switch {
	case c >= 0x80 && c <= 0x9f:
		return int(c & 0x0f)
	case c >= 0xa0 && c <= 0xbf:
		return int(c & 0x1f)
	}
	return 0
}

// appendStr appends s as a MsgPack string, in its shortest header.
func appendStr(dst, s []byte) []byte {
	if len(s) < 32 {
		return append(append(dst, 0xa0|byte(len(s))), s...) // fixstr
	}
	return appendSized(dst, s, 0xd9)
}

// appendBin appends b as a MsgPack binary, in its shortest header.
func appendBin(dst, b []byte) []byte { return appendSized(dst, b, 0xc4) }

// appendSized appends body after the shortest of the three headers whose
// codes are code8 (an 8-bit length), code8+1 (16 bits) and code8+2 (32).
func appendSized(dst, body []byte, code8 byte) []byte {
	switch n := len(body); {
	case n < 1<<8:
		dst = append(dst, code8, byte(n))
	case n < 1<<16:
		dst = binary.BigEndian.AppendUint16(append(dst, code8+1), uint16(n))
	default:
		dst = binary.BigEndian.AppendUint32(append(dst, code8+2), uint32(n))
	}
	return append(dst, body...)
}
