package secrets

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
)

// forms are the byte strings a value is masked as: the value itself; its
// hex, lower and upper case; its base64, standard and URL alphabets, each
// padded and not; the part of its base64 that does not depend on its
// neighbours when it is encoded inside a longer string (a password in the
// base64 of "user:password", an HTTP Basic header), at each of the three
// offsets a byte string can start at; and its JSON string escaping, when
// that differs (a value with a quote or a backslash, written in a JSON
// log line). Each form is distinct and at least MinLen bytes.
func forms(value []byte) [][]byte {
	var out [][]byte
	add := func(f []byte) {
		if len(f) >= MinLen && !containsBytes(out, f) {
			out = append(out, f)
		}
	}
	add(bytes.Clone(value))
	h := []byte(hex.EncodeToString(value))
	add(h)
	add(bytes.ToUpper(h))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		add([]byte(enc.EncodeToString(value)))
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for offset := range 3 {
			add(base64Core(enc, value, offset))
		}
	}
	for _, html := range []bool{true, false} {
		add(jsonEscaped(value, html))
	}
	return out
}

func containsBytes(list [][]byte, b []byte) bool {
	for _, x := range list {
		if bytes.Equal(x, b) {
			return true
		}
	}
	return false
}

// base64Core is the base64 of value, when value starts offset bytes into
// a group of three, without the characters that hold bits of its
// neighbours: a character holds bits 6c to 6c+6 of the encoded string.
func base64Core(enc *base64.Encoding, value []byte, offset int) []byte {
	src := make([]byte, offset+len(value))
	copy(src[offset:], value)
	s := enc.EncodeToString(src)
	first := (8*offset + 5) / 6           // the first character after the neighbour's bits
	last := 8 * (offset + len(value)) / 6 // past the last character with no bit of the next
	if first >= last {
		return nil
	}
	return []byte(s[first:last])
}

// jsonEscaped is value as a JSON string holds it, without the quotes; with
// html, <, > and & are escaped too, as Go's encoding/json does by default.
func jsonEscaped(value []byte, html bool) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(html)
	if e.Encode(string(value)) != nil {
		return nil
	}
	s := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	return bytes.Clone(s[1 : len(s)-1])
}
