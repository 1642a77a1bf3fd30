package abi

import (
	"encoding/binary"
	"math"
)

// AppendEvent appends ev's MsgPack encoding to dst: a map with the keys of
// the Event tags, empty optional fields left out. It is the envelope's only
// encoder (EncodeMsgpack calls it) and what the store and the socket write.
func AppendEvent(dst []byte, ev *Event) []byte {
	n := 3
	for _, s := range [...]string{ev.Source, ev.CorrelationID, ev.CausationID} {
		if s != "" {
			n++
		}
	}
	if len(ev.Data) > 0 {
		n++
	}
	if ev.Seq != 0 {
		n++
	}
	dst = append(dst, 0x80|byte(n)) // n <= 8: a fixmap
	dst = appendStr(appendStr(dst, "id"), ev.ID)
	dst = appendStr(appendStr(dst, "type"), ev.Type)
	if ev.Source != "" {
		dst = appendStr(appendStr(dst, "source"), ev.Source)
	}
	dst = appendTime(appendStr(dst, "time"), ev)
	if len(ev.Data) > 0 {
		dst = append(appendStr(dst, "data"), ev.Data...)
	}
	if ev.CorrelationID != "" {
		dst = appendStr(appendStr(dst, "correlationId"), ev.CorrelationID)
	}
	if ev.CausationID != "" {
		dst = appendStr(appendStr(dst, "causationId"), ev.CausationID)
	}
	if ev.Seq != 0 {
		dst = appendUint(appendStr(dst, "seq"), ev.Seq)
	}
	return dst
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
func appendTime(dst []byte, ev *Event) []byte {
	sec, nsec := ev.Time.Unix(), uint64(ev.Time.Nanosecond())
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

// AppendResponse appends r's MsgPack encoding to dst, with the keys of the
// Response tags.
func AppendResponse(dst []byte, r *Response) []byte {
	n := 1
	if len(r.Result) > 0 {
		n++
	}
	if r.Error != nil {
		n++
	}
	dst = appendUint(appendStr(append(dst, 0x80|byte(n)), "id"), r.ID)
	if len(r.Result) > 0 {
		dst = append(appendStr(dst, "result"), r.Result...)
	}
	if r.Error != nil {
		dst = append(appendStr(dst, "error"), 0x82)
		dst = appendStr(appendStr(dst, "code"), r.Error.Code)
		dst = appendStr(appendStr(dst, "message"), r.Error.Message)
	}
	return dst
}

// AppendRequest appends r's MsgPack encoding to dst, with the keys of the
// Request tags.
func AppendRequest(dst []byte, r *Request) []byte {
	n := 2
	if len(r.Params) > 0 {
		n++
	}
	dst = appendUint(appendStr(append(dst, 0x80|byte(n)), "id"), r.ID)
	dst = appendStr(appendStr(dst, "method"), r.Method)
	if len(r.Params) > 0 {
		dst = append(appendStr(dst, "params"), r.Params...)
	}
	return dst
}
