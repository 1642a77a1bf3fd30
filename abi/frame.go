package abi

import (
	"encoding/binary"
	"fmt"
)

// A frame on the kernel socket is an 8-byte header followed by a MsgPack
// payload:
//
//	offset 0  2 bytes  magic "KR"
//	offset 2  1 byte   frame version (FrameVersion)
//	offset 3  1 byte   packet type (PacketType)
//	offset 4  4 bytes  payload length, big-endian
//
// The header carries the packet type so a reader can route a packet, or skip
// one it does not know, without decoding it.
const (
	HeaderSize      = 8
	FrameVersion    = 1
	DefaultMaxFrame = 16 << 20
	// MaxFrameCeiling is the largest payload any peer may be configured to
	// accept.
	MaxFrameCeiling = 1 << 30
)

// Magic opens every frame.
var Magic = [2]byte{'K', 'R'}

// PacketType says what a frame's payload is.
type PacketType uint8

const (
	PacketRequest     PacketType = 1 // client → kernel: Request
	PacketResponse    PacketType = 2 // kernel → client: Response
	PacketEvent       PacketType = 3 // kernel → client: EventPacket
	PacketStreamChunk PacketType = 4 // kernel → client: StreamChunk
)

// String names the packet type for logs and errors: REQUEST, RESPONSE,
// EVENT, STREAM_CHUNK, or PacketType(n) for a byte that is none of them.
func (t PacketType) String() string {
	switch t {
	case PacketRequest:
		return "REQUEST"
	case PacketResponse:
		return "RESPONSE"
	case PacketEvent:
		return "EVENT"
	case PacketStreamChunk:
		return "STREAM_CHUNK"
	}
	return fmt.Sprintf("PacketType(%d)", uint8(t))
}

// Valid reports whether t is one of the four packet types.
func (t PacketType) Valid() bool { return t >= PacketRequest && t <= PacketStreamChunk }

// Header is a decoded frame header.
type Header struct {
	Type   PacketType
	Length uint32
}

// PutHeader writes h into b, which must hold [HeaderSize] bytes.
func PutHeader(b []byte, h Header) {
	_ = b[HeaderSize-1]
	b[0], b[1] = Magic[0], Magic[1]
	b[2] = FrameVersion
	b[3] = byte(h.Type)
	binary.BigEndian.PutUint32(b[4:], h.Length)
}

// FrameError is a frame the reader cannot accept. After one the stream cannot
// be trusted to be in step, so the connection is closed once it is reported.
type FrameError struct {
	Reason string
}

// Error says why the frame was refused.
func (e *FrameError) Error() string { return "bad frame: " + e.Reason }

// ParseHeader decodes and checks a frame header. maxPayload bounds the
// payload length ([DefaultMaxFrame] when zero).
func ParseHeader(b []byte, maxPayload uint32) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, &FrameError{fmt.Sprintf("header is %d bytes, want %d", len(b), HeaderSize)}
	}
	if b[0] != Magic[0] || b[1] != Magic[1] {
		return Header{}, &FrameError{fmt.Sprintf("wrong magic %#02x%02x, want %q: is this a Kairo client?", b[0], b[1], Magic[:])}
	}
	if b[2] != FrameVersion {
		return Header{}, &FrameError{fmt.Sprintf("frame version %d, this kernel speaks %d", b[2], FrameVersion)}
	}
	h := Header{Type: PacketType(b[3]), Length: binary.BigEndian.Uint32(b[4:])}
	if !h.Type.Valid() {
		return Header{}, &FrameError{fmt.Sprintf("unknown packet type %d (want 1..4)", b[3])}
	}
	if maxPayload == 0 {
		maxPayload = DefaultMaxFrame
	}
	if h.Length > maxPayload {
		return Header{}, &FrameError{fmt.Sprintf("payload of %d bytes is over the %d-byte limit (kernel.max_frame in kairo.toml)", h.Length, maxPayload)}
	}
	return h, nil
}
