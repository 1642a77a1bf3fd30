package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

// jsonToMsgpack converts the JSON given on the command line to the MsgPack
// an event carries. Integers become int64 (uint64 above its range), other
// numbers float64; objects keep their key order. An error says where in the
// text the JSON went wrong.
func jsonToMsgpack(text string) (msgpack.RawMessage, error) {
	// The syntax check first, on the whole text: its errors have one
	// consistent offset, which the token reader's do not.
	var check json.RawMessage
	if err := json.Unmarshal([]byte(text), &check); err != nil {
		return nil, jsonError(text, err)
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	v, err := readJSON(dec, 0)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON data: %w", err)
	}
	var b bytes.Buffer
	enc := msgpack.NewEncoder(&b)
	enc.UseCompactInts(true)
	if err := writeMsgpack(enc, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// object is a JSON object with its key order.
type object struct {
	keys []string
	vals []any
}

// readJSON reads one value from the token stream.
func readJSON(dec *json.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested more than %d deep", maxDepth)
	}
	tok, err := dec.Token()
	if err == io.EOF {
		return nil, io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{}
			seen := map[string]int{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, eofIsUnexpected(err)
				}
				k := kt.(string) // the decoder only yields strings as keys
				v, err := readJSON(dec, depth+1)
				if err != nil {
					return nil, err
				}
				if i, dup := seen[k]; dup { // the last value wins, as in encoding/json
					o.vals[i] = v
					continue
				}
				seen[k] = len(o.keys)
				o.keys, o.vals = append(o.keys, k), append(o.vals, v)
			}
			_, err := dec.Token() // '}'
			return o, eofIsUnexpected(err)
		case '[':
			a := []any{}
			for dec.More() {
				v, err := readJSON(dec, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token() // ']'
			return a, eofIsUnexpected(err)
		}
		return nil, fmt.Errorf("unexpected %q", rune(t))
	case json.Number:
		return number(t)
	}
	return tok, nil // string, bool or nil
}

func eofIsUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func number(n json.Number) (any, error) {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return u, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("number %s is out of range", s)
	}
	return f, nil
}

func writeMsgpack(enc *msgpack.Encoder, v any) error {
	switch v := v.(type) {
	case *object:
		if err := enc.EncodeMapLen(len(v.keys)); err != nil {
			return err
		}
		for i, k := range v.keys {
			if err := enc.EncodeString(k); err != nil {
				return err
			}
			if err := writeMsgpack(enc, v.vals[i]); err != nil {
				return err
			}
		}
		return nil
	case []any:
		if err := enc.EncodeArrayLen(len(v)); err != nil {
			return err
		}
		for _, e := range v {
			if err := writeMsgpack(enc, e); err != nil {
				return err
			}
		}
		return nil
	}
	return enc.Encode(v)
}

// jsonError names the line and column where the JSON went wrong.
func jsonError(text string, err error) error {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return fmt.Errorf("invalid JSON data: %w", err)
	}
	msg, offset := se.Error(), se.Offset-1 // Offset counts the offending byte
	if se.Offset >= int64(len(text)) && strings.HasPrefix(msg, "unexpected end") {
		msg, offset = "the JSON ends before the value is complete", int64(len(text))
	}
	line, col := 1, 1
	for _, r := range text[:min(int(offset), len(text))] {
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Errorf("invalid JSON data at line %d, column %d: %s", line, col, msg)
}
