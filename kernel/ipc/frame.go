// Package ipc is the kernel's Unix-socket door: a server that exposes the
// kernel method table to local processes, and a client for it. Frames are an
// 8-byte header (abi.PutHeader) and a MsgPack payload.
package ipc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/kairo-os/kairo/abi"
)

// directRead is the payload size from which the reader bypasses its buffer.
const directRead = 8 << 10

// frameReader reads frames from a stream.
type frameReader struct {
	src io.Reader // under r: large payloads are read from it directly
	r   *bufio.Reader
	max uint32
	hdr [abi.HeaderSize]byte
	buf []byte
}

func newFrameReader(r io.Reader, max uint32) *frameReader {
	if max == 0 {
		max = abi.DefaultMaxFrame
	}
	return &frameReader{src: r, r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next frame. The payload is only valid until the next
// call. A *abi.FrameError means the stream is out of step.
func (f *frameReader) next() (abi.PacketType, []byte, error) {
	if _, err := io.ReadFull(f.r, f.hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return 0, nil, &abi.FrameError{Reason: "connection closed inside a frame header"}
		}
		return 0, nil, err
	}
	h, err := abi.ParseHeader(f.hdr[:], f.max)
	if err != nil {
		return 0, nil, err
	}
	if cap(f.buf) < int(h.Length) {
		f.buf = make([]byte, h.Length)
	}
	payload := f.buf[:h.Length]
	p := payload
	// A large payload (process output) that is not all buffered yet: take
	// what is, then read the rest straight into p, saving a copy through
	// the buffer.
	src := io.Reader(f.r)
	if n := f.r.Buffered(); len(p) >= directRead && n < len(p) {
		if _, err := io.ReadFull(f.r, p[:n]); err != nil {
			return 0, nil, err
		}
		p, src = p[n:], f.src
	}
	if _, err := io.ReadFull(src, p); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return 0, nil, &abi.FrameError{Reason: fmt.Sprintf("connection closed inside a %d-byte payload", h.Length)}
		}
		return 0, nil, err
	}
	// Do not keep a huge buffer alive for the life of the connection.
	if cap(f.buf) > 1<<20 {
		f.buf = nil
	}
	return h.Type, payload, nil
}

// frameBuf builds one or more frames for a single write.
type frameBuf struct {
	b bytes.Buffer
}

var frameBufs = sync.Pool{New: func() any { return new(frameBuf) }}

func getFrameBuf() *frameBuf { f := frameBufs.Get().(*frameBuf); f.b.Reset(); return f }

func putFrameBuf(f *frameBuf) {
	if f.b.Cap() <= 1<<20 {
		frameBufs.Put(f)
	}
}

// addRaw appends one frame whose payload appendPayload writes.
func (f *frameBuf) addRaw(t abi.PacketType, appendPayload func([]byte) []byte) {
	start := f.b.Len()
	var hdr [abi.HeaderSize]byte
	f.b.Write(hdr[:])
	f.b.Write(appendPayload(f.b.AvailableBuffer()))
	abi.PutHeader(f.b.Bytes()[start:], abi.Header{Type: t, Length: uint32(f.b.Len() - start - abi.HeaderSize)})
}

// addEvent appends an EVENT frame, encoded by hand: it is the push hot path.
func (f *frameBuf) addEvent(sub uint64, ev *abi.Event) {
	f.addRaw(abi.PacketEvent, func(p []byte) []byte {
		p = append(p, 0x82, 0xa3, 's', 'u', 'b', 0xcf) // {"sub": uint64, "event": …}
		p = binary.BigEndian.AppendUint64(p, sub)
		p = append(p, 0xa5, 'e', 'v', 'e', 'n', 't')
		return abi.AppendEvent(p, ev)
	})
}
