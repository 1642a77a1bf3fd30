package proc

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/kairo-os/kairo/abi"
)

// Sink receives a session's output, several chunks of one stream at a time,
// in order. Chunks may block: a sink that is slow to take output slows the
// pump, the pipe fills, and the child waits in its write — backpressure all
// the way to the process, with the kernel holding a few chunks' worth of
// buffer per stream. The chunks' bytes are only valid during the call. A
// sink that returns an error is detached.
type Sink interface {
	Chunks(cs []abi.StreamChunk) error
}

// readChunks is how many chunks one read may fill: fewer system calls on
// both sides of the kernel for output that comes fast.
const readChunks = 8

// pump reads one stream of a session and hands it to the sinks.
type pump struct {
	s      *Session
	stream string
	r      *os.File
	seq    uint64
	out    []abi.StreamChunk

	// Rate limit: a token bucket of MaxBytesPerSecond bytes, refilled
	// continuously; output beyond it is dropped and counted.
	tokens     float64
	last       time.Time
	dropped    int64 // since the last throttled event
	lastReport time.Time
}

func (p *pump) run(done *sync.WaitGroup) {
	defer done.Done()
	defer p.r.Close()
	spec := &p.s.spec
	buf := make([]byte, readChunks*spec.MaxChunkBytes)
	carry := 0 // line mode: bytes of an unfinished line at the front of buf
	for {
		n, err := p.r.Read(buf[carry:])
		n += carry
		carry = 0
		if n > 0 {
			out := buf[:n]
			if spec.Mode == ModeLine && err == nil {
				// Hand over whole lines; keep the tail for the next read
				// unless the buffer is full of one line.
				if i := bytes.LastIndexByte(out, '\n'); i >= 0 && i < n-1 {
					carry, out = n-i-1, buf[:i+1]
				} else if i < 0 && n < len(buf) {
					carry, out = n, nil
				}
			}
			if len(out) > 0 {
				p.emit(out)
			}
			if carry > 0 {
				copy(buf, buf[n-carry:n])
			}
		}
		if err != nil {
			if carry > 0 {
				p.emit(buf[:carry])
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) && !isEIO(err) {
				p.s.m.log("read %s of %s: %v", p.stream, p.s.id, err)
			}
			p.report(true)
			return
		}
	}
}

// emit cuts b into chunks of at most MaxChunkBytes (at line ends in line
// mode), applies the rate limit and hands them to the sinks.
func (p *pump) emit(b []byte) {
	spec := &p.s.spec
	p.out = p.out[:0]
	for len(b) > 0 {
		piece := b[:min(len(b), spec.MaxChunkBytes)]
		if spec.Mode == ModeLine && len(piece) < len(b) {
			if i := bytes.LastIndexByte(piece, '\n'); i >= 0 {
				piece = piece[:i+1]
			}
		}
		b = b[len(piece):]
		kept, truncated := p.limit(piece)
		if len(kept) == 0 {
			continue
		}
		p.seq++
		c := abi.StreamChunk{
			ProcessID:     p.s.id,
			Stream:        p.stream,
			Seq:           p.seq,
			Encoding:      "utf8",
			Chunk:         kept,
			Truncated:     truncated,
			CorrelationID: spec.CorrelationID,
		}
		if !utf8.Valid(kept) {
			c.Encoding = "binary"
		}
		p.out = append(p.out, c)
	}
	if len(p.out) > 0 {
		p.s.deliver(p.out)
	}
	p.report(false)
}

// limit takes what the rate allows of b.
func (p *pump) limit(b []byte) ([]byte, bool) {
	rate := p.s.spec.MaxBytesPerSecond
	if rate <= 0 {
		return b, false
	}
	now := time.Now()
	if p.last.IsZero() {
		p.tokens = float64(rate)
	} else {
		p.tokens = min(float64(rate), p.tokens+now.Sub(p.last).Seconds()*float64(rate))
	}
	p.last = now
	truncated := false
	if allowed := int(p.tokens); allowed < len(b) {
		p.dropped += int64(len(b) - allowed)
		b, truncated = b[:allowed], true
	}
	p.tokens -= float64(len(b))
	return b, truncated
}

// report publishes kairo.process.output.throttled for what was dropped, at
// most once a second (and once more at the end).
func (p *pump) report(final bool) {
	if p.dropped == 0 || (!final && time.Since(p.lastReport) < time.Second) {
		return
	}
	p.s.m.publish(p.s, "kairo.process.output.throttled", map[string]any{
		"processId":         p.s.id,
		"stream":            p.stream,
		"droppedBytes":      p.dropped,
		"maxBytesPerSecond": p.s.spec.MaxBytesPerSecond,
	})
	p.dropped, p.lastReport = 0, time.Now()
}
