package abi

// The MsgPack primitives of the hand-written codecs. Readers check every
// length against their input and return what follows the value; writers
// append the smallest encoding, as msgpack libraries do. Why by hand, and
// why every length is checked: docs/RATIONALE.md#untrusted-msgpack.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unsafe"
)

// readMap walks a map with string keys, handing each value to field, which
// returns what follows the value. what names the map in errors.
func readMap(b []byte, what string, field func(key string, b []byte) ([]byte, error)) ([]byte, error) {
	n, b, err := readMapLen(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	for i := 0; i < n; i++ {
		var key string
		if key, b, err = readStr(b); err != nil {
			return nil, fmt.Errorf("%s: map key %d: %w", what, i, err)
		}
		if b, err = field(key, b); err != nil {
			return nil, fmt.Errorf("%s: field %q: %w", what, key, err)
		}
	}
	return b, nil
}

// readRaw returns the bytes of the next value, nil for a MsgPack nil.
func readRaw(b []byte) ([]byte, []byte, error) {
	raw, rest, err := skip(b, 0)
	if err != nil || (len(raw) == 1 && raw[0] == 0xc0) {
		return nil, rest, err
	}
	return raw[:len(raw):len(raw)], rest, nil
}

var errShort = errors.New("unexpected end of data")

func need(b []byte, n int) error {
	if n < 0 || len(b) < n {
		return errShort
	}
	return nil
}

func readMapLen(b []byte) (int, []byte, error) {
	if len(b) == 0 {
		return 0, nil, errShort
	}
	c := b[0]
	switch {
	case c&0xf0 == 0x80:
		return int(c & 0x0f), b[1:], nil
	case c == 0xde:
		if err := need(b, 3); err != nil {
			return 0, nil, err
		}
		return int(binary.BigEndian.Uint16(b[1:])), b[3:], nil
	case c == 0xdf:
		if err := need(b, 5); err != nil {
			return 0, nil, err
		}
		return int(binary.BigEndian.Uint32(b[1:])), b[5:], nil
	}
	return 0, nil, fmt.Errorf("want a map, got MsgPack code %#x", c)
}

// readStr reads a str (or nil, as ""). The string aliases b.
func readStr(b []byte) (string, []byte, error) {
	if len(b) == 0 {
		return "", nil, errShort
	}
	c := b[0]
	var n, h int
	switch {
	case c&0xe0 == 0xa0:
		n, h = int(c&0x1f), 1
	case c == 0xd9:
		if err := need(b, 2); err != nil {
			return "", nil, err
		}
		n, h = int(b[1]), 2
	case c == 0xda:
		if err := need(b, 3); err != nil {
			return "", nil, err
		}
		n, h = int(binary.BigEndian.Uint16(b[1:])), 3
	case c == 0xdb:
		if err := need(b, 5); err != nil {
			return "", nil, err
		}
		n, h = int(binary.BigEndian.Uint32(b[1:])), 5
	case c == 0xc0:
		return "", b[1:], nil
	default:
		return "", nil, fmt.Errorf("want a string, got MsgPack code %#x", c)
	}
	if err := need(b, h+n); err != nil {
		return "", nil, err
	}
	if n == 0 {
		return "", b[h:], nil
	}
	return unsafe.String(&b[h], n), b[h+n:], nil
}

func readUint(b []byte) (uint64, []byte, error) {
	if len(b) == 0 {
		return 0, nil, errShort
	}
	c := b[0]
	switch {
	case c <= 0x7f:
		return uint64(c), b[1:], nil
	case c == 0xcc || c == 0xd0:
		if err := need(b, 2); err != nil {
			return 0, nil, err
		}
		if c == 0xd0 && int8(b[1]) < 0 {
			return 0, nil, fmt.Errorf("want an unsigned integer, got %d", int8(b[1]))
		}
		return uint64(b[1]), b[2:], nil
	case c == 0xcd || c == 0xd1:
		if err := need(b, 3); err != nil {
			return 0, nil, err
		}
		v := binary.BigEndian.Uint16(b[1:])
		if c == 0xd1 && int16(v) < 0 {
			return 0, nil, fmt.Errorf("want an unsigned integer, got %d", int16(v))
		}
		return uint64(v), b[3:], nil
	case c == 0xce || c == 0xd2:
		if err := need(b, 5); err != nil {
			return 0, nil, err
		}
		v := binary.BigEndian.Uint32(b[1:])
		if c == 0xd2 && int32(v) < 0 {
			return 0, nil, fmt.Errorf("want an unsigned integer, got %d", int32(v))
		}
		return uint64(v), b[5:], nil
	case c == 0xcf || c == 0xd3:
		if err := need(b, 9); err != nil {
			return 0, nil, err
		}
		v := binary.BigEndian.Uint64(b[1:])
		if c == 0xd3 && int64(v) < 0 {
			return 0, nil, fmt.Errorf("want an unsigned integer, got %d", int64(v))
		}
		return v, b[9:], nil
	case c == 0xc0:
		return 0, b[1:], nil
	}
	return 0, nil, fmt.Errorf("want an unsigned integer, got MsgPack code %#x", c)
}

// readTime reads the MsgPack timestamp extension (type -1) in its 32-, 64-
// and 96-bit forms, or nil as the zero time.
func readTime(b []byte) (time.Time, []byte, error) {
	if len(b) == 0 {
		return time.Time{}, nil, errShort
	}
	var body []byte
	switch b[0] {
	case 0xc0:
		return time.Time{}, b[1:], nil
	case 0xd6: // fixext 4
		if err := need(b, 6); err != nil {
			return time.Time{}, nil, err
		}
		if int8(b[1]) != -1 {
			break
		}
		return time.Unix(int64(binary.BigEndian.Uint32(b[2:])), 0), b[6:], nil
	case 0xd7: // fixext 8
		if err := need(b, 10); err != nil {
			return time.Time{}, nil, err
		}
		if int8(b[1]) != -1 {
			break
		}
		v := binary.BigEndian.Uint64(b[2:])
		nsec, sec := int64(v>>34), int64(v&(1<<34-1))
		if nsec > 999999999 {
			return time.Time{}, nil, fmt.Errorf("timestamp nanoseconds %d out of range", nsec)
		}
		return time.Unix(sec, nsec), b[10:], nil
	case 0xc7: // ext 8
		if err := need(b, 15); err != nil {
			return time.Time{}, nil, err
		}
		if b[1] != 12 || int8(b[2]) != -1 {
			break
		}
		body = b[3:15]
		nsec := binary.BigEndian.Uint32(body)
		if nsec > 999999999 {
			return time.Time{}, nil, fmt.Errorf("timestamp nanoseconds %d out of range", nsec)
		}
		return time.Unix(int64(binary.BigEndian.Uint64(body[4:])), int64(nsec)), b[15:], nil
	}
	return time.Time{}, nil, fmt.Errorf("want a MsgPack timestamp (extension -1), got code %#x", b[0])
}

// maxDepth bounds nesting in skipped values, so hostile input cannot exhaust
// the stack.
const maxDepth = 64

// skip returns the bytes of the next MsgPack value and what follows it.
func skip(b []byte, depth int) ([]byte, []byte, error) {
	if depth > maxDepth {
		return nil, nil, fmt.Errorf("values nested deeper than %d", maxDepth)
	}
	if len(b) == 0 {
		return nil, nil, errShort
	}
	c := b[0]
	size := func(h, n int) ([]byte, []byte, error) { // header h bytes, then n bytes
		if err := need(b, h+n); err != nil {
			return nil, nil, err
		}
		return b[:h+n], b[h+n:], nil
	}
	be := func(w int) (int, error) {
		if err := need(b, 1+w); err != nil {
			return 0, err
		}
		var n uint64
		switch w {
		case 1:
			n = uint64(b[1])
		case 2:
			n = uint64(binary.BigEndian.Uint16(b[1:]))
		case 4:
			n = uint64(binary.BigEndian.Uint32(b[1:]))
		}
		if n > math.MaxInt32 {
			return 0, errShort
		}
		return int(n), nil
	}
	elems := func(h, n int) ([]byte, []byte, error) { // n values after an h-byte header
		if n > len(b) { // every element is at least one byte
			return nil, nil, errShort
		}
		rest := b[h:]
		for i := 0; i < n; i++ {
			var err error
			if _, rest, err = skip(rest, depth+1); err != nil {
				return nil, nil, err
			}
		}
		return b[:len(b)-len(rest)], rest, nil
	}
	switch {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		return b[:1], b[1:], nil
	case c&0xe0 == 0xa0:
		return size(1, int(c&0x1f))
	case c&0xf0 == 0x90:
		return elems(1, int(c&0x0f))
	case c&0xf0 == 0x80:
		return elems(1, 2*int(c&0x0f))
	}
	switch c {
	case 0xcc, 0xd0:
		return size(1, 1)
	case 0xcd, 0xd1:
		return size(1, 2)
	case 0xca, 0xce, 0xd2:
		return size(1, 4)
	case 0xcb, 0xcf, 0xd3:
		return size(1, 8)
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1, 2, 4, 8, 16
		return size(2, 1<<(c-0xd4))
	case 0xc4, 0xd9, 0xc7: // bin8, str8, ext8
		n, err := be(1)
		if err != nil {
			return nil, nil, err
		}
		if c == 0xc7 {
			return size(3, n)
		}
		return size(2, n)
	case 0xc5, 0xda, 0xc8:
		n, err := be(2)
		if err != nil {
			return nil, nil, err
		}
		if c == 0xc8 {
			return size(4, n)
		}
		return size(3, n)
	case 0xc6, 0xdb, 0xc9:
		n, err := be(4)
		if err != nil {
			return nil, nil, err
		}
		if c == 0xc9 {
			return size(6, n)
		}
		return size(5, n)
	case 0xdc:
		n, err := be(2)
		if err != nil {
			return nil, nil, err
		}
		return elems(3, n)
	case 0xdd:
		n, err := be(4)
		if err != nil {
			return nil, nil, err
		}
		return elems(5, n)
	case 0xde:
		n, err := be(2)
		if err != nil {
			return nil, nil, err
		}
		return elems(3, 2*n)
	case 0xdf:
		n, err := be(4)
		if err != nil {
			return nil, nil, err
		}
		return elems(5, 2*n)
	}
	return nil, nil, fmt.Errorf("invalid MsgPack code %#x", c)
}

// CheckMsgpack reports whether b is exactly one well-formed MsgPack value:
// every length within b, nesting at most 64 deep. Run it on untrusted input
// before a general decoder, which may trust a length prefix and allocate
// what it claims before finding the data missing.
func CheckMsgpack(b []byte) error {
	_, rest, err := skip(b, 0)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("%d bytes after the value", len(rest))
	}
	return nil
}

func appendStr(dst []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		dst = append(dst, 0xa0|byte(n))
	case n <= math.MaxUint8:
		dst = append(dst, 0xd9, byte(n))
	case n <= math.MaxUint16:
		dst = append(dst, 0xda, byte(n>>8), byte(n))
	default:
		dst = binary.BigEndian.AppendUint32(append(dst, 0xdb), uint32(n))
	}
	return append(dst, s...)
}

func appendUint(dst []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(dst, byte(v))
	case v <= math.MaxUint8:
		return append(dst, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xcf), v)
}

// appendTime writes the MsgPack timestamp extension in its smallest form,
// as msgpack libraries do (the zero time, year 1, takes the 96-bit form).
func appendTime(dst []byte, t time.Time) []byte {
	sec, nsec := t.Unix(), uint64(t.Nanosecond())
	if uint64(sec)>>34 == 0 {
		v := nsec<<34 | uint64(sec)
		if v>>32 == 0 {
			return binary.BigEndian.AppendUint32(append(dst, 0xd6, 0xff), uint32(v))
		}
		return binary.BigEndian.AppendUint64(append(dst, 0xd7, 0xff), v)
	}
	dst = binary.BigEndian.AppendUint32(append(dst, 0xc7, 12, 0xff), uint32(nsec))
	return binary.BigEndian.AppendUint64(dst, uint64(sec))
}

// appendBinHeader appends the head of a bin of n bytes.
func appendBinHeader(dst []byte, n int) []byte {
	switch {
	case n <= math.MaxUint8:
		return append(dst, 0xc4, byte(n))
	case n <= math.MaxUint16:
		return append(dst, 0xc5, byte(n>>8), byte(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xc6), uint32(n))
}

// readBin reads a bin (or a str, as its bytes; or nil). The bytes alias b.
func readBin(b []byte) ([]byte, []byte, error) {
	if len(b) == 0 {
		return nil, nil, errShort
	}
	var n, h int
	switch c := b[0]; {
	case c == 0xc4 || c == 0xd9:
		if err := need(b, 2); err != nil {
			return nil, nil, err
		}
		n, h = int(b[1]), 2
	case c == 0xc5 || c == 0xda:
		if err := need(b, 3); err != nil {
			return nil, nil, err
		}
		n, h = int(binary.BigEndian.Uint16(b[1:])), 3
	case c == 0xc6 || c == 0xdb:
		if err := need(b, 5); err != nil {
			return nil, nil, err
		}
		n, h = int(binary.BigEndian.Uint32(b[1:])), 5
	case c&0xe0 == 0xa0:
		n, h = int(c&0x1f), 1
	case c == 0xc0:
		return nil, b[1:], nil
	default:
		return nil, nil, fmt.Errorf("want bytes, got MsgPack code %#x", c)
	}
	if err := need(b, h+n); err != nil {
		return nil, nil, err
	}
	return b[h : h+n : h+n], b[h+n:], nil
}

func readBool(b []byte) (bool, []byte, error) {
	if len(b) == 0 {
		return false, nil, errShort
	}
	switch b[0] {
	case 0xc2, 0xc0:
		return false, b[1:], nil
	case 0xc3:
		return true, b[1:], nil
	}
	return false, nil, fmt.Errorf("want a boolean, got MsgPack code %#x", b[0])
}

// appendInt writes v in its smallest form, as msgpack's compact ints do.
func appendInt(dst []byte, v int64) []byte {
	switch {
	case v >= 0:
		return appendUint(dst, uint64(v))
	case v >= -32:
		return append(dst, byte(v))
	case v >= math.MinInt8:
		return append(dst, 0xd0, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(dst, 0xd1), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(dst, 0xd2), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xd3), uint64(v))
}

// appendArrayLen appends the head of an array of n values.
func appendArrayLen(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x90|byte(n))
	case n <= math.MaxUint16:
		return append(dst, 0xdc, byte(n>>8), byte(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdd), uint32(n))
}

// readArrayLen reads the head of an array (nil as -1). The length is checked
// against the input: every value takes at least one byte, so a caller may
// allocate n elements without trusting a forged length.
func readArrayLen(b []byte) (int, []byte, error) {
	if len(b) == 0 {
		return 0, nil, errShort
	}
	var n int
	switch c := b[0]; {
	case c&0xf0 == 0x90:
		n, b = int(c&0x0f), b[1:]
	case c == 0xdc:
		if err := need(b, 3); err != nil {
			return 0, nil, err
		}
		n, b = int(binary.BigEndian.Uint16(b[1:])), b[3:]
	case c == 0xdd:
		if err := need(b, 5); err != nil {
			return 0, nil, err
		}
		n, b = int(binary.BigEndian.Uint32(b[1:])), b[5:]
	case c == 0xc0:
		return -1, b[1:], nil
	default:
		return 0, nil, fmt.Errorf("want an array, got MsgPack code %#x", c)
	}
	if n > len(b) {
		return 0, nil, errShort
	}
	return n, b, nil
}

// readInt reads a signed or unsigned integer that fits an int64 (or nil, as
// 0).
func readInt(b []byte) (int64, []byte, error) {
	if len(b) == 0 {
		return 0, nil, errShort
	}
	c := b[0]
	switch {
	case c >= 0xe0:
		return int64(int8(c)), b[1:], nil
	case c == 0xd0:
		if err := need(b, 2); err != nil {
			return 0, nil, err
		}
		return int64(int8(b[1])), b[2:], nil
	case c == 0xd1:
		if err := need(b, 3); err != nil {
			return 0, nil, err
		}
		return int64(int16(binary.BigEndian.Uint16(b[1:]))), b[3:], nil
	case c == 0xd2:
		if err := need(b, 5); err != nil {
			return 0, nil, err
		}
		return int64(int32(binary.BigEndian.Uint32(b[1:]))), b[5:], nil
	case c == 0xd3:
		if err := need(b, 9); err != nil {
			return 0, nil, err
		}
		return int64(binary.BigEndian.Uint64(b[1:])), b[9:], nil
	}
	v, rest, err := readUint(b)
	if err != nil {
		return 0, nil, err
	}
	if v > math.MaxInt64 {
		return 0, nil, fmt.Errorf("integer %d overflows int64", v)
	}
	return int64(v), rest, nil
}
