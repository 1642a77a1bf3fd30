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
	"github.com/kairo-os/kairo/kernel/secrets"
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
	reason     string // why the last bytes were dropped
	gap        bool   // the last chunk sent was marked truncated

	// Progress: the unfinished last line, and the newest match not yet
	// published.
	line         []byte
	pending      map[string]string
	lastProgress time.Time

	// splice is set when the spec lets output go from the pipe to a sink
	// without passing through the kernel's memory.
	splice bool
	// mask masks the stream of a tree that holds secrets: a value split
	// across two reads is masked too.
	mask *secrets.Stream
	// pipe waits for output when the stream splices or is masked; nil
	// when the pipe cannot be waited on.
	pipe *pipeWait
}

// maxProgressLine bounds the line the progress rules look at.
const maxProgressLine = 4 << 10

// progressEvery is the most often a stream publishes progress.
const progressEvery = 100 * time.Millisecond

func (p *pump) run() {
	defer p.ended()
	defer p.r.Close()
	spec := &p.s.spec
	// Output nobody needs to look at may go from the pipe to a lone sink
	// that can splice; each round decides again, as sinks come and go.
	p.splice = spec.spliceable()
	if spec.Mask != nil {
		p.mask = spec.Mask.Stream()
	}
	// A masked stream waits as a spliced one does, so that its busy
	// output goes out in chunks as large: masking costs little, small
	// chunks much.
	if p.splice || p.mask != nil && !spec.PTY {
		p.pipe = newPipeWait(p.r, spec.MaxChunkBytes)
	}
	var buf []byte // taken at the first read: spliced output needs none
	defer func() { putReadBuf(buf) }()
	carry := 0 // line mode: bytes of an unfinished line at the front of buf
	for {
		if p.splice && p.pipe != nil && p.s.spliceSink() != nil {
			spliced, err := p.spliceOnce()
			if err != nil {
				p.end(err)
				return
			}
			if spliced {
				continue
			}
		}
		if buf == nil {
			buf = getReadBuf(readChunks * spec.MaxChunkBytes)
		}
		if p.mask != nil && p.pipe != nil {
			// An error here is the read's too; the read reports it.
			p.pipe.wait()
		}
		n, err := p.r.Read(buf[carry:])
		// Read: what follows hands it on (masking a large read may take
		// a while), and the exit waits for it (Session.awaitOutput).
		p.s.moved.Add(1)
		p.s.handing.Add(1)
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
				p.put(out)
				if p.pipe != nil {
					p.pipe.last = time.Now()
				}
			}
			if carry > 0 {
				copy(buf, buf[n-carry:n])
			}
		}
		if err != nil {
			if carry > 0 {
				p.put(buf[:carry])
			}
			if p.mask != nil {
				if rest := p.mask.Flush(); len(rest) > 0 {
					p.emit(rest)
				}
			}
			p.end(err)
			p.s.handing.Add(-1)
			return
		}
		p.s.handing.Add(-1)
	}
}

// readBufs holds the read buffers of ended pumps of the default chunk
// size, for the next: each spawn needs two, and 256 KiB made and cleared
// for every short-lived process was a fifth of the kernel's CPU a spawn,
// most of it the collections that garbage set off. A sink sees a chunk's
// bytes only during its call, so a buffer given back is nobody's: the
// next pump hands on only what it read into it itself.
var readBufs = sync.Pool{New: func() any { return new([readChunks * DefaultMaxChunkBytes]byte) }}

// getReadBuf is a read buffer of size bytes: from readBufs when it is the
// default size.
func getReadBuf(size int) []byte {
	if size != readChunks*DefaultMaxChunkBytes {
		return make([]byte, size)
	}
	return readBufs.Get().(*[readChunks * DefaultMaxChunkBytes]byte)[:]
}

// putReadBuf gives back a buffer of getReadBuf; nil or another size is
// left to the collector.
func putReadBuf(b []byte) {
	if len(b) == readChunks*DefaultMaxChunkBytes {
		readBufs.Put((*[readChunks * DefaultMaxChunkBytes]byte)(b))
	}
}

// ended tells the session that this pump has ended: the last to end
// closes drained, which the exit waits for, with no goroutine between.
func (p *pump) ended() {
	if p.s.pumps.Add(-1) == 0 {
		close(p.s.drained)
	}
}

// put hands b, as read, on: masked first in a tree that holds secrets.
func (p *pump) put(b []byte) {
	if p.mask != nil {
		if b = p.mask.Write(b); len(b) == 0 {
			return
		}
	}
	p.emit(b)
}

// end finishes the stream that err ended: what is pending is published.
func (p *pump) end(err error) {
	if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) && !isEIO(err) {
		p.s.m.log("read %s of %s: %v", p.stream, p.s.id, err)
	}
	p.progressFlush(true)
	p.report(true)
}

// emit cuts b into chunks of at most MaxChunkBytes (at line ends in line
// mode), applies the rate limit and hands them to the sinks.
func (p *pump) emit(b []byte) {
	spec := &p.s.spec
	if len(spec.Progress) > 0 {
		p.progress(b)
	}
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
		if len(kept) == 0 && (!truncated || p.gap) {
			continue
		}
		// A chunk dropped whole still tells the reader, once per gap, by
		// an empty chunk marked truncated: output cut at a chunk boundary
		// must not look complete.
		p.gap = truncated
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
		if spec.Encoding == EncodingBinary || !utf8.Valid(kept) {
			c.Encoding = "binary"
		} else if len(kept) > 0 {
			p.s.tail.add(p.stream, kept)
		}
		p.out = append(p.out, c)
	}
	if len(p.out) > 0 {
		p.s.deliver(p.out)
	}
	p.report(false)
}

// limit takes what the output limit and the rate allow of b.
func (p *pump) limit(b []byte) ([]byte, bool) {
	truncated := false
	if limit := p.s.spec.OutputLimit; limit > 0 {
		left := limit - p.s.output.Add(int64(len(b))) + int64(len(b))
		if left < int64(len(b)) {
			left = max(left, 0)
			p.dropped += int64(len(b)) - left
			p.reason = "output limit"
			b, truncated = b[:left], true
		}
	}
	rate := p.s.spec.MaxBytesPerSecond
	if rate <= 0 {
		return b, truncated
	}
	now := time.Now()
	if p.last.IsZero() {
		p.tokens = float64(rate)
	} else {
		p.tokens = min(float64(rate), p.tokens+now.Sub(p.last).Seconds()*float64(rate))
	}
	p.last = now
	if allowed := int(p.tokens); allowed < len(b) {
		p.dropped += int64(len(b) - allowed)
		p.reason = "rate"
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
	p.s.m.publish(p.s, abi.SubjectProcessOutputThrottled, abi.ProcessOutputThrottled{
		ProcessID: p.s.id, Stream: p.stream, DroppedBytes: p.dropped,
		MaxBytesPerSecond: p.s.spec.MaxBytesPerSecond, OutputLimit: p.s.spec.OutputLimit, Reason: p.reason,
	})
	p.dropped, p.lastReport = 0, time.Now()
}

// progress runs the progress rules over the whole lines of b.
func (p *pump) progress(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if room := maxProgressLine - len(p.line); room > 0 {
				p.line = append(p.line, b[:min(room, len(b))]...)
			}
			break
		}
		line := b[:i]
		if len(p.line) > 0 {
			if room := maxProgressLine - len(p.line); room > 0 {
				p.line = append(p.line, line[:min(room, len(line))]...)
			}
			line = p.line
		}
		p.matchProgress(line)
		p.line = p.line[:0]
		b = b[i+1:]
	}
	p.progressFlush(false)
}

// matchProgress keeps the named groups of the first rule line matches.
func (p *pump) matchProgress(line []byte) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	for _, re := range p.s.spec.Progress {
		m := re.FindSubmatch(line)
		if m == nil {
			continue
		}
		vals := map[string]string{}
		for i, name := range re.SubexpNames() {
			if name != "" && m[i] != nil {
				vals[name] = string(m[i])
			}
		}
		p.pending = vals
		return
	}
}

// progressFlush publishes the newest match, at most every progressEvery
// (and whatever is pending at the end).
func (p *pump) progressFlush(final bool) {
	if final && len(p.line) > 0 {
		p.matchProgress(p.line)
		p.line = p.line[:0]
	}
	if p.pending == nil || (!final && time.Since(p.lastProgress) < progressEvery) {
		return
	}
	values := make(map[string]any, len(p.pending))
	for k, v := range p.pending {
		values[k] = v
	}
	p.s.m.publish(p.s, abi.SubjectProcessProgress, abi.ProcessProgress{ProcessID: p.s.id, Stream: p.stream, Values: values})
	p.pending, p.lastProgress = nil, time.Now()
}
