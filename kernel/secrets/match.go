package secrets

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
)

// How the matcher finds every pattern in one pass that mostly skips.
//
// Every pattern is at least minLen bytes long, so an occurrence covers
// minLen consecutive bytes of the text, and the text's 4-byte windows
// ("grams") that start at a multiple of stride = minLen-3 include one that
// lies wholly inside the occurrence's first minLen bytes, at an offset
// below stride. The matcher puts each pattern's grams at offsets 0 to
// stride-1 in a bitset (hashed) and in a map (exact), and reads the text
// one gram every stride bytes: a 4-byte load, a multiply and a bit test.
// Only a gram whose bit is set is looked up in the map, and only the
// patterns the map names are compared, at the start the offset gives.
// With secrets of 32 bytes the stride is 29.

// gram is the width of the windows the filter hashes.
const gram = 4

// maxStride bounds the grams of a pattern the filter holds, whatever its
// length.
const maxStride = 64

// Bounds of the filter, in bits: about 32 bits a gram between them, so a
// gram of text not in any pattern finds its bit set about once in 32.
const (
	minFilterBits = 1 << 12
	maxFilterBits = 1 << 23
)

// hashMul is the multiplier of Fibonacci hashing for 32 bits.
const hashMul = 0x9E3779B1

// pattern is one form of one value.
type pattern struct {
	b    []byte
	name string // the secret whose value it is
}

// ref is a pattern whose gram at off is the one looked up.
type ref struct {
	pat int32
	off int32
}

// matcher finds the patterns of a Masker. It is built whole by Add and
// never changed after, so Mask reads it without a lock.
type matcher struct {
	pats   []pattern
	minLen int
	maxLen int
	stride int
	shift  uint32   // (gram*hashMul) >> shift is a bit of filter
	filter []uint64 // the grams at offsets below stride, hashed
	refs   map[uint32][]ref
	heads  map[uint32][]int32 // the patterns by their first gram, for Stream
	// starts holds the patterns' first 1, 2 and 3 bytes, for Stream:
	// each hashed to one of prefixBits bits. A false hit holds a few
	// bytes back until the next write, which is safe.
	starts []uint64
}

// prefixBits is the size of matcher.starts.
const (
	prefixLog  = 18
	prefixBits = 1 << prefixLog
)

// newMatcher indexes pats, each at least gram bytes long; nil for none.
func newMatcher(pats []pattern) *matcher {
	if len(pats) == 0 {
		return nil
	}
	m := &matcher{pats: pats, minLen: len(pats[0].b), refs: map[uint32][]ref{}, heads: map[uint32][]int32{}}
	for _, p := range pats {
		m.minLen = min(m.minLen, len(p.b))
		m.maxLen = max(m.maxLen, len(p.b))
	}
	m.stride = min(m.minLen-gram+1, maxStride)
	n := len(pats) * m.stride
	size := max(minFilterBits, min(maxFilterBits, 1<<bits.Len(uint(32*n))))
	m.shift = uint32(32 - bits.TrailingZeros(uint(size)))
	m.filter = make([]uint64, size/64)
	m.starts = make([]uint64, prefixBits/64)
	for i, p := range pats {
		for off := range m.stride {
			g := binary.LittleEndian.Uint32(p.b[off:])
			h := g * hashMul >> m.shift
			m.filter[h>>6] |= 1 << (h & 63)
			m.refs[g] = append(m.refs[g], ref{int32(i), int32(off)})
		}
		m.heads[binary.LittleEndian.Uint32(p.b)] = append(m.heads[binary.LittleEndian.Uint32(p.b)], int32(i))
		for k := 1; k < gram; k++ {
			h := prefixHash(p.b[:k])
			m.starts[h>>6] |= 1 << (h & 63)
		}
	}
	return m
}

// prefixHash is a bit of matcher.starts for the first 1 to 3 bytes of b
// (b is not empty): the bytes and their count, hashed.
func prefixHash(b []byte) uint32 {
	var k uint32
	switch len(b) {
	case 1:
		k = 1<<24 | uint32(b[0])
	case 2:
		k = 2<<24 | uint32(b[0]) | uint32(b[1])<<8
	default:
		k = 3<<24 | uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
	}
	return k * hashMul >> (32 - prefixLog)
}

// probe is the first position at or after i, a multiple of stride, whose
// gram's bit is set; -1 when there is none. It is the whole cost of text
// that holds no secret.
func (m *matcher) probe(b []byte, i int) int {
	f, shift, stride := m.filter, m.shift, m.stride
	// Four grams a round, their filter words loaded independently, so
	// the loads overlap; the round that hits is read again one by one.
	for ; i+3*stride+gram <= len(b); i += 4 * stride {
		h0 := binary.LittleEndian.Uint32(b[i:]) * hashMul >> shift
		h1 := binary.LittleEndian.Uint32(b[i+stride:]) * hashMul >> shift
		h2 := binary.LittleEndian.Uint32(b[i+2*stride:]) * hashMul >> shift
		h3 := binary.LittleEndian.Uint32(b[i+3*stride:]) * hashMul >> shift
		if (f[h0>>6]>>(h0&63)|f[h1>>6]>>(h1&63)|f[h2>>6]>>(h2&63)|f[h3>>6]>>(h3&63))&1 != 0 {
			break
		}
	}
	for ; i+gram <= len(b); i += stride {
		h := binary.LittleEndian.Uint32(b[i:]) * hashMul >> shift
		if f[h>>6]&(1<<(h&63)) != 0 {
			return i
		}
	}
	return -1
}

// region is a run of b to mask: the union of matches that overlap, and
// the names of their secrets in the order they start.
type region struct {
	start, end int
	names      []string
}

// regions is every region of b, in order; nil when b holds no pattern.
func (m *matcher) regions(b []byte) []region {
	var out []region
	var found []match
	for i := m.probe(b, 0); i >= 0; i = m.probe(b, i+m.stride) {
		found = m.matchesAt(b, i, found[:0])
		for _, f := range found {
			out = fold(out, f)
		}
	}
	return out
}

// any reports whether b holds a pattern.
func (m *matcher) any(b []byte) bool {
	var found []match
	for i := m.probe(b, 0); i >= 0; i = m.probe(b, i+m.stride) {
		if found = m.matchesAt(b, i, found[:0]); len(found) > 0 {
			return true
		}
	}
	return false
}

// match is one pattern found in b.
type match struct {
	start, end int
	name       string
}

// matchesAt appends to dst the patterns of b that start where the gram at
// i lies at an offset below stride, sorted by start, the longest first,
// then in the order of the patterns.
func (m *matcher) matchesAt(b []byte, i int, dst []match) []match {
	for _, r := range m.refs[binary.LittleEndian.Uint32(b[i:])] {
		p := m.pats[r.pat]
		s := i - int(r.off)
		if s >= 0 && s+len(p.b) <= len(b) && bytes.Equal(b[s:s+len(p.b)], p.b) {
			dst = append(dst, match{s, s + len(p.b), p.name})
		}
	}
	slices.SortStableFunc(dst, func(a, b match) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end
	})
	return dst
}

// fold adds f, which starts at or after every match folded before it, to
// the regions rs.
func fold(rs []region, f match) []region {
	if n := len(rs); n > 0 && f.start < rs[n-1].end {
		// A match inside the region adds nothing to it; one that
		// reaches past it adds its bytes and its name.
		if r := &rs[n-1]; f.end > r.end {
			r.end = f.end
			if !slices.Contains(r.names, f.name) {
				r.names = append(r.names, f.name)
			}
		}
		return rs
	}
	return append(rs, region{f.start, f.end, []string{f.name}})
}

// appendMasked appends b[from:] to dst with each region (of b, in order)
// as its markers; a region that began before from is marked again.
func appendMasked(dst, b []byte, rs []region, from int) []byte {
	at := from
	for _, r := range rs {
		if r.end <= at {
			continue
		}
		dst = append(dst, b[at:max(at, r.start)]...)
		dst = appendMarkers(dst, r.names)
		at = r.end
	}
	return append(dst, b[at:]...)
}

// appendMarkers appends ***NAME*** for each name.
func appendMarkers(dst []byte, names []string) []byte {
	for _, n := range names {
		dst = append(dst, "***"...)
		dst = append(dst, n...)
		dst = append(dst, "***"...)
	}
	return dst
}

// mask is b with its regions marked; b itself when it holds none.
func (m *matcher) mask(b []byte) []byte {
	if m == nil {
		return b
	}
	rs := m.regions(b)
	if rs == nil {
		return b
	}
	return appendMasked(make([]byte, 0, len(b)+64), b, rs, 0)
}

// canStart reports whether tail, the end of what a stream has read so
// far, is the start of a pattern longer than it: more bytes could make it
// a match.
func (m *matcher) canStart(tail []byte) bool {
	// Its first 3 bytes (or fewer) reject nearly every tail at the cost
	// of a bit test.
	h := prefixHash(tail)
	if started := m.starts[h>>6]&(1<<(h&63)) != 0; !started || len(tail) < gram {
		return started
	}
	for _, p := range m.heads[binary.LittleEndian.Uint32(tail)] {
		if pb := m.pats[p].b; len(pb) > len(tail) && bytes.HasPrefix(pb, tail) {
			return true
		}
	}
	return false
}

// holdFrom is where the part of b that more bytes could make a match
// begins: the first of the last maxLen-1 positions whose rest starts a
// pattern; len(b) when none does.
func (m *matcher) holdFrom(b []byte) int {
	for s := max(0, len(b)-m.maxLen+1); s < len(b); s++ {
		if m.canStart(b[s:]) {
			return s
		}
	}
	return len(b)
}
