package abi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unsafe"
)

// DecodeEvent decodes one MsgPack-encoded event from the front of b and
// returns what follows it. It is the envelope's only decoder (DecodeMsgpack
// calls it) and the replay hot path: strings and Data alias b instead of
// being copied one by one, so b must not be modified afterwards. Hand the
// function a buffer of its own, as the store and the IPC reader do.
func DecodeEvent(b []byte, ev *Event) ([]byte, error) {
	*ev = Event{}
	n, b, err := readMapLen(b)
	if err != nil {
		return nil, fmt.Errorf("event: %w", err)
	}
	for i := 0; i < n; i++ {
		var key string
		if key, b, err = readStr(b); err != nil {
			return nil, fmt.Errorf("event: map key %d: %w", i, err)
		}
		switch key {
		case "id":
			ev.ID, b, err = readStr(b)
		case "type":
			ev.Type, b, err = readStr(b)
		case "source":
			ev.Source, b, err = readStr(b)
		case "time":
			ev.Time, b, err = readTime(b)
			if ev.Time.IsZero() {
				ev.Time = time.Time{} // as msgpack decodes it: UTC, not time.Unix's Local
			}
		case "data":
			var raw []byte
			raw, b, err = skip(b, 0)
			if err == nil && !(len(raw) == 1 && raw[0] == 0xc0) { // nil means no data
				ev.Data = raw[:len(raw):len(raw)]
			}
		case "correlationId":
			ev.CorrelationID, b, err = readStr(b)
		case "causationId":
			ev.CausationID, b, err = readStr(b)
		case "seq":
			ev.Seq, b, err = readUint(b)
		default:
			_, b, err = skip(b, 0)
		}
		if err != nil {
			return nil, fmt.Errorf("event: field %q: %w", key, err)
		}
	}
	return b, nil
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

// DecodeEventPacket decodes an EVENT packet's payload. Like DecodeEvent, the
// event aliases b.
func DecodeEventPacket(b []byte, p *EventPacket) error {
	*p = EventPacket{}
	n, b, err := readMapLen(b)
	if err != nil {
		return fmt.Errorf("event packet: %w", err)
	}
	for i := 0; i < n; i++ {
		var key string
		if key, b, err = readStr(b); err != nil {
			return fmt.Errorf("event packet: map key %d: %w", i, err)
		}
		switch key {
		case "sub":
			p.Subscription, b, err = readUint(b)
		case "event":
			b, err = DecodeEvent(b, &p.Event)
		default:
			_, b, err = skip(b, 0)
		}
		if err != nil {
			return fmt.Errorf("event packet: field %q: %w", key, err)
		}
	}
	return nil
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

// DecodeRequest decodes a REQUEST payload; Params aliases b. Every length is
// checked against b, so it is safe on untrusted input.
func DecodeRequest(b []byte, r *Request) error {
	*r = Request{}
	n, b, err := readMapLen(b)
	if err != nil {
		return fmt.Errorf("request: %w", err)
	}
	for i := 0; i < n; i++ {
		var key string
		if key, b, err = readStr(b); err != nil {
			return fmt.Errorf("request: map key %d: %w", i, err)
		}
		switch key {
		case "id":
			r.ID, b, err = readUint(b)
		case "method":
			r.Method, b, err = readStr(b)
		case "params":
			var raw []byte
			raw, b, err = skip(b, 0)
			if err == nil && !(len(raw) == 1 && raw[0] == 0xc0) {
				r.Params = raw[:len(raw):len(raw)]
			}
		default:
			_, b, err = skip(b, 0)
		}
		if err != nil {
			return fmt.Errorf("request: field %q: %w", key, err)
		}
	}
	if len(b) > 0 {
		return fmt.Errorf("request: %d bytes after the map", len(b))
	}
	return nil
}

// DecodeResponse decodes a RESPONSE payload; Result aliases b.
func DecodeResponse(b []byte, r *Response) error {
	*r = Response{}
	n, b, err := readMapLen(b)
	if err != nil {
		return fmt.Errorf("response: %w", err)
	}
	for i := 0; i < n; i++ {
		var key string
		if key, b, err = readStr(b); err != nil {
			return fmt.Errorf("response: map key %d: %w", i, err)
		}
		switch key {
		case "id":
			r.ID, b, err = readUint(b)
		case "result":
			var raw []byte
			raw, b, err = skip(b, 0)
			if err == nil && !(len(raw) == 1 && raw[0] == 0xc0) {
				r.Result = raw[:len(raw):len(raw)]
			}
		case "error":
			if len(b) > 0 && b[0] == 0xc0 {
				b = b[1:]
				break
			}
			r.Error = new(Error)
			b, err = decodeError(b, r.Error)
		default:
			_, b, err = skip(b, 0)
		}
		if err != nil {
			return fmt.Errorf("response: field %q: %w", key, err)
		}
	}
	return nil
}

func decodeError(b []byte, e *Error) ([]byte, error) {
	n, b, err := readMapLen(b)
	if err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		var key string
		if key, b, err = readStr(b); err != nil {
			return nil, err
		}
		switch key {
		case "code":
			e.Code, b, err = readStr(b)
		case "message":
			e.Message, b, err = readStr(b)
		default:
			_, b, err = skip(b, 0)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	return b, nil
}
