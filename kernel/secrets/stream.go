package secrets

// Stream masks one output stream (a process's stdout) that arrives in
// chunks: a value split across two chunks is masked as if it had come in
// one. Write holds back only the end of what it read that more bytes
// could make a match of, at most the longest form of a value less a byte;
// Flush gives it back, masked, when the stream ends. A Stream is used by
// one goroutine at a time; the Masker it reads may gain values meanwhile.
type Stream struct {
	m    *Masker
	held []byte // the bytes a future match may start in: in tail, or in one of bufs
	sent int    // how many of held were sent already, masked: a region that may grow
	tail []byte // held, when it was the end of a chunk written
	// bufs join what was held to the next chunk, in turn: what Write
	// returns may be part of one, and the next Write fills the other.
	bufs [2][]byte
	turn int
}

// Stream starts masking a stream.
func (m *Masker) Stream() *Stream { return &Stream{m: m} }

// Write is p, after what was held back, masked and ready to send, less
// what it now holds back. It is p itself when nothing was held, nothing
// matched and nothing is held; else it may be the Stream's own bytes,
// valid until the next Write or Flush.
func (s *Stream) Write(p []byte) []byte {
	mt := s.m.index()
	b := p
	if len(s.held) > 0 {
		buf := append(append(s.bufs[s.turn][:0], s.held...), p...)
		s.bufs[s.turn], s.turn = buf, 1-s.turn
		b = buf
	}
	if mt == nil {
		return s.release(b, p, nil, len(b), len(b))
	}
	rs := mt.regions(b)
	hold := mt.holdFrom(b)
	// A region that begins before hold is sent whole: what may grow it
	// later starts at or after hold, and is marked then from where this
	// one ends.
	cut := hold
	for _, r := range rs {
		if r.start < hold && r.end > cut {
			cut = r.end
		}
	}
	return s.release(b, p, rs, cut, hold)
}

// release returns b[s.sent:cut] masked by rs and keeps b[hold:] (hold is
// at most cut), noting how much of it is sent. b is p, or p joined to
// what was held.
func (s *Stream) release(b, p []byte, rs []region, cut, hold int) []byte {
	var out []byte
	switch {
	case cut <= s.sent: // all of it sent before, in a region that has not grown
	case rs == nil:
		out = b[s.sent:cut] // p's own bytes, or those of a buffer of ours
	default:
		out = appendMasked(nil, b[:cut], clip(rs, cut), s.sent)
	}
	s.sent = max(cut, s.sent) - hold
	s.held = b[hold:]
	if len(b) > 0 && len(p) > 0 && &b[0] == &p[0] {
		// The caller may reuse p: keep a copy.
		s.tail = append(s.tail[:0], s.held...)
		s.held = s.tail
	}
	return out
}

// clip is the regions that begin before cut, the last one ending at cut
// at most: the rest are held back.
func clip(rs []region, cut int) []region {
	n := 0
	for n < len(rs) && rs[n].start < cut {
		n++
	}
	return rs[:n]
}

// Flush is what the Stream held back, masked; nil when it held nothing.
// It may be the Stream's own bytes, valid until the next Write. The Stream
// starts afresh after it.
func (s *Stream) Flush() []byte {
	b, sent := s.held, s.sent
	s.held, s.sent = nil, 0
	if len(b) <= sent {
		return nil
	}
	if mt := s.m.index(); mt != nil {
		if rs := mt.regions(b); rs != nil {
			return appendMasked(nil, b, rs, sent)
		}
	}
	return b[sent:]
}
