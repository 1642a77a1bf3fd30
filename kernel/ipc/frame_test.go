package ipc

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/kairo-os/kairo/abi"
)

// Frames of every size, back to back, read whole whether their payload is
// in the reader's buffer, partly in it, or read around it.
func TestFrameReaderSizes(t *testing.T) {
	var stream bytes.Buffer
	var want [][]byte
	for i, n := range []int{0, 10, bigFrame - 1, bigFrame, 20 << 10, 3, 70 << 10, 100, 200 << 10, 5} {
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
		"small buffer": func() *frameReader {
			return newFrameReaderSize(iotest.HalfReader(bytes.NewReader(stream.Bytes())), 0, 16, &frameBudget{max: 1 << 20})
		},
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

// A header claiming a large payload costs what has arrived, not what it
// claims; past the budget a payload is skipped and the stream stays in step.
func TestFrameReaderBudget(t *testing.T) {
	var stream bytes.Buffer
	frame := func(n int, b byte) {
		f := &frameBuf{}
		f.addRaw(abi.PacketRequest, func(p []byte) []byte { return append(p, bytes.Repeat([]byte{b}, n)...) })
		stream.Write(f.b.Bytes())
	}
	frame(300<<10, 1) // fits the budget
	frame(600<<10, 2) // does not, while the first is held
	frame(10, 3)
	budget := &frameBudget{max: 512 << 10}
	fr := newFrameReaderSize(&stream, 0, 16<<10, budget)
	_, p, err := fr.next()
	if err != nil || len(p) != 300<<10 || fr.held < 300<<10 || fr.held > 512<<10 {
		t.Fatalf("first frame: %d bytes, held %d, %v", len(p), fr.held, err)
	}
	held := fr.held
	_, _, err = fr.next()
	var be *busyError
	if !errors.As(err, &be) || be.length != 600<<10 || len(be.prefix) != 256 || budget.used.Load() != held {
		t.Fatalf("second frame: %v (budget used %d, want %d)", err, budget.used.Load(), held)
	}
	if _, p, err = fr.next(); err != nil || !bytes.Equal(p, bytes.Repeat([]byte{3}, 10)) {
		t.Fatalf("frame after the skipped one: % x, %v", p, err)
	}
	budget.give(held)

	// A header alone: nothing beyond a first small read is allocated.
	r, w := io.Pipe()
	defer r.Close()
	go func() {
		hdr := make([]byte, abi.HeaderSize)
		abi.PutHeader(hdr, abi.Header{Type: abi.PacketRequest, Length: 16 << 20})
		w.Write(append(hdr, 0x80))
		w.Close()
	}()
	fr = newFrameReaderSize(r, 0, 16<<10, budget)
	if _, _, err := fr.next(); err == nil {
		t.Fatal("a cut payload was read")
	}
	if budget.used.Load() != 0 {
		t.Fatalf("budget holds %d bytes after a cut payload", budget.used.Load())
	}
}
