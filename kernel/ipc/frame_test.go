package ipc

import (
	"bytes"
	"testing"
	"testing/iotest"

	"github.com/kairo-os/kairo/abi"
)

// Frames of every size, back to back, read whole whether their payload is
// in the reader's buffer, partly in it, or read around it.
func TestFrameReaderSizes(t *testing.T) {
	var stream bytes.Buffer
	var want [][]byte
	for i, n := range []int{0, 10, directRead - 1, directRead, 20 << 10, 3, 70 << 10, 100, 200 << 10, 5} {
		p := bytes.Repeat([]byte{byte(i + 1)}, n)
		f := &frameBuf{}
		f.addRaw(abi.PacketEvent, func(b []byte) []byte { return append(b, p...) })
		stream.Write(f.b.Bytes())
		want = append(want, p)
	}
	for name, r := range map[string]func() *frameReader{
		"whole":       func() *frameReader { return newFrameReader(bytes.NewReader(stream.Bytes()), 0) },
		"byte a time": func() *frameReader { return newFrameReader(iotest.OneByteReader(bytes.NewReader(stream.Bytes())), 0) },
		"half":        func() *frameReader { return newFrameReader(iotest.HalfReader(bytes.NewReader(stream.Bytes())), 0) },
	} {
		fr := r()
		for i, w := range want {
			typ, p, err := fr.next()
			if err != nil || typ != abi.PacketEvent || !bytes.Equal(p, w) {
				t.Fatalf("%s: frame %d: type %v, %d bytes (want %d), err %v", name, i, typ, len(p), len(w), err)
			}
		}
		if _, _, err := fr.next(); err == nil {
			t.Fatalf("%s: a frame after the last", name)
		}
	}
}
