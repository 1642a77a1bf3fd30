// Package ipc is the kernel's Unix-socket door: a [Server] ([Listen]) that
// exposes the kernel method table to local processes. Frames are an 8-byte
// header and a MsgPack payload, read and written by abi's codec
// ([abi.FrameReader], [abi.AppendFrame]); the client is sdk/client.
package ipc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/kairo-os/kairo/abi"
)

// bigFrame is the payload size from which the reader allocates as the
// bytes arrive, instead of what the header claims, and charges them to the
// reader's budget: a header alone must not make the kernel hold a frame.
const bigFrame = 64 << 10

// frameBudget bounds the bytes of large payloads held across readers: the
// ones being read and the ones whose requests still run.
type frameBudget struct {
	max  int64
	used atomic.Int64
}

// take charges n bytes; false, charging nothing, past the bound.
func (b *frameBudget) take(n int64) bool {
	for {
		cur := b.used.Load()
		if cur+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

func (b *frameBudget) give(n int64) { b.used.Add(-n) }

// busyError is a large payload the reader skipped because its budget was
// spent. The stream is still in step: the bytes were read and dropped.
type busyError struct {
	length uint32
	max    int64
	prefix []byte // the payload's first bytes, for the request id
}

func (e *busyError) Error() string {
	return fmt.Sprintf("a %d-byte request would take the kernel past the %d bytes of large requests it holds for all clients (Config.MaxBufferedBytes); retry it when fewer are in flight", e.length, e.max)
}

// frameReader is the server's reader of frames: abi's, plus a budget for
// large payloads, which a client may send to make the kernel hold memory.
type frameReader struct {
	*abi.FrameReader
	r      *bufio.Reader // the abi reader's, read directly for large payloads
	budget *frameBudget  // nil: large payloads are not charged
	// held is what the last payload, a large one, holds of budget. The
	// payload is then the caller's, who gives held back when done with it.
	held int64
}

func newFrameReader(r io.Reader, max uint32) *frameReader {
	return newFrameReaderSize(r, max, 64<<10, nil)
}

func newFrameReaderSize(r io.Reader, max uint32, size int, budget *frameBudget) *frameReader {
	br := bufio.NewReaderSize(r, size)
	return &frameReader{FrameReader: abi.NewFrameReader(br, max), r: br, budget: budget}
}

// next returns the next frame. A payload is only valid until the next call,
// except a large one (bigFrame bytes and over) read with a budget: that one
// is the caller's to keep, and f.held says what of the budget it holds.
// A *abi.FrameError means the stream is out of step; a *busyError that a
// large payload was skipped.
func (f *frameReader) next() (abi.PacketType, []byte, error) {
	f.held = 0
	h, err := f.ReadHeader()
	if err != nil {
		return 0, nil, err
	}
	if h.Length >= bigFrame && f.budget != nil {
		p, err := f.readBig(h.Length)
		return h.Type, p, err
	}
	p, err := f.ReadPayload(h.Length)
	return h.Type, p, err
}

// readBig reads a payload of n bytes into a buffer that grows as they
// arrive, doubling from what is already buffered: the allocation stays
// within twice what the peer sent, whatever the header claimed. Each
// growth is charged to the budget; past it the rest of the payload is read
// and dropped, and a *busyError returned.
func (f *frameReader) readBig(n uint32) ([]byte, error) {
	size := min(int(n), max(f.r.Buffered(), 4<<10))
	if !f.charge(size) {
		return nil, f.skip(n, nil)
	}
	p := make([]byte, 0, size)
	for len(p) < int(n) {
		if len(p) == cap(p) {
			grow := min(int(n), 2*cap(p))
			if !f.charge(grow - cap(p)) {
				return nil, f.skip(n, p)
			}
			p = append(make([]byte, 0, grow), p...)
		}
		m, err := f.r.Read(p[len(p):cap(p)])
		p = p[:len(p)+m]
		if err != nil && len(p) < int(n) {
			f.giveBack()
			return nil, abi.PayloadError(n, err)
		}
	}
	return p, nil
}

func (f *frameReader) charge(n int) bool {
	if f.budget == nil {
		return true
	}
	if !f.budget.take(int64(n)) {
		return false
	}
	f.held += int64(n)
	return true
}

func (f *frameReader) giveBack() {
	if f.budget != nil && f.held > 0 {
		f.budget.give(f.held)
	}
	f.held = 0
}

// skip drops the rest of an n-byte payload of which have arrived, keeping
// the stream in step, and keeps its first bytes for the request id.
func (f *frameReader) skip(n uint32, have []byte) error {
	f.giveBack()
	prefix := bytes.Clone(have[:min(len(have), 256)])
	if len(have) == 0 {
		prefix = make([]byte, min(int(n), 256))
		if _, err := io.ReadFull(f.r, prefix); err != nil {
			return abi.PayloadError(n, err)
		}
	}
	if _, err := io.CopyN(io.Discard, f.r, int64(n)-int64(max(len(have), len(prefix)))); err != nil {
		return abi.PayloadError(n, err)
	}
	return &busyError{length: n, max: f.budget.max, prefix: prefix}
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
	f.b.Write(abi.AppendFrame(f.b.AvailableBuffer(), t, appendPayload))
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
