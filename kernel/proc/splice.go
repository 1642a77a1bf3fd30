package proc

import (
	"io"
	"os"
	"syscall"
	"time"
	"unsafe"

	"github.com/kairo-os/kairo/abi"
	"golang.org/x/sys/unix"
)

// SpliceSink is a [Sink] that can also take output straight from the output
// pipe, so that the bytes go from pipe to destination inside the system
// (splice(2)) and never through the kernel's memory.
//
// The pump uses it only when the output needs no looking at (encoding
// binary, chunk mode, no rate or output limit, no progress rules, no PTY)
// and the sink is the session's only one; otherwise it calls Chunks.
type SpliceSink interface {
	Sink
	// CanSplice reports whether SpliceChunk may be called now; a sink
	// that wraps a destination without the means says no, and gets
	// Chunks instead.
	CanSplice() bool
	// SpliceChunk sends c, whose Chunk is empty, as if its Chunk held the
	// next n bytes of the pipe from, and moves exactly those n bytes from
	// the pipe. The pipe holds at least n bytes and nobody else reads it
	// during the call. Like Chunks it blocks while the destination is
	// slow to take output. An error means the sink is broken (it may have
	// taken part of the bytes) and is detached.
	SpliceChunk(c *abi.StreamChunk, from syscall.RawConn, n int) error
}

// spliceable reports whether the spec lets output skip the kernel's
// memory: nothing needs to see or count the bytes.
func (s *Spec) spliceable() bool {
	return !s.PTY && s.Encoding == EncodingBinary && s.Mode == ModeChunk &&
		s.MaxBytesPerSecond == 0 && s.OutputLimit == 0 && len(s.Progress) == 0 && s.Mask == nil
}

// spliceSink is the session's sink when output may be spliced to it now:
// the only sink, and one that can splice.
func (s *Session) spliceSink() SpliceSink {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sinks) != 1 {
		return nil
	}
	if k, ok := s.sinks[0].(SpliceSink); ok && k.CanSplice() {
		return k
	}
	return nil
}

// buffered waits until the pipe behind rc holds output and returns how many
// bytes it holds; io.EOF once it is empty and every writer is gone.
func buffered(rc syscall.RawConn) (int, error) {
	var n int
	var err error
	rerr := rc.Read(func(fd uintptr) bool {
		if n, err = inq(fd); err != nil || n > 0 {
			return true
		}
		// Empty: has the last writer gone? The poller is edge-triggered
		// and may have reported the hang-up while nobody waited, so ask
		// the pipe, then look again for bytes written just before the
		// writers left.
		fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		var zero unix.Timespec
		for {
			_, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
			if e != unix.EINTR {
				if e != 0 {
					err = os.NewSyscallError("ppoll", e)
					return true
				}
				break
			}
		}
		if n, err = inq(fd); err != nil || n > 0 {
			return true
		}
		if fds[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0 {
			err = io.EOF
			return true
		}
		return false // wait for the poller
	})
	if rerr != nil {
		return 0, rerr
	}
	return n, err
}

// inq is how many bytes the pipe fd holds (FIONREAD, which
// golang.org/x/sys names TIOCINQ on Linux).
//
// It and the other calls of the splice path that return at once (the
// zero-timeout poll, the linger, the splice itself) are raw system calls,
// which the Go scheduler does not see: entering one the ordinary way, after
// the pump woke a daemon that was otherwise idle, wakes the runtime's
// monitor thread, which then polls every 20 µs for a millisecond — about
// half the daemon's context switches on a busy stream, and a quarter of
// its CPU time.
func inq(fd uintptr) (int, error) {
	var n int32
	if _, _, e := unix.RawSyscall(unix.SYS_IOCTL, fd, unix.TIOCINQ, uintptr(unsafe.Pointer(&n))); e != 0 {
		return 0, os.NewSyscallError("ioctl FIONREAD", e)
	}
	return int(n), nil
}

// A busy stream (its last chunk went out less than busyWithin ago) whose
// pipe holds less than half a chunk waits linger for its writer to add more
// before it splices, or, masked, before it reads: a writer that writes
// 4 KiB at a time otherwise wakes the pump for every write, and each small
// chunk costs the kernel and the client a frame and a wake-up of their
// own. Output after a pause goes out at once; a busy stream's chunks wait
// at most linger (plus the system's timer slack).
const (
	linger     = 50 * time.Microsecond
	busyWithin = time.Millisecond
)

// pipeWait is how a pump waits for output in its pipe: the splice path's
// wait, and that of a masked stream's reads.
type pipeWait struct {
	rc   syscall.RawConn // the pipe's read end
	fill int             // below this many bytes a busy stream lingers
	last time.Time       // when the last chunk went out
}

// newPipeWait returns the wait for the pipe r, or nil when r cannot take
// it: it needs a non-blocking descriptor on the runtime's poller, which
// os.Pipe gives.
func newPipeWait(r *os.File, maxChunk int) *pipeWait {
	rc, err := r.SyscallConn()
	if err != nil {
		return nil
	}
	size, pollable := maxChunk, false
	rc.Control(func(fd uintptr) {
		if fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0); err == nil {
			pollable = fl&unix.O_NONBLOCK != 0
		}
		if n, err := unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0); err == nil {
			size = min(size, n)
		}
	})
	if !pollable {
		return nil
	}
	return &pipeWait{rc: rc, fill: size / 2}
}

// wait waits for output and returns how many bytes the pipe holds, after
// lingering for more when the stream is busy; io.EOF at the end of the
// stream.
func (w *pipeWait) wait() (int, error) {
	n, err := buffered(w.rc)
	if err != nil || n >= w.fill || time.Since(w.last) >= busyWithin {
		return n, err
	}
	// A sleep of the thread, not of the goroutine: the runtime rounds so
	// short a timer up to its poller's millisecond. Raw (see inq): the
	// goroutine keeps its P for the linger, and a signal that asks it to
	// yield ends the sleep early (EINTR).
	ts := unix.NsecToTimespec(linger.Nanoseconds())
	unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
	return buffered(w.rc) // returns at once: n bytes are there
}

// spliceOnce waits for output and splices up to MaxChunkBytes of it to the
// lone sink as one chunk. It reports false when the sinks changed while it
// waited (the output is still in the pipe for the read path), and io.EOF at
// the end of the stream.
func (p *pump) spliceOnce() (bool, error) {
	n, err := p.pipe.wait()
	if err != nil {
		return false, err
	}
	k := p.s.spliceSink() // again: a sink may have come or gone meanwhile
	if k == nil {
		return false, nil
	}
	p.seq++
	c := abi.StreamChunk{
		ProcessID:     p.s.id,
		Stream:        p.stream,
		Seq:           p.seq,
		Encoding:      "binary",
		CorrelationID: p.s.spec.CorrelationID,
	}
	p.s.handing.Add(1) // the exit waits for it (Session.awaitOutput)
	if err := k.SpliceChunk(&c, p.pipe.rc, min(n, p.s.spec.MaxChunkBytes)); err != nil {
		p.s.Detach(k)
	}
	p.pipe.last = time.Now()
	p.s.moved.Add(1)
	p.s.handing.Add(-1)
	return true, nil
}
