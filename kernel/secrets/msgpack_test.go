package secrets

import (
	"bytes"
	"encoding/base64"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

const msgpackValue = "tok-deploy-123"

func marshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Strings and binaries are masked at any depth, map keys included; every
// other value keeps its exact encoding.
func TestMaskMsgpackNested(t *testing.T) {
	m := newMasker(t, "deploy", msgpackValue)
	when := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	in := map[string]any{
		"argv": []any{"/usr/bin/deploy", "--token=" + msgpackValue, int64(-7), 3.5, true, nil},
		"env":  map[string]any{"TOKEN": msgpackValue, msgpackValue: "as a key"},
		"deep": []any{[]any{[]any{map[string]any{"b64": base64.StdEncoding.EncodeToString([]byte(msgpackValue))}}}},
		"bin":  []byte("bytes " + msgpackValue + " bytes"),
		"long": strings.Repeat("x", 300) + msgpackValue, // a str16 that becomes shorter
		"time": when,
		"big":  uint64(1) << 60,
	}
	out := m.MaskMsgpack(marshal(t, in))
	var got map[string]any
	if err := msgpack.Unmarshal(out, &got); err != nil {
		t.Fatalf("the masked MsgPack does not decode: %v", err)
	}
	want := map[string]any{
		"argv": []any{"/usr/bin/deploy", "--token=***deploy***", int64(-7), 3.5, true, nil},
		"env":  map[string]any{"TOKEN": "***deploy***", "***deploy***": "as a key"},
		"deep": []any{[]any{[]any{map[string]any{"b64": "***deploy***"}}}},
		"bin":  []byte("bytes ***deploy*** bytes"),
		"long": strings.Repeat("x", 300) + "***deploy***",
		"time": when,
		"big":  uint64(1) << 60,
	}
	var wantDecoded map[string]any
	msgpack.Unmarshal(marshal(t, want), &wantDecoded)
	for k := range wantDecoded {
		if !reflect.DeepEqual(got[k], wantDecoded[k]) {
			t.Errorf("%s masked: %#v; want %#v", k, got[k], wantDecoded[k])
		}
	}
	if bytes.Contains(out, []byte(msgpackValue)) {
		t.Error("the value is still in the bytes")
	}
}

// What holds no value is returned as it is, not copied.
func TestMaskMsgpackNoMatch(t *testing.T) {
	m := newMasker(t, "deploy", msgpackValue)
	raw := marshal(t, map[string]any{"type": "kairo.process.exited", "code": 0})
	if out := m.MaskMsgpack(raw); &out[0] != &raw[0] {
		t.Error("MaskMsgpack copied data that holds no value")
	}
	if n := testing.AllocsPerRun(100, func() { m.MaskMsgpack(raw) }); n != 0 {
		t.Errorf("MaskMsgpack of data without a value allocates %v times", n)
	}
	garbage := []byte{0xc1, 0xff, 0x00}
	if out := m.MaskMsgpack(garbage); &out[0] != &garbage[0] {
		t.Error("MaskMsgpack changed garbage that holds no value")
	}
}

// Where masking the strings cannot remove the value, or raw is not one
// value, the result is one string holding raw masked: it decodes, and the
// value is not in it.
func TestMaskMsgpackFallback(t *testing.T) {
	m := newMasker(t, "deploy", msgpackValue)
	// The value across two strings, whose header byte is part of it.
	split := newMasker(t, "split", "abc\xa3xyz")
	ext := append([]byte{0xc7, byte(len(msgpackValue)), 5}, msgpackValue...)
	for _, c := range []struct {
		name string
		m    *Masker
		raw  []byte
	}{
		{"truncated", m, bytes.TrimSuffix(marshal(t, []any{msgpackValue, "end"}), []byte("end"))},
		{"garbage", m, append([]byte{0xc1}, msgpackValue...)},
		{"trailing bytes", m, append(marshal(t, "ok"), msgpackValue...)},
		{"a huge count", m, append([]byte{0xdd, 0xff, 0xff, 0xff, 0xff}, marshal(t, msgpackValue)...)},
		{"a string longer than raw", m, append([]byte{0xdb, 0x7f, 0xff, 0xff, 0xff}, msgpackValue...)},
		{"in an extension", m, ext},
		{"across two strings", split, marshal(t, []string{"abc", "xyz"})},
	} {
		out := c.m.MaskMsgpack(c.raw)
		var s string
		if err := msgpack.Unmarshal(out, &s); err != nil {
			t.Errorf("%s: the result is not a MsgPack string: %v", c.name, err)
		}
		if strings.Contains(s, msgpackValue) || strings.Contains(s, "abc\xa3xyz") || !strings.Contains(s, "***") {
			t.Errorf("%s: %q", c.name, s)
		}
	}
}

// FuzzMaskMsgpack: whatever raw is, the result never holds the value,
// and decodes when raw did. (Whether raw decodes is asked of the walker
// first: msgpack.Unmarshal takes a count of four billion at its word.)
func FuzzMaskMsgpack(f *testing.F) {
	f.Add(marshal(f, map[string]any{"a": []any{msgpackValue, 1, "x"}}))
	f.Add(marshal(f, []byte(msgpackValue)))
	f.Add([]byte(msgpackValue))
	f.Add([]byte("\xdf\xea\x04\xb3\xe4a\xc8\x1a\xb4\x1e\xbe\xaavD93\xed\xc7*\xac`r\x15\xbe"))
	m := newMasker(f, "deploy", msgpackValue)
	f.Fuzz(func(t *testing.T, raw []byte) {
		out := m.MaskMsgpack(raw)
		if bytes.Contains(out, []byte(msgpackValue)) {
			t.Fatalf("MaskMsgpack(%q) = %q holds the value", raw, out)
		}
		if len(raw) == 0 || &out[0] == &raw[0] {
			return // untouched: it held no value
		}
		if _, err := maskMsgpack(m.index(), raw); err != nil || decodes(raw) != nil {
			var s string
			if err := msgpack.Unmarshal(out, &s); err != nil {
				t.Fatalf("MaskMsgpack(%q) = %q, not a string: %v", raw, out, err)
			}
			return
		}
		if err := decodes(out); err != nil {
			t.Fatalf("MaskMsgpack(%q) = %q does not decode: %v", raw, out, err)
		}
	})
}

// decodes reads b as one MsgPack value, whatever its types: a map's keys
// may be numbers, or maps, which a Go map of any could not hold (a plain
// Unmarshal into any wants string keys, and calls the rest invalid).
func decodes(b []byte) error {
	return msgpack.NewDecoder(bytes.NewReader(b)).Skip()
}
