package abi

import (
	"errors"
	"strings"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	types := []PacketType{PacketRequest, PacketResponse, PacketEvent, PacketStreamChunk}
	lengths := []uint32{0, 1, 255, 256, 65535, 1 << 20, DefaultMaxFrame}
	for _, typ := range types {
		for _, n := range lengths {
			b := make([]byte, HeaderSize)
			PutHeader(b, Header{Type: typ, Length: n})
			if string(b[:2]) != "KR" || b[2] != FrameVersion || b[3] != byte(typ) {
				t.Fatalf("PutHeader(%v, %d) wrote % x", typ, n, b)
			}
			h, err := ParseHeader(b, 0)
			if err != nil {
				t.Fatalf("ParseHeader(% x): %v", b, err)
			}
			if h != (Header{Type: typ, Length: n}) {
				t.Errorf("round trip of %v/%d gave %+v", typ, n, h)
			}
		}
	}
	// Bytes past the header are ignored; the length is big-endian.
	b := []byte{'K', 'R', 1, 3, 0x01, 0x02, 0x03, 0x04, 0xff, 0xff}
	h, err := ParseHeader(b, 1<<30)
	if err != nil || h != (Header{Type: PacketEvent, Length: 0x01020304}) {
		t.Errorf("ParseHeader(% x) = %+v, %v; want EVENT of 0x01020304 bytes", b, h, err)
	}
}

func TestParseHeaderErrors(t *testing.T) {
	good := func(mut func(b []byte)) []byte {
		b := make([]byte, HeaderSize)
		PutHeader(b, Header{Type: PacketRequest, Length: 10})
		mut(b)
		return b
	}
	tests := []struct {
		name string
		b    []byte
		max  uint32
		want []string
	}{
		{"short", []byte{'K', 'R', 1}, 0, []string{"header is 3 bytes, want 8"}},
		{"empty", nil, 0, []string{"header is 0 bytes"}},
		{"wrong magic", good(func(b []byte) { b[0], b[1] = 'G', 'E' }), 0, []string{"wrong magic", "0x4745", `"KR"`}},
		{"http", []byte("GET / HTTP/1.1"), 0, []string{"wrong magic", "Kairo client"}},
		{"wrong version", good(func(b []byte) { b[2] = 2 }), 0, []string{"frame version 2", "speaks 1"}},
		{"version zero", good(func(b []byte) { b[2] = 0 }), 0, []string{"frame version 0"}},
		{"packet type 0", good(func(b []byte) { b[3] = 0 }), 0, []string{"unknown packet type 0", "1..4"}},
		{"packet type 5", good(func(b []byte) { b[3] = 5 }), 0, []string{"unknown packet type 5"}},
		{"packet type 255", good(func(b []byte) { b[3] = 255 }), 0, []string{"unknown packet type 255"}},
		{"over default limit", good(func(b []byte) { PutHeader(b, Header{Type: PacketResponse, Length: DefaultMaxFrame + 1}) }), 0,
			[]string{"payload of 16777217 bytes", "16777216-byte limit", "kernel.max_frame"}},
		{"over explicit limit", good(func(b []byte) { PutHeader(b, Header{Type: PacketResponse, Length: 11}) }), 10,
			[]string{"payload of 11 bytes", "over the 10-byte limit"}},
		{"max length", good(func(b []byte) { PutHeader(b, Header{Type: PacketEvent, Length: 1<<32 - 1}) }), 0,
			[]string{"payload of 4294967295 bytes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseHeader(tc.b, tc.max)
			if err == nil {
				t.Fatalf("ParseHeader(% x) = %+v, want an error", tc.b, h)
			}
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is a %T, want *FrameError", err, err)
			}
			if h != (Header{}) {
				t.Errorf("failed parse returned header %+v, want zero", h)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "bad frame: ") {
				t.Errorf("error %q does not start with \"bad frame: \"", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

func TestParseHeaderLimitBoundary(t *testing.T) {
	b := make([]byte, HeaderSize)
	PutHeader(b, Header{Type: PacketStreamChunk, Length: 100})
	if _, err := ParseHeader(b, 100); err != nil {
		t.Errorf("length equal to the limit rejected: %v", err)
	}
	if _, err := ParseHeader(b, 99); err == nil {
		t.Error("length one over the limit accepted")
	}
}

func TestPacketType(t *testing.T) {
	tests := []struct {
		t     PacketType
		s     string
		valid bool
	}{
		{0, "PacketType(0)", false},
		{PacketRequest, "REQUEST", true},
		{PacketResponse, "RESPONSE", true},
		{PacketEvent, "EVENT", true},
		{PacketStreamChunk, "STREAM_CHUNK", true},
		{5, "PacketType(5)", false},
		{255, "PacketType(255)", false},
	}
	for _, tc := range tests {
		if got := tc.t.String(); got != tc.s {
			t.Errorf("PacketType(%d).String() = %q, want %q", uint8(tc.t), got, tc.s)
		}
		if got := tc.t.Valid(); got != tc.valid {
			t.Errorf("PacketType(%d).Valid() = %v, want %v", uint8(tc.t), got, tc.valid)
		}
	}
}

func TestPutHeaderShortBufferPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("PutHeader into 7 bytes did not panic")
		}
	}()
	PutHeader(make([]byte, HeaderSize-1), Header{Type: PacketRequest})
}
