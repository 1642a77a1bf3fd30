package jetstream

import (
	"hash/maphash"
	"math/bits"
	"slices"
	"sort"
)

// idIndex finds the seq of a stored event by its ID, for a deduplication
// that lasts as long as the stream keeps the event. It keeps a 64-bit hash
// of each ID, not the ID: a hit is a candidate the store confirms by
// reading the stored event's ID, so two IDs of one hash never make a new
// event a duplicate. The rare ID whose hash another stored ID already has
// is kept whole in clash. Entries of events that are gone (MaxAge, an
// append undone) stay until the store is opened again; confirming finds
// them gone.
//
// Most entries are in two sorted arrays, 16 bytes an event; a map would
// take 28 to 46. New entries go to the map recent, merged into the arrays
// once it holds a quarter as many.
type idIndex struct {
	seed   maphash.Seed
	sums   []uint64 // sorted
	seqs   []uint64 // seqs[i] is the event of sums[i]; 0 once undone
	recent map[uint64]uint64
	clash  map[string]uint64
}

// idMergeMin is the fewest entries recent holds before a merge.
const idMergeMin = 4096

func newIDIndex() idIndex {
	return idIndex{seed: maphash.MakeSeed(), recent: make(map[uint64]uint64), clash: make(map[string]uint64)}
}

func (x *idIndex) sum(id string) uint64      { return maphash.String(x.seed, id) }
func (x *idIndex) sumBytes(id []byte) uint64 { return maphash.Bytes(x.seed, id) }

// find returns the seq recorded for the hash h, 0 if none, and where in
// sums it is (-1 if not there).
func (x *idIndex) find(h uint64) (uint64, int) {
	if seq, ok := x.recent[h]; ok {
		return seq, -1
	}
	if i, ok := x.search(h); ok {
		return x.seqs[i], i
	}
	return 0, -1
}

// search is slices.BinarySearch(x.sums, h) in fewer cache misses: hashes
// are spread evenly, so h's place is near len*h/2^64, within about the
// square root of len; the search widens a window around there until it
// holds h's place and searches that.
func (x *idIndex) search(h uint64) (int, bool) {
	n := len(x.sums)
	guess, _ := bits.Mul64(h, uint64(n))
	i := int(guess)
	lo, hi, step := i, i, 64
	for lo > 0 && x.sums[lo-1] >= h {
		lo = max(i-step, 0)
		step *= 2
	}
	for step = 64; hi < n && x.sums[hi] < h; step *= 2 {
		hi = min(i+step, n)
	}
	// Now h's place is in [lo, hi]: after every sum below h, at or before
	// the first one not below it.
	j, ok := slices.BinarySearch(x.sums[lo:min(hi+1, n)], h)
	return lo + j, ok
}

// candidates returns the seqs that may hold id, 0 for none: the one of
// the ID itself and the one of its hash.
func (x *idIndex) candidates(id string, h uint64) (exact, bySum uint64) {
	if len(x.clash) > 0 {
		exact = x.clash[id]
	}
	bySum, _ = x.find(h)
	return exact, bySum
}

// idUndo takes one add back out.
type idUndo struct {
	sum   uint64
	id    string // set when the add went to clash
	prev  uint64 // clash's entry before the add, 0 if none
	clash bool
}

// add records that the event of id, whose hash is h, is at seq.
func (x *idIndex) add(id string, h, seq uint64) idUndo {
	if old, _ := x.find(h); old == 0 {
		x.addSum(h, seq)
		return idUndo{sum: h}
	}
	u := idUndo{id: id, prev: x.clash[id], clash: true}
	x.clash[id] = seq
	return u
}

// addBytes is add for an ID read from a message, which becomes a string
// only when it goes to clash.
func (x *idIndex) addBytes(id []byte, seq uint64) {
	h := x.sumBytes(id)
	if old, _ := x.find(h); old == 0 {
		x.addSum(h, seq)
		return
	}
	x.clash[string(id)] = seq
}

func (x *idIndex) addSum(h, seq uint64) {
	if _, i := x.find(h); i >= 0 { // an undone entry
		x.seqs[i] = seq
		return
	}
	x.recent[h] = seq
	if len(x.recent) >= max(idMergeMin, len(x.sums)/4) {
		x.merge()
	}
}

func (x *idIndex) undo(u idUndo) {
	switch {
	case !u.clash:
		if _, ok := x.recent[u.sum]; ok {
			delete(x.recent, u.sum)
		} else if _, i := x.find(u.sum); i >= 0 {
			x.seqs[i] = 0
		}
	case u.prev == 0:
		delete(x.clash, u.id)
	default:
		x.clash[u.id] = u.prev
	}
}

// merge moves recent into the sorted arrays.
func (x *idIndex) merge() {
	add := make([]uint64, 0, len(x.recent))
	for h := range x.recent {
		add = append(add, h)
	}
	slices.Sort(add)
	n := len(x.sums) + len(add)
	sums, seqs := make([]uint64, 0, n), make([]uint64, 0, n)
	i := 0
	for _, h := range add {
		for ; i < len(x.sums) && x.sums[i] < h; i++ {
			sums, seqs = append(sums, x.sums[i]), append(seqs, x.seqs[i])
		}
		sums, seqs = append(sums, h), append(seqs, x.recent[h])
	}
	sums, seqs = append(sums, x.sums[i:]...), append(seqs, x.seqs[i:]...)
	x.sums, x.seqs = sums, seqs
	x.recent = make(map[uint64]uint64) // a cleared map keeps its size
}

// seqEntry places one message: the JetStream store's seq index is one
// entry per message, in stream order, so that a replay from a seq or a
// time starts at the right message without reading the ones before it.
type seqEntry struct {
	first  uint64 // seq of the message's first event
	stream uint64 // the message's stream sequence
	// since is the latest event time (Unix ns) of this message and every
	// one before it: a replay since t skips the messages whose since is
	// before t, whatever order the events' own times come in.
	since int64
}

type seqIndex []seqEntry

// at is the position of the message holding seq (the last one whose first
// event is at or before it), 0 if seq comes before every message.
func (x seqIndex) at(seq uint64) int {
	i := sort.Search(len(x), func(i int) bool { return x[i].first > seq })
	return max(i-1, 0)
}

// since is the position of the first message that may hold an event of
// time t or later.
func (x seqIndex) since(t int64) int {
	return sort.Search(len(x), func(i int) bool { return x[i].since >= t })
}
