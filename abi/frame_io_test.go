package abi

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// Frames AppendFrame writes back to back read whole with FrameReader,
// however the stream splits them.
func TestFrameReaderRoundTrip(t *testing.T) {
	var stream []byte
	var want [][]byte
	for i, n := range []int{0, 10, 64 << 10, 3, 200 << 10, 5} {
		p := bytes.Repeat([]byte{byte(i + 1)}, n)
		stream = AppendFrame(stream, PacketEvent, func(b []byte) []byte { return append(b, p...) })
		want = append(want, p)
	}
	for name, r := range map[string]func() io.Reader{
		"whole":       func() io.Reader { return bytes.NewReader(stream) },
		"byte a time": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(stream)) },
		"half":        func() io.Reader { return iotest.HalfReader(bytes.NewReader(stream)) },
	} {
		fr := NewFrameReader(r(), 0)
		for i, w := range want {
			typ, p, err := fr.Next()
			if err != nil || typ != PacketEvent || !bytes.Equal(p, w) {
				t.Fatalf("%s: frame %d: type %v, %d bytes (want %d), err %v", name, i, typ, len(p), len(w), err)
			}
		}
		if _, _, err := fr.Next(); err != io.EOF {
			t.Fatalf("%s: after the last frame: %v, want io.EOF", name, err)
		}
	}
}

// A stream that ends inside a frame, or a payload over the limit, is a
// *FrameError: the stream is out of step.
func TestFrameReaderErrors(t *testing.T) {
	frame := AppendFrame(nil, PacketRequest, func(b []byte) []byte { return append(b, "0123456789"...) })
	for name, c := range map[string]struct {
		in  []byte
		max uint32
	}{
		"cut header":  {frame[:5], 0},
		"cut payload": {frame[:HeaderSize+4], 0},
		"over limit":  {frame, 9},
		"bad magic":   {append([]byte("GET / HT"), frame[HeaderSize:]...), 0},
	} {
		_, _, err := NewFrameReader(bytes.NewReader(c.in), c.max).Next()
		var fe *FrameError
		if !errors.As(err, &fe) {
			t.Errorf("%s: %v, want a *FrameError", name, err)
		}
	}
}
