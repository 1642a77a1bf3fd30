package memory

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync"
)

// vectorIndex holds every segment's vector in memory, normalized, in one
// contiguous slice: a query is then one pass of dot products over memory
// read in order — about n·dim multiply-adds, a few milliseconds for 100,000
// vectors of a few hundred dimensions — split across cores for large
// indexes. Exact, with no index structure to build or tune; past a few
// million vectors an approximate index (HNSW, IVF) would pay for itself.
type vectorIndex struct {
	dim  int
	ids  []int64   // segment row id of each slot
	vecs []float32 // len(ids)·dim
	bits []uint64  // len(ids)·2·words: each vector's signs (see appendSigns)
	slot map[int64]int
}

// words is how many uint64 hold a vector's signs.
func (v *vectorIndex) words() int { return 2 * ((v.dim + 63) / 64) }

// appendSigns appends the signs of vec, 64 dimensions in two words: one
// with a bit for each positive component, one for each negative one. A
// zero component (embeddings of short texts may have many) is neither.
func appendSigns(dst []uint64, vec []float32) []uint64 {
	for i := 0; i < len(vec); i += 64 {
		var pos, neg uint64
		for j, x := range vec[i:min(i+64, len(vec))] {
			switch {
			case x > 0:
				pos |= 1 << j
			case x < 0:
				neg |= 1 << j
			}
		}
		dst = append(dst, pos, neg)
	}
	return dst
}

// signAgreement is how many dimensions a and b (from appendSigns) have of
// the same sign, less those of opposite signs: the dot product of their
// sign vectors.
func signAgreement(a, b []uint64) int {
	b = b[:len(a)]
	n := 0
	for i := 0; i+1 < len(a); i += 2 {
		ap, an, bp, bn := a[i], a[i+1], b[i], b[i+1]
		n += bits.OnesCount64(ap&bp) + bits.OnesCount64(an&bn) - bits.OnesCount64(ap&bn) - bits.OnesCount64(an&bp)
	}
	return n
}

func newVectorIndex() *vectorIndex { return &vectorIndex{slot: map[int64]int{}} }

func (v *vectorIndex) len() int { return len(v.ids) }

// add stores vec (normalized, of the index's length) as id's.
func (v *vectorIndex) add(id int64, vec []float32) error {
	if v.dim == 0 {
		v.dim = len(vec)
	}
	if len(vec) != v.dim {
		return fmt.Errorf("vector of %d dimensions, the index holds %d", len(vec), v.dim)
	}
	if i, ok := v.slot[id]; ok {
		copy(v.vecs[i*v.dim:], vec)
		copy(v.bits[i*v.words():], appendSigns(nil, vec))
		return nil
	}
	v.slot[id] = len(v.ids)
	v.ids = append(v.ids, id)
	v.vecs = append(v.vecs, vec...)
	v.bits = appendSigns(v.bits, vec)
	return nil
}

// remove drops id's vector, moving the last one into its slot.
func (v *vectorIndex) remove(id int64) {
	i, ok := v.slot[id]
	if !ok {
		return
	}
	last, w := len(v.ids)-1, v.words()
	if i != last {
		v.ids[i] = v.ids[last]
		v.slot[v.ids[i]] = i
		copy(v.vecs[i*v.dim:(i+1)*v.dim], v.vecs[last*v.dim:])
		copy(v.bits[i*w:(i+1)*w], v.bits[last*w:])
	}
	v.ids = v.ids[:last]
	v.vecs = v.vecs[:last*v.dim]
	v.bits = v.bits[:last*w]
	delete(v.slot, id)
}

// hit is a segment and its score in one ranking, higher first.
type hit struct {
	id    int64
	score float64
}

// parallelFrom is the index size from which a search is split across
// cores: below it, starting goroutines costs more than it saves.
const parallelFrom = 16384

// search returns the n vectors closest to q (normalized) by cosine, best
// first: exactly below quantizeFrom vectors, else by signs then exactly.
func (v *vectorIndex) search(q []float32, n int) []hit {
	if len(v.ids) >= quantizeFrom {
		return v.searchSigns(q, n)
	}
	return v.searchExact(q, n)
}

// quantizeFrom is the index size from which search narrows by signs first.
const quantizeFrom = 20000

// oversample is how many candidates per result the sign pass keeps for the
// exact pass.
const oversample = 50

// searchSigns finds the candidates by Hamming distance between sign bits
// — a vector of 256 dimensions is 4 words, compared in a few instructions,
// so the pass reads 32 bytes a vector instead of 1 KiB — then ranks them
// by their exact cosine ("binary quantization with rescoring").
func (v *vectorIndex) searchSigns(q []float32, n int) []hit {
	qb := appendSigns(nil, q)
	w := len(qb)
	c := max(oversample*n, 256)
	cand := topK{n: c, h: make([]hit, 0, c)}
	for i := range v.ids {
		if s := float64(signAgreement(qb, v.bits[i*w:(i+1)*w])); len(cand.h) < c || s > cand.h[0].score {
			cand.offer(hit{id: int64(i), score: s}) // id: the slot, for now
		}
	}
	best := topK{n: n, h: make([]hit, 0, n)}
	for _, h := range cand.h {
		i := int(h.id)
		best.offer(hit{id: v.ids[i], score: float64(dot(q, v.vecs[i*v.dim:(i+1)*v.dim]))})
	}
	return best.sorted()
}

// searchExact compares q with every vector.
func (v *vectorIndex) searchExact(q []float32, n int) []hit {
	if len(q) != v.dim || len(v.ids) == 0 || n <= 0 {
		return nil
	}
	parts := 1
	if len(v.ids) >= parallelFrom {
		parts = min(runtime.GOMAXPROCS(0), 8, len(v.ids)/(parallelFrom/4))
	}
	if parts <= 1 {
		return v.scan(q, 0, len(v.ids), n).sorted()
	}
	tops := make([]topK, parts)
	var wg sync.WaitGroup
	per := (len(v.ids) + parts - 1) / parts
	for p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tops[p] = v.scan(q, p*per, min((p+1)*per, len(v.ids)), n)
		}()
	}
	wg.Wait()
	all := tops[0]
	for _, t := range tops[1:] {
		for _, h := range t.h {
			all.offer(h)
		}
	}
	return all.sorted()
}

// scan keeps the n best of slots [from, to).
func (v *vectorIndex) scan(q []float32, from, to, n int) topK {
	t := topK{n: n, h: make([]hit, 0, n)}
	d := v.dim
	for i := from; i < to; i++ {
		s := float64(dot(q, v.vecs[i*d:(i+1)*d]))
		if len(t.h) < n || s > t.h[0].score {
			t.offer(hit{id: v.ids[i], score: s})
		}
	}
	return t
}

// dot is the dot product of two vectors of one length, with four
// accumulators so the additions do not wait on each other.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		x, y := a[i:i+4:i+4], b[i:i+4:i+4]
		s0 += x[0] * y[0]
		s1 += x[1] * y[1]
		s2 += x[2] * y[2]
		s3 += x[3] * y[3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// topK keeps the n best hits seen, in a min-heap: the worst kept is at the
// root, so a hit that does not beat it costs one comparison.
type topK struct {
	n int
	h []hit
}

func (t *topK) offer(x hit) {
	if len(t.h) < t.n {
		t.h = append(t.h, x)
		for i := len(t.h) - 1; i > 0; {
			p := (i - 1) / 2
			if !worse(t.h[i], t.h[p]) {
				break
			}
			t.h[i], t.h[p] = t.h[p], t.h[i]
			i = p
		}
		return
	}
	if !worse(t.h[0], x) {
		return
	}
	t.h[0] = x
	t.down(0, len(t.h))
}

func (t *topK) down(i, n int) {
	for {
		l, s := 2*i+1, i
		if l < n && worse(t.h[l], t.h[s]) {
			s = l
		}
		if r := l + 1; r < n && worse(t.h[r], t.h[s]) {
			s = r
		}
		if s == i {
			return
		}
		t.h[i], t.h[s] = t.h[s], t.h[i]
		i = s
	}
}

// sorted empties the heap into a slice, best first.
func (t topK) sorted() []hit {
	for n := len(t.h) - 1; n > 0; n-- {
		t.h[0], t.h[n] = t.h[n], t.h[0]
		t.down(0, n)
	}
	return t.h
}

// worse orders hits: a lower score, or on a tie a later id, is worse, so
// rankings are deterministic.
func worse(a, b hit) bool {
	if a.score != b.score {
		return a.score < b.score
	}
	return a.id > b.id
}

// normalize scales v to unit length in place; a zero vector stays zero
// (and is then close to nothing).
func normalize(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(sum))
	for i := range v {
		v[i] *= inv
	}
}

// encodeVector is the stored form of a vector: little-endian float32s.
func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// decodeVector appends the vector stored in b to dst.
func decodeVector(dst []float32, b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return dst, fmt.Errorf("stored vector of %d bytes is not a whole number of float32s", len(b))
	}
	for i := 0; i < len(b); i += 4 {
		dst = append(dst, math.Float32frombits(binary.LittleEndian.Uint32(b[i:])))
	}
	return dst, nil
}
