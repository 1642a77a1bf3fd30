package abi

import (
	"bufio"
	"fmt"
	"io"
)

// FrameReader reads frames from a stream: the one reader of the kernel
// socket, used by the kernel's server and by every Go client.
type FrameReader struct {
	r   *bufio.Reader
	max uint32
	hdr [HeaderSize]byte
	buf []byte
}

// NewFrameReader reads frames from r whose payloads are at most maxPayload
// bytes ([DefaultMaxFrame] when zero). A [*bufio.Reader] is read directly, so
// its owner may read a payload itself after ReadHeader; any other reader
// is buffered with 64 KiB.
func NewFrameReader(r io.Reader, maxPayload uint32) *FrameReader {
	if maxPayload == 0 {
		maxPayload = DefaultMaxFrame
	}
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	return &FrameReader{r: br, max: maxPayload}
}

// Next returns the next frame. Its payload is only valid until the next
// call. A [*FrameError] means the stream is out of step; [io.EOF] that it ended
// between frames.
func (f *FrameReader) Next() (PacketType, []byte, error) {
	h, err := f.ReadHeader()
	if err != nil {
		return 0, nil, err
	}
	p, err := f.ReadPayload(h.Length)
	return h.Type, p, err
}

// ReadHeader reads and checks the next frame header. The caller then reads
// its payload, with ReadPayload or from the [*bufio.Reader] it passed in.
func (f *FrameReader) ReadHeader() (Header, error) {
	if _, err := io.ReadFull(f.r, f.hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return Header{}, &FrameError{Reason: "connection closed inside a frame header"}
		}
		return Header{}, err
	}
	return ParseHeader(f.hdr[:], f.max)
}

// ReadPayload reads a payload of n bytes into a buffer the reader reuses:
// the bytes are only valid until its next call.
func (f *FrameReader) ReadPayload(n uint32) ([]byte, error) {
	// The reader copies what it has buffered, then reads the rest of a
	// large payload straight into the buffer.
	if cap(f.buf) < int(n) {
		f.buf = make([]byte, n)
	}
	payload := f.buf[:n]
	if _, err := io.ReadFull(f.r, payload); err != nil {
		return nil, PayloadError(n, err)
	}
	if cap(f.buf) > 1<<20 {
		f.buf = nil // do not keep a huge buffer for the life of the connection
	}
	return payload, nil
}

// PayloadError is the error of reading an n-byte payload that failed with
// err: a [*FrameError] when the stream ended inside the payload, else err.
func PayloadError(n uint32, err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return &FrameError{Reason: fmt.Sprintf("connection closed inside a %d-byte payload", n)}
	}
	return err
}

// AppendFrame appends to dst one frame of type t whose payload
// appendPayload appends, and returns the extended slice.
func AppendFrame(dst []byte, t PacketType, appendPayload func([]byte) []byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	dst = appendPayload(dst)
	PutHeader(dst[start:], Header{Type: t, Length: uint32(len(dst) - start - HeaderSize)})
	return dst
}
