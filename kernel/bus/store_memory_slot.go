package bus

import (
	"errors"
	"math"
	"time"
	"unsafe"

	"github.com/kairo-os/kairo/abi"
)

// The ring's events are held with one pointer each for the garbage
// collector to follow, their data's (docs/RATIONALE.md#the-ring-holds-one-pointer-an-event):
// a slot holds an event's numbers and the lengths of its strings, whose
// bytes are appended, one event after another, to chunks of ringChunkSize
// bytes (noscan allocations); its data is the publisher's slice, as it was
// given, in MemoryStore.data. A million slots of abi.Event were 150 MB
// holding six million pointers that every GC cycle scanned, on the core
// the subscriber needs. The data is not copied: at a few hundred bytes an
// event, fresh chunks for it cost more CPU than the scan it saved.
//
// The strings an event read from the ring carries point into its chunk
// (unsafe.String), so a chunk's bytes must never change once an event is
// in it: bytes are only ever appended to a chunk's unused tail, each
// event's once, under the store's lock, before any reader can see the
// slot; a chunk none of the ring's events use any more is dropped, never
// reused, and lives on only while a reader still holds a string of it.

// ringChunkSize is the size of the chunks the ring's strings are written
// to; an event with more than ringChunkSize/4 bytes of them gets a chunk
// of its own.
// A reader that keeps one string of an event keeps its chunk, as a
// replayed event keeps its pack of the SQLite store (32 KiB at most).
const ringChunkSize = 32 << 10

// ringSlot is one event of the ring but its data. Its bytes, at off in
// chunk, are its ID, type, source, correlation ID, causation ID and host,
// in that order; abi.CheckEventLimits and the subject's bound keep each
// within a uint16 (Append refuses one that is not).
type ringSlot struct {
	seq   uint64 // 0 when the slot is empty
	wall  uint64 // Time, as time.Time holds it (timeWords)
	ext   int64
	chunk uint32 // index in MemoryStore.chunks
	off   uint32

	id, typ, source, corr, cause, host uint16
	// loc is Time's location: an index in MemoryStore.locs, or oddLoc
	// when the table is full and MemoryStore.odd has it by seq.
	loc uint16
}

// timeWords is how a time.Time is laid out (its wall, ext and loc fields),
// so that a slot keeps an event's time as it was given, its monotonic
// reading and location pointer included, without holding the pointer.
// TestRingSlotTime checks the layout against time's own comparison.
type timeWords struct {
	wall uint64
	ext  int64
	loc  *time.Location
}

// The two must have one size; a change of time.Time's breaks the build.
var (
	_ [unsafe.Sizeof(time.Time{}) - unsafe.Sizeof(timeWords{})]byte
	_ [unsafe.Sizeof(timeWords{}) - unsafe.Sizeof(time.Time{})]byte
)

// maxRingLocs bounds the table of locations; oddLoc marks a slot whose
// location did not fit in it (kept in MemoryStore.odd until it leaves).
const (
	maxRingLocs = 16
	oddLoc      = math.MaxUint16
)

// ringChunk is a chunk of event bytes and how many of the ring's events
// are in it; buf is nil when the chunk was dropped and its index is free.
type ringChunk struct {
	buf  []byte
	live int
}

var errRingEventTooLarge = errors.New("memory store: an event's string is over 65535 bytes (the bus allows 256)")

// put writes ev into the ring's slot i, its seq already set; the caller
// holds m.mu and has forgotten what the slot held. The data is kept as it
// was given.
func (m *MemoryStore) put(i int, ev *abi.Event) {
	slot := &m.ring[i]
	need := len(ev.ID) + len(ev.Type) + len(ev.Source) + len(ev.CorrelationID) + len(ev.CausationID) + len(ev.Host)
	var c uint32
	if need > ringChunkSize/4 {
		c = m.newChunk(need)
	} else {
		if o := &m.chunks[m.open]; cap(o.buf)-len(o.buf) < need {
			if o.live == 0 {
				m.dropChunk(m.open)
			}
			m.open = m.newChunk(ringChunkSize)
		}
		c = m.open
	}
	ch := &m.chunks[c]
	b := ch.buf
	*slot = ringSlot{
		seq: ev.Seq, chunk: c, off: uint32(len(b)),
		id: uint16(len(ev.ID)), typ: uint16(len(ev.Type)), source: uint16(len(ev.Source)),
		corr: uint16(len(ev.CorrelationID)), cause: uint16(len(ev.CausationID)), host: uint16(len(ev.Host)),
	}
	b = append(b, ev.ID...)
	b = append(b, ev.Type...)
	b = append(b, ev.Source...)
	b = append(b, ev.CorrelationID...)
	b = append(b, ev.CausationID...)
	ch.buf = append(b, ev.Host...)
	ch.live++
	m.data[i] = ev.Data
	t := (*timeWords)(unsafe.Pointer(&ev.Time))
	slot.wall, slot.ext = t.wall, t.ext
	slot.loc = m.locIndex(t.loc, ev.Seq)
}

// fits reports whether ev's lengths fit a slot.
func fits(ev *abi.Event) bool {
	const s = math.MaxUint16
	return len(ev.ID) <= s && len(ev.Type) <= s && len(ev.Source) <= s && len(ev.CorrelationID) <= s &&
		len(ev.CausationID) <= s && len(ev.Host) <= s
}

// newChunk returns the index of a fresh chunk of capacity size.
func (m *MemoryStore) newChunk(size int) uint32 {
	ch := ringChunk{buf: make([]byte, 0, size)}
	if n := len(m.freeChunks); n > 0 {
		i := m.freeChunks[n-1]
		m.freeChunks = m.freeChunks[:n-1]
		m.chunks[i] = ch
		return i
	}
	m.chunks = append(m.chunks, ch)
	return uint32(len(m.chunks) - 1)
}

// dropChunk lets go of chunk i: the ring no longer holds an event in it.
// Its bytes stay as they are for whoever still holds a string of them.
func (m *MemoryStore) dropChunk(i uint32) {
	m.chunks[i] = ringChunk{}
	m.freeChunks = append(m.freeChunks, i)
}

// release is forget's part for the slot's bytes and location.
func (m *MemoryStore) release(slot *ringSlot) {
	ch := &m.chunks[slot.chunk]
	if ch.live--; ch.live == 0 && slot.chunk != m.open {
		m.dropChunk(slot.chunk)
	}
	if slot.loc == oddLoc {
		delete(m.odd, slot.seq)
	}
}

// locIndex is loc's index in the table of locations, adding it if there
// is room; else oddLoc, with loc kept by seq.
func (m *MemoryStore) locIndex(loc *time.Location, seq uint64) uint16 {
	for i, l := range m.locs {
		if l == loc {
			return uint16(i)
		}
	}
	if len(m.locs) < maxRingLocs {
		m.locs = append(m.locs, loc)
		return uint16(len(m.locs) - 1)
	}
	if m.odd == nil {
		m.odd = make(map[uint64]*time.Location)
	}
	m.odd[seq] = loc
	return oddLoc
}

// idOf is the ID of the event in slot; the caller holds m.mu.
func (m *MemoryStore) idOf(slot *ringSlot) string {
	return chunkString(m.chunks[slot.chunk].buf, slot.off, slot.id)
}

// typeOf is the subject of the event in slot; the caller holds m.mu.
func (m *MemoryStore) typeOf(slot *ringSlot) string {
	return chunkString(m.chunks[slot.chunk].buf, slot.off+uint32(slot.id), slot.typ)
}

// event is the event in the ring's slot i as it was appended; the caller
// holds m.mu. Its strings are its chunk's bytes, which never change.
func (m *MemoryStore) event(i uint64) abi.Event {
	slot := &m.ring[i]
	b, off := m.chunks[slot.chunk].buf, slot.off
	next := func(n uint16) string {
		s := chunkString(b, off, n)
		off += uint32(n)
		return s
	}
	ev := abi.Event{Seq: slot.seq}
	ev.ID = next(slot.id)
	ev.Type = next(slot.typ)
	ev.Source = next(slot.source)
	ev.CorrelationID = next(slot.corr)
	ev.CausationID = next(slot.cause)
	ev.Host = next(slot.host)
	ev.Data = m.data[i]
	t := timeWords{wall: slot.wall, ext: slot.ext}
	if slot.loc == oddLoc {
		t.loc = m.odd[slot.seq]
	} else {
		t.loc = m.locs[slot.loc]
	}
	ev.Time = *(*time.Time)(unsafe.Pointer(&t))
	return ev
}

// chunkString is the n bytes of b at off, as a string that shares them.
func chunkString(b []byte, off uint32, n uint16) string {
	if n == 0 {
		return ""
	}
	return unsafe.String(&b[off:][0], int(n))
}
