package ipc

import (
	"fmt"
	"io"
	"os"
	"syscall"
	"unsafe"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"golang.org/x/sys/unix"
)

var _ kernel.ChunkSplicer = (*conn)(nil)

// SpliceChunk writes ch as a STREAM_CHUNK frame whose output is the next n
// bytes of the pipe from, spliced into the socket: from Linux 6.5 a Unix
// socket takes the pipe's pages by reference (MSG_SPLICE_PAGES), so the
// bytes are never copied on their way through the kernel process. It
// blocks while the peer does not read, like PushChunks. A failure may leave
// a frame cut short, after which the peer cannot find the next one: the
// connection is closed.
func (c *conn) SpliceChunk(ch *abi.StreamChunk, from syscall.RawConn, n int) error {
	if len(ch.Chunk) != 0 {
		return fmt.Errorf("splice chunk %d of %s: it carries %d bytes of its own", ch.Seq, ch.ProcessID, len(ch.Chunk))
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.raw == nil {
		raw, err := c.nc.SyscallConn()
		if err != nil {
			return err
		}
		c.raw = raw
	}
	h := append(c.head[:0], make([]byte, abi.HeaderSize)...)
	h = abi.AppendStreamChunkHeadLen(h, ch, n)
	abi.PutHeader(h, abi.Header{Type: abi.PacketStreamChunk, Length: uint32(len(h) - abi.HeaderSize + n)})
	c.head = h
	if err := spliceAll(c.raw, h, from, n); err != nil {
		c.nc.Close()
		return fmt.Errorf("splice output of %s to %s: %w", ch.ProcessID, c.caller, err)
	}
	return nil
}

// spliceAll writes head, then moves exactly n bytes from the pipe behind
// from, which holds them, to the socket behind to, waiting for room in the
// socket.
//
// The writes and splices are raw system calls, which the Go scheduler does
// not see: they never block (the socket is non-blocking, the splice asked
// not to wait for the pipe), and entering each the ordinary way, after the
// pump woke an otherwise idle daemon, wakes the runtime's monitor thread
// for a millisecond of polling every 20 µs (see proc's inq).
func spliceAll(to syscall.RawConn, head []byte, from syscall.RawConn, n int) error {
	var err error
	werr := to.Write(func(sock uintptr) bool {
		for len(head) > 0 {
			m, _, e := unix.RawSyscall(unix.SYS_WRITE, sock, uintptr(unsafe.Pointer(&head[0])), uintptr(len(head)))
			switch e {
			case 0:
				head = head[m:]
			case unix.EINTR:
			case unix.EAGAIN:
				return false // wait for room in the socket
			default:
				err = os.NewSyscallError("write", e)
				return true
			}
		}
		for n > 0 {
			var m int64
			if cerr := from.Control(func(pipe uintptr) {
				r, _, e := unix.RawSyscall6(unix.SYS_SPLICE, pipe, 0, sock, 0, uintptr(n), unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
				m, err = int64(r), nil
				if e != 0 {
					err = e
				}
				if err == unix.EAGAIN {
					// The socket is full, or (never, if the pump keeps
					// its word) the pipe is empty: waiting for room
					// would then wait for the peer forever.
					if left, ierr := unix.IoctlGetInt(int(pipe), unix.TIOCINQ); ierr == nil && left == 0 {
						err = io.ErrUnexpectedEOF
					}
				}
			}); cerr != nil {
				err = cerr
				return true
			}
			switch {
			case err == unix.EINTR:
				continue
			case err == unix.EAGAIN:
				err = nil
				return false // wait for room in the socket
			case err != nil:
				return true
			case m == 0:
				err = io.ErrUnexpectedEOF // the pipe held fewer than n bytes
				return true
			}
			n -= int(m)
		}
		return true
	})
	if werr != nil {
		return werr
	}
	if err != nil {
		return fmt.Errorf("splice: %w", err)
	}
	return nil
}
