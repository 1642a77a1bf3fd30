package bus

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"time"
)

// Event IDs are UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then a
// random 12 bits and a 62-bit counter, both drawn afresh each millisecond,
// the counter incremented per ID (method 1 of RFC 9562 §6.2), so IDs sort by creation time within one
// process and stay unique across processes. Time order matters for the
// store: appending to the ID index at its right edge is several times cheaper
// than inserting random keys.
type idGen struct {
	mu    sync.Mutex
	ms    int64
	seq   uint64 // rand_b: 62 bits
	randA [2]byte
}

var ids idGen

// NewID returns a new time-ordered event ID.
func NewID() string {
	var u [16]byte
	ids.next(&u)
	return formatUUID(u[:])
}

func (g *idGen) next(u *[16]byte) {
	g.mu.Lock()
	ms := time.Now().UnixMilli()
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
	ms, seq, ra := g.ms, g.seq, g.randA
	g.mu.Unlock()

	binary.BigEndian.PutUint64(u[0:8], uint64(ms)<<16)
	u[6] = 0x70 | ra[0]&0x0f // version 7
	u[7] = ra[1]
	binary.BigEndian.PutUint64(u[8:], seq)
	u[8] = u[8]&0x3f | 0x80 // variant 10
}

// parseCanonicalUUID decodes a lower-case, hyphenated UUID. The SQLite store
// keeps such IDs as 16-byte blobs and every other ID as text, so the mapping
// between the two is one-to-one.
func parseCanonicalUUID(s string, u *[16]byte) bool {
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

func formatUUID(b []byte) string {
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:16])
	return string(s[:])
}
