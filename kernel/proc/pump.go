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

// Sink receives a session's output. Chunk may block: a sink that is slow to
// take output slows the pump, the pipe fills, and the child waits in its
// write — backpressure all the way to the process, with the kernel holding
// one buffer per stream. A sink that returns an error is detached.
type Sink interface {
	Chunk(c *abi.StreamChunk) error
}

// pump reads one stream of a session and hands it to the sinks.
type pump struct {
	s      *Session
	stream string
	r      *os.File
	seq    uint64

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
	buf := make([]byte, spec.MaxChunkBytes)
	var carry int // line mode: bytes of an unfinished line at the front of buf
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
					carry = n - i - 1
					out = buf[:i+1]
				} else if i < 0 && n < len(buf) {
					carry = n
					out = nil
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

// emit applies the rate limit and hands b to the sinks.
func (p *pump) emit(b []byte) {
	truncated := false
	if rate := p.s.spec.MaxBytesPerSecond; rate > 0 {
		now := time.Now()
		if p.last.IsZero() {
			p.tokens = float64(rate)
		} else {
			p.tokens = min(float64(rate), p.tokens+now.Sub(p.last).Seconds()*float64(rate))
		}
		p.last = now
		if allowed := int(p.tokens); allowed < len(b) {
			p.dropped += int64(len(b) - allowed)
			b, truncated = b[:allowed], true
		}
		p.tokens -= float64(len(b))
		p.report(false)
	}
	if len(b) == 0 {
		return
	}
	p.seq++
	c := &abi.StreamChunk{
		ProcessID:     p.s.id,
		Stream:        p.stream,
		Seq:           p.seq,
		Encoding:      "utf8",
		Chunk:         b,
		Truncated:     truncated,
		CorrelationID: p.s.spec.CorrelationID,
	}
	if !utf8.Valid(b) {
		c.Encoding = "binary"
	}
	p.s.deliver(c)
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
