package abi

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"
	"unsafe"
)

// Event IDs are UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then a
// random 12 bits and a 62-bit counter, both drawn afresh each millisecond,
// the counter incremented per ID (method 1 of RFC 9562 §6.2), so IDs sort by
// creation time within one process and stay unique across processes. Time
// order matters for the stores: appending to an ID index at its right edge is
// several times cheaper than inserting random keys
// (docs/RATIONALE.md#time-ordered-ids).
type idGen struct {
	mu    sync.Mutex
	arena idArena
	ms    int64
	seq   uint64 // rand_b: 62 bits
	randA [2]byte
}

var ids idGen

// NewID returns a new time-ordered event ID. Why time-ordered:
// docs/RATIONALE.md#time-ordered-ids.
func NewID() string { return NewIDAt(time.Now()) }

// NewIDAt is [NewID] for a clock reading the caller already has: the bus
// gives a report it writes later the time of what it reports.
func NewIDAt(now time.Time) string {
	var u [16]byte
	ids.mu.Lock()
	ms, seq, ra := ids.reserve(now.UnixMilli(), 1)
	b := ids.arena.take()
	ids.mu.Unlock()
	putID(&u, ms, seq, ra)
	putUUID(b, &u)
	return unsafe.String(&b[0], 36)
}

// reserve takes n consecutive counter values of millisecond ms (or of the
// generator's, if the clock went back) and returns the first; the caller
// holds g.mu.
func (g *idGen) reserve(ms int64, n uint64) (int64, uint64, [2]byte) {
	if ms > g.ms {
		g.ms = ms
		var r [10]byte
		_, _ = rand.Read(r[:])
		g.randA = [2]byte{r[0], r[1]}
		// Start in the lower half of the counter space so it never wraps
		// within a millisecond.
		g.seq = binary.BigEndian.Uint64(r[2:]) >> 3
	} else {
		g.seq++ // clock went back or same millisecond: keep counting
	}
	first := g.seq
	g.seq += n - 1
	return g.ms, first, g.randA
}

// putID lays out the UUIDv7 of millisecond ms, counter seq and rand_a ra.
func putID(u *[16]byte, ms int64, seq uint64, ra [2]byte) {
	binary.BigEndian.PutUint64(u[0:8], uint64(ms)<<16)
	u[6] = 0x70 | ra[0]&0x0f // version 7
	u[7] = ra[1]
	binary.BigEndian.PutUint64(u[8:], seq)
	u[8] = u[8]&0x3f | 0x80 // variant 10
}

// idArena hands out room for formatted IDs, 64 to an allocation instead of
// one each: the publish path is short enough that a 36-byte allocation
// shows. Each ID's bytes are written once, before its string exists, and
// never again.
type idArena []byte

func (a *idArena) take() *[36]byte {
	if len(*a) < 36 {
		*a = make([]byte, 64*36)
	}
	b := (*[36]byte)((*a)[:36:36])
	*a = (*a)[36:]
	return b
}

// IDBlock makes IDs as [NewIDAt] does, from counter values it reserves from
// the process's generator 64 at a time (or once a millisecond, whichever
// comes first), so that the generator's lock is taken once a block rather
// than once an ID. Its IDs are unique within the process as NewIDAt's are
// and strictly increasing; within one millisecond a block's IDs sort
// together, not among those other callers made meanwhile. It is not safe
// for concurrent use: its owner serialises the calls (the bus, under the
// lock it appends with). The zero value is ready.
type IDBlock struct {
	ms    int64
	seq   uint64 // the next counter value of the block
	left  uint64 // counter values left in the block
	randA [2]byte
	arena idArena
}

// idBlockLen is how many IDs an [IDBlock] reserves at once.
const idBlockLen = 64

// NewAt returns a new ID for a clock reading now.
func (k *IDBlock) NewAt(now time.Time) string {
	if ms := now.UnixMilli(); ms > k.ms || k.left == 0 {
		ids.mu.Lock()
		k.ms, k.seq, k.randA = ids.reserve(ms, idBlockLen)
		ids.mu.Unlock()
		k.left = idBlockLen
	}
	var u [16]byte
	putID(&u, k.ms, k.seq, k.randA)
	k.seq++
	k.left--
	b := k.arena.take()
	putUUID(b, &u)
	return unsafe.String(&b[0], 36)
}

// ParseUUID decodes a lower-case, hyphenated UUID, the form [NewID]
// writes, and reports whether s was one. The SQLite store keeps such IDs as
// 16-byte blobs and every other ID as text, so the mapping between the two
// is one-to-one ([FormatUUID] is its inverse).
func ParseUUID(s string, u *[16]byte) bool {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return false
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i++
			continue
		}
		hi, ok1 := lowerHex(s[i])
		lo, ok2 := lowerHex(s[i+1])
		if !ok1 || !ok2 {
			return false
		}
		u[j] = hi<<4 | lo
		j++
		i += 2
	}
	return true
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

const hexDigits = "0123456789abcdef"

// FormatUUID writes u in the canonical form [ParseUUID] reads.
func FormatUUID(u [16]byte) string {
	var s [36]byte
	putUUID(&s, &u)
	return string(s[:])
}

// putUUID writes the canonical form of u into s: each group of hex digits
// with one store, at constant offsets, so that no store is bounds-checked.
// Every publish that names no ID passes here.
func putUUID(s *[36]byte, u *[16]byte) {
	le, h := binary.LittleEndian, &hexPairs
	pair := func(i int) uint64 { return uint64(h[u[i]]) }
	le.PutUint64(s[0:], pair(0)|pair(1)<<16|pair(2)<<32|pair(3)<<48)
	le.PutUint32(s[9:], uint32(pair(4)|pair(5)<<16))
	le.PutUint32(s[14:], uint32(pair(6)|pair(7)<<16))
	le.PutUint32(s[19:], uint32(pair(8)|pair(9)<<16))
	le.PutUint64(s[24:], pair(10)|pair(11)<<16|pair(12)<<32|pair(13)<<48)
	le.PutUint32(s[32:], uint32(pair(14)|pair(15)<<16))
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
}

// hexPairs holds each byte's two hex digits, first digit in the low byte.
var hexPairs = func() (t [256]uint16) {
	for i := range t {
		t[i] = uint16(hexDigits[i>>4]) | uint16(hexDigits[i&0x0f])<<8
	}
	return t
}()
