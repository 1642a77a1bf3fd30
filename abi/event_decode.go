package abi

import (
	"encoding/binary"
	"time"
	"unsafe"
)

// DecodeEvent decodes one MsgPack-encoded event from the front of b and
// returns what follows it. It is the envelope's only decoder (DecodeMsgpack
// calls it) and the replay hot path: strings and Data alias b instead of
// being copied one by one, so b must not be modified afterwards. Hand the
// function a buffer of its own, as the store and the IPC reader do.
//
// An envelope as AppendEvent writes it (a fixmap whose keys are fixstrs)
// is read in one pass into a value on the stack and stored once: a walk
// with a callback per key, and the event cleared and then written field by
// field, each pointer behind a write barrier while the GC marks, was 42 %
// of a replay's CPU. Anything else (another map form, an unknown key, an
// error) is read by the general walk, whose errors name the field.
func DecodeEvent(b []byte, ev *Event) ([]byte, error) {
	e, rest, ok := decodeEventFlat(b)
	if !ok {
		return decodeEventMap(b, ev)
	}
	*ev = e
	return rest, nil
}

// decodeEventMap is DecodeEvent's general walk: any map form, keys in any
// order, unknown keys skipped, the last of a repeated key kept.
func decodeEventMap(b []byte, ev *Event) ([]byte, error) {
	*ev = Event{}
	return readMap(b, "event", func(key string, b []byte) (rest []byte, err error) {
		switch key {
		case "id":
			ev.ID, rest, err = readStr(b)
		case "type":
			ev.Type, rest, err = readStr(b)
		case "source":
			ev.Source, rest, err = readStr(b)
		case "time":
			ev.Time, rest, err = readTime(b)
			if ev.Time.IsZero() {
				ev.Time = time.Time{} // as msgpack decodes it: UTC, not time.Unix's Local
			}
		case "data":
			ev.Data, rest, err = readRaw(b)
		case "correlationId":
			ev.CorrelationID, rest, err = readStr(b)
		case "causationId":
			ev.CausationID, rest, err = readStr(b)
		case "seq":
			ev.Seq, rest, err = readUint(b)
		case "host":
			ev.Host, rest, err = readStr(b)
		default:
			_, rest, err = skip(b, 0)
		}
		return rest, err
	})
}

// decodeEventFlat reads an event whose map is a fixmap with fixstr keys,
// all of them the Event's, each value read as decodeEventMap reads it (the
// common forms in line). ok is false for any other input, valid or not:
// the general walk then reads it, and says what is wrong.
func decodeEventFlat(b []byte) (ev Event, rest []byte, ok bool) {
	if len(b) == 0 || b[0]&0xf0 != 0x80 {
		return Event{}, nil, false
	}
	n := int(b[0] & 0x0f)
	b = b[1:]
	for ; n > 0; n-- {
		if len(b) == 0 || b[0]&0xe0 != 0xa0 {
			return Event{}, nil, false
		}
		k := 1 + int(b[0]&0x1f)
		if len(b) < k {
			return Event{}, nil, false
		}
		key := b[1:k]
		b = b[k:]
		var err error
		switch string(key) {
		case "id":
			ev.ID, b, err = flatStr(b)
		case "type":
			ev.Type, b, err = flatStr(b)
		case "source":
			ev.Source, b, err = flatStr(b)
		case "time":
			ev.Time, b, err = flatTime(b)
		case "data":
			ev.Data, b, err = flatRaw(b)
		case "correlationId":
			ev.CorrelationID, b, err = flatStr(b)
		case "causationId":
			ev.CausationID, b, err = flatStr(b)
		case "seq":
			ev.Seq, b, err = readUint(b)
		case "host":
			ev.Host, b, err = flatStr(b)
		default:
			return Event{}, nil, false
		}
		if err != nil {
			return Event{}, nil, false
		}
	}
	return ev, b, true
}

// flatStr is readStr with its fixstr and str8 forms, every id and subject,
// in line.
func flatStr(b []byte) (string, []byte, error) {
	if len(b) >= 2 {
		n, h := int(b[0]&0x1f), 1
		if b[0] == 0xd9 {
			n, h = int(b[1]), 2
		} else if b[0]&0xe0 != 0xa0 {
			return readStr(b)
		}
		if n > 0 && len(b) >= h+n {
			return unsafe.String(&b[h], n), b[h+n:], nil
		}
	}
	return readStr(b)
}

// flatTime is readTime, the zero time as msgpack decodes it, with the 64-bit
// form AppendEvent writes for times since 1970 in line.
func flatTime(b []byte) (time.Time, []byte, error) {
	if len(b) >= 10 && b[0] == 0xd7 && b[1] == 0xff {
		v := binary.BigEndian.Uint64(b[2:])
		if nsec, sec := int64(v>>34), int64(v&(1<<34-1)); nsec <= 999999999 {
			return time.Unix(sec, nsec), b[10:], nil
		}
	}
	t, rest, err := readTime(b)
	if t.IsZero() {
		t = time.Time{} // as msgpack decodes it: UTC, not time.Unix's Local
	}
	return t, rest, err
}

// flatRaw is readRaw with the bin forms of a payload in line.
func flatRaw(b []byte) ([]byte, []byte, error) {
	var n, h int
	switch {
	case len(b) >= 2 && b[0] == 0xc4:
		n, h = int(b[1]), 2
	case len(b) >= 3 && b[0] == 0xc5:
		n, h = int(binary.BigEndian.Uint16(b[1:])), 3
	default:
		return readRaw(b)
	}
	if len(b) < h+n {
		return readRaw(b)
	}
	return b[: h+n : h+n], b[h+n:], nil
}
