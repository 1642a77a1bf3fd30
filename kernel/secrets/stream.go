package secrets

// Stream masks one output stream (a process's stdout) that arrives in
// chunks: a value split across two chunks is masked as if it had come in
// one. Write holds back only the end of what it read that more bytes
// could make a match of, at most the longest form of a value less a byte;
// Flush gives it back, masked, when the stream ends. A Stream is used by
// one goroutine at a time; the Masker it reads may gain values meanwhile.
type Stream struct {
	m    *Masker
	held []byte // the bytes a future match may start in
	sent int    // how many of held were sent already, masked: a region that may grow
}

// Stream starts masking a stream.
func (m *Masker) Stream() *Stream { return &Stream{m: m} }

// Write is p, after what was held back, masked and ready to send, less
// what it now holds back. It is p itself when nothing was held, nothing
// matched and nothing is held; else a new slice. Either stays valid: the
// Stream keeps no reference to it.
func (s *Stream) Write(p []byte) []byte {
	mt := s.m.index()
	b := p
	if len(s.held) > 0 {
		s.held = append(s.held, p...)
		b = s.held
	}
	if mt == nil {
		return s.release(b, nil, len(b), len(b))
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
	return s.release(b, rs, cut, hold)
}

// release returns b[s.sent:cut] masked by rs and keeps b[hold:] (hold is
// at most cut), noting how much of it is sent.
func (s *Stream) release(b []byte, rs []region, cut, hold int) []byte {
	var out []byte
	switch {
	case cut <= s.sent: // all of it sent before, in a region that has not grown
	case rs == nil && s.sent == 0 && len(s.held) == 0:
		out = b[:cut] // p's own bytes
	case rs == nil:
		out = append([]byte(nil), b[s.sent:cut]...)
	default:
		out = appendMasked(nil, b[:cut], clip(rs, cut), s.sent)
	}
	s.sent = max(cut, s.sent) - hold
	s.held = append(s.held[:0], b[hold:]...) // when b is held, moves its tail to the front
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
// The Stream starts afresh after it.
func (s *Stream) Flush() []byte {
	if len(s.held) == 0 {
		return nil
	}
	b := s.held
	var out []byte
	if mt := s.m.index(); mt != nil {
		out = appendMasked(nil, b, mt.regions(b), s.sent)
	} else {
		out = append([]byte(nil), b[s.sent:]...)
	}
	s.held, s.sent = s.held[:0], 0
	if len(out) == 0 {
		return nil
	}
	return out
}
