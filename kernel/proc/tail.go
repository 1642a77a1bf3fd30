package proc

import (
	"bytes"
	"sync"
	"unicode/utf8"

	"github.com/kairo-os/kairo/abi"
)

// tail keeps the last lines a session wrote, both streams in the order
// the pumps handed them over, for its exit event and for an attach after
// the exit: what a person asks first about a process that ended is what
// it said last. Output spliced past the kernel's memory is not seen.
type tail struct {
	mu    sync.Mutex // the two pumps of a session add at once
	lines []abi.OutputLine
	part  map[string][]byte // by stream, a line not yet ended
	count int               // every line, kept or not
}

// add takes one chunk of stream. It looks only at the chunk's last
// KeptLines+1 line ends: a chunk of many lines costs a count, not a copy.
func (t *tail) add(stream string, b []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := bytes.Count(b, []byte{'\n'})
	t.count += n
	if n > abi.KeptLines {
		// Skip to the line end before the last KeptLines lines.
		cut := len(b)
		for range abi.KeptLines + 1 {
			cut = bytes.LastIndexByte(b[:cut], '\n')
		}
		b = b[cut+1:]
		delete(t.part, stream)
	}
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break
		}
		line := b[:i]
		if p := t.part[stream]; len(p) > 0 {
			line = append(p, line...)
			delete(t.part, stream)
		}
		t.keep(stream, line)
		b = b[i+1:]
	}
	if len(b) > 0 {
		if t.part == nil {
			t.part = map[string][]byte{}
		}
		p := t.part[stream]
		if room := abi.KeptLineBytes + 1 - len(p); room > 0 {
			t.part[stream] = append(p, b[:min(room, len(b))]...)
		}
	}
}

// keep adds one whole line.
func (t *tail) keep(stream string, line []byte) {
	if len(t.lines) == abi.KeptLines {
		copy(t.lines, t.lines[1:])
		t.lines = t.lines[:len(t.lines)-1]
	}
	t.lines = append(t.lines, abi.OutputLine{Stream: stream, Text: cutLine(line)})
}

// last is the kept lines, an unfinished last line of each stream counted
// as a line, and how many lines were written in all.
func (t *tail) last() ([]abi.OutputLine, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]abi.OutputLine(nil), t.lines...)
	count := t.count
	for _, stream := range []string{"stdout", "stderr"} {
		if p := t.part[stream]; len(p) > 0 {
			out = append(out, abi.OutputLine{Stream: stream, Text: cutLine(p)})
			count++
		}
	}
	if len(out) > abi.KeptLines {
		out = out[len(out)-abi.KeptLines:]
	}
	return out, count
}

// cutLine is a line as kept: without its "\r", cut at KeptLineBytes on a
// rune boundary.
func cutLine(p []byte) string {
	p = bytes.TrimRight(p, "\r")
	if len(p) <= abi.KeptLineBytes {
		return string(p)
	}
	n := abi.KeptLineBytes
	for n > 0 && !utf8.RuneStart(p[n]) {
		n--
	}
	return string(p[:n]) + "…"
}
