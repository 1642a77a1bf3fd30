// Package jsonview holds the JSON forms that Kairo shows to people and
// scripts: an event (every envelope field, its MsgPack data as JSON), a
// plugin, a tool and the daemon's status. `kairo ... --json` prints them and
// the console serves them, so a script reads one shape from both.
package jsonview

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/kairo-os/kairo/abi"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Event is the --json form of an event: every envelope field, the data
// as JSON. The keys are the wire names of abi.Event.
type Event struct {
	Seq           uint64          `json:"seq"`
	ID            string          `json:"id"`
	Type          string          `json:"type"`
	Source        string          `json:"source"`
	Time          time.Time       `json:"time"`
	Data          json.RawMessage `json:"data"`
	CorrelationID string          `json:"correlationId"`
	CausationID   string          `json:"causationId"`
	Host          string          `json:"host,omitempty"` // when kairos share one store
}

// EventObject renders an event as one JSON object (no newline).
func EventObject(ev *abi.Event) []byte {
	o := Event{
		Seq: ev.Seq, ID: ev.ID, Type: ev.Type, Source: ev.Source, Time: ev.Time,
		Data: json.RawMessage("null"), CorrelationID: ev.CorrelationID, CausationID: ev.CausationID, Host: ev.Host,
	}
	if len(ev.Data) > 0 {
		o.Data = Data(ev.Data)
	}
	return Marshal(o)
}

// Data converts event data to JSON; data that is not valid MsgPack is
// shown as {"undecodable": base64, "error": why} rather than dropped.
func Data(raw []byte) json.RawMessage {
	j, err := FromMsgpack(raw)
	if err != nil {
		return Marshal(struct {
			Undecodable []byte `json:"undecodable"` // base64
			Error       string `json:"error"`
		}{raw, err.Error()})
	}
	return j
}

// Marshal is json.Marshal without HTML escaping: the output is for a
// terminal or jq, not a web page. Nothing in it is raw that a terminal
// acts on (see Safe).
func Marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only unsupported values fail, and every caller passes plain data.
		panic(fmt.Sprintf("marshal %T: %v", v, err))
	}
	return Safe(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// MaxDepth bounds nesting, so hostile data cannot exhaust the stack.
const MaxDepth = 1000

// FromMsgpack converts one MsgPack value to JSON, keeping the order of map
// keys. Maps with keys that are not strings get the keys' text; binary
// becomes base64; timestamps RFC 3339; NaN and infinities their names as
// strings; other extensions {"ext": type, "data": base64}.
func FromMsgpack(raw []byte) (json.RawMessage, error) {
	var b bytes.Buffer
	d := msgpack.NewDecoder(bytes.NewReader(raw))
	if err := writeJSONValue(&b, d, 0); err != nil {
		return nil, err
	}
	if _, err := d.PeekCode(); err == nil {
		return nil, errors.New("extra bytes after the MsgPack value")
	}
	return b.Bytes(), nil
}

func writeJSONValue(b *bytes.Buffer, d *msgpack.Decoder, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("nested more than %d deep", MaxDepth)
	}
	c, err := d.PeekCode()
	if err != nil {
		return err
	}
	switch {
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := d.DecodeMapLen()
		if err != nil {
			return err
		}
		b.WriteByte('{')
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			key, err := mapKey(d, depth+1)
			if err != nil {
				return err
			}
			b.Write(Marshal(key))
			b.WriteByte(':')
			if err := writeJSONValue(b, d, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := d.DecodeArrayLen()
		if err != nil {
			return err
		}
		b.WriteByte('[')
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSONValue(b, d, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case msgpcode.IsExt(c):
		raw, err := d.DecodeRaw()
		if err != nil {
			return err
		}
		return writeExt(b, raw)
	default:
		v, err := d.DecodeInterface()
		if err != nil {
			return err
		}
		writeScalar(b, v)
	}
	return nil
}

// mapKey reads a map key as text.
func mapKey(d *msgpack.Decoder, depth int) (string, error) {
	c, err := d.PeekCode()
	if err != nil {
		return "", err
	}
	if msgpcode.IsString(c) {
		return d.DecodeString()
	}
	var kb bytes.Buffer
	if err := writeJSONValue(&kb, d, depth); err != nil {
		return "", fmt.Errorf("map key: %w", err)
	}
	var s string
	if json.Unmarshal(kb.Bytes(), &s) == nil {
		return s, nil // a binary key, now base64
	}
	return kb.String(), nil
}

func writeScalar(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case int8:
		b.WriteString(strconv.FormatInt(int64(v), 10))
	case int16:
		b.WriteString(strconv.FormatInt(int64(v), 10))
	case int32:
		b.WriteString(strconv.FormatInt(int64(v), 10))
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case uint8:
		b.WriteString(strconv.FormatUint(uint64(v), 10))
	case uint16:
		b.WriteString(strconv.FormatUint(uint64(v), 10))
	case uint32:
		b.WriteString(strconv.FormatUint(uint64(v), 10))
	case uint64:
		b.WriteString(strconv.FormatUint(v, 10))
	case float32:
		writeFloat(b, float64(v), v)
	case float64:
		writeFloat(b, v, v)
	case string, []byte: // []byte becomes base64, as encoding/json does
		b.Write(Marshal(v))
	default:
		b.Write(Marshal(fmt.Sprint(v)))
	}
}

func writeFloat(b *bytes.Buffer, f float64, v any) {
	switch {
	case math.IsNaN(f):
		b.WriteString(`"NaN"`)
	case math.IsInf(f, 1):
		b.WriteString(`"+Inf"`)
	case math.IsInf(f, -1):
		b.WriteString(`"-Inf"`)
	default:
		b.Write(Marshal(v)) // float32 keeps its shortest 32-bit form
	}
}

// writeExt writes an extension value: a timestamp (type -1) as RFC 3339,
// anything else as its type and base64 bytes.
func writeExt(b *bytes.Buffer, raw []byte) error {
	var typ int8
	var body []byte
	switch c := raw[0]; {
	case msgpcode.IsFixedExt(c):
		typ, body = int8(raw[1]), raw[2:]
	case c == msgpcode.Ext8:
		typ, body = int8(raw[2]), raw[3:]
	case c == msgpcode.Ext16:
		typ, body = int8(raw[3]), raw[4:]
	default: // Ext32
		typ, body = int8(raw[5]), raw[6:]
	}
	if typ == -1 {
		var t time.Time
		if err := msgpack.Unmarshal(raw, &t); err != nil {
			return err
		}
		b.Write(Marshal(t))
		return nil
	}
	b.Write(Marshal(struct {
		Ext  int8   `json:"ext"`
		Data []byte `json:"data"`
	}{typ, body}))
	return nil
}

// UnsafeRune reports whether r, past ASCII, is one a terminal acts on or
// that changes how the text around it reads: a C1 control, a bidi control,
// a line or paragraph separator.
func UnsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f: // C1: CSI (U+009B) and OSC (U+009D) among them
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069: // bidi embeddings, overrides, isolates
		return true
	case r == 0x200e || r == 0x200f || r == 0x061c: // bidi marks
		return true
	case r == 0x2028 || r == 0x2029:
		return true
	}
	return false
}

// Safe escapes, in JSON that encoding/json wrote, what it leaves raw
// but a terminal acts on: DEL, C1 controls and bidi controls become \u
// escapes (encoding/json already escapes C0, U+2028 and U+2029, and
// replaces invalid UTF-8). They can only stand inside strings, where a \u
// escape means the same character, so the JSON means what it meant.
func Safe(j []byte) []byte {
	i := 0
	for i < len(j) && j[i] < 0x7f {
		i++
	}
	if i == len(j) {
		return j
	}
	var b bytes.Buffer
	b.Grow(len(j) + 16)
	b.Write(j[:i])
	for i < len(j) {
		r, n := utf8.DecodeRune(j[i:])
		if r == 0x7f || UnsafeRune(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.Write(j[i : i+n])
		}
		i += n
	}
	return b.Bytes()
}
