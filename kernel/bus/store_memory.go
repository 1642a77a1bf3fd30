package bus

import (
	"context"
	"sort"
	"sync"

	"github.com/kairo-os/kairo/abi"
)

// DefaultRingSize is the capacity of a [MemoryStore] made with size 0.
const DefaultRingSize = 1 << 20

// MemoryStore is a bounded in-memory ring of events, for tests and ephemeral
// use. When it is full the oldest event is dropped; a reader that needed it
// gets a [*GapError].
type MemoryStore struct {
	// mu is a plain mutex, not a RWMutex: every publish takes it, and a
	// RWMutex's write lock costs twice the atomic operations; a scan holds
	// it for one page of copies at a time.
	mu    sync.Mutex
	ring  []abi.Event
	first uint64 // seq of the oldest event held; 0 when empty
	last  uint64

	// The dedup index has two parts. IDs arriving in increasing order — the
	// bus's own time-ordered IDs, nearly always — go to mono, a sorted ring
	// of (id, seq): a new ID above its newest entry cannot be a duplicate,
	// so the common publish costs one comparison, and only an ID at or
	// below it is binary-searched. Every other ID goes to byID. A map over a
	// million IDs would cost more than everything else a publish does. mono
	// holds seqs, whose IDs are in their slots of the ring: no pointers for
	// the GC to scan in every cycle, a million of them in a full ring;
	// newest is the ID of its newest entry.
	mono     []uint64
	monoHead int
	monoLen  int
	newest   string
	byID     map[string]uint64

	pos struct { // the ring index of the last seq appended (slot)
		seq uint64
		i   int
	}
}

// NewMemoryStore returns a ring holding up to size events ([DefaultRingSize]
// when size is 0).
func NewMemoryStore(size int) *MemoryStore {
	if size <= 0 {
		size = DefaultRingSize
	}
	return &MemoryStore{ring: make([]abi.Event, size), mono: make([]uint64, size), byID: make(map[string]uint64)}
}

// Describe is "memory".
func (m *MemoryStore) Describe() string { return "memory" }

// GroupCommit is false: an append to the ring is cheap enough to make
// under the bus's lock.
func (m *MemoryStore) GroupCommit() bool { return false }

// Close does nothing; the events go with the store.
func (m *MemoryStore) Close() error { return nil }

// LastSeq is the sequence number of the last event appended, 0 if none,
// whether or not the ring still holds it.
func (m *MemoryStore) LastSeq() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// Append stores evs in the ring, evicting the oldest events when it is
// full; an ID the store still remembers is a duplicate, as [Store] says.
func (m *MemoryStore) Append(evs []*abi.Event, _ [][]byte, dup []bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, ev := range evs {
		// One comparison answers the common case: an ID above the newest
		// of mono is new to mono, and byID is empty.
		above := m.monoLen == 0 || ev.ID > m.newest
		if !above || len(m.byID) > 0 {
			if seq, ok := m.lookup(ev.ID, above); ok {
				ev.Seq, dup[i] = seq, true
				continue
			}
		}
		m.last++
		ev.Seq = m.last
		slot := &m.ring[m.slot(m.last)]
		if slot.Seq != 0 { // overwriting the oldest
			m.forget(slot)
			m.first = slot.Seq + 1
		}
		*slot = *ev
		if above {
			*m.monoAt(m.monoLen) = ev.Seq
			m.monoLen++
			m.newest = ev.ID
		} else {
			m.byID[ev.ID] = ev.Seq
		}
		if m.first == 0 {
			m.first = 1
		}
	}
	return nil
}

// slot is seq's index in the ring. Appends ask for one seq after another,
// so the index is carried on rather than divided out each time.
func (m *MemoryStore) slot(seq uint64) int {
	if seq != m.pos.seq+1 {
		m.pos.i = int(seq % uint64(len(m.ring)))
	} else if m.pos.i++; m.pos.i == len(m.ring) {
		m.pos.i = 0
	}
	m.pos.seq = seq
	return m.pos.i
}

// monoAt is mono's i-th entry from its oldest, 0 <= i <= len(mono): a
// conditional subtraction, not a division, on every publish.
func (m *MemoryStore) monoAt(i int) *uint64 {
	if i += m.monoHead; i >= len(m.mono) {
		i -= len(m.mono)
	}
	return &m.mono[i]
}

// monoID is the ID of mono's i-th entry, from the ring, which holds every
// event mono has an entry for.
func (m *MemoryStore) monoID(i int) string {
	return m.ring[*m.monoAt(i)%uint64(len(m.ring))].ID
}

// lookup finds id's seq; above says id is above mono's newest entry,
// where mono cannot hold it.
func (m *MemoryStore) lookup(id string, above bool) (uint64, bool) {
	if len(m.byID) > 0 {
		if seq, ok := m.byID[id]; ok {
			return seq, true
		}
	}
	if above {
		return 0, false
	}
	i := sort.Search(m.monoLen, func(i int) bool { return m.monoID(i) >= id })
	if i < m.monoLen && m.monoID(i) == id {
		return *m.monoAt(i), true
	}
	return 0, false
}

// forget drops the index entry of an event leaving the ring. Events leave in
// seq order, and mono is in seq order, so its entry, if any, is the oldest.
func (m *MemoryStore) forget(ev *abi.Event) {
	if m.monoLen > 0 && *m.monoAt(0) == ev.Seq {
		*m.monoAt(0) = 0
		if m.monoHead++; m.monoHead == len(m.mono) {
			m.monoHead = 0
		}
		m.monoLen--
		return
	}
	delete(m.byID, ev.ID)
}

// readRun appends to dst, up to its capacity, the events from seq next
// on whose subject p matches, reading at most ringRun slots under the lock
// a publish takes. It returns dst, the seq after the last slot read, and
// the last seq appended; a *GapError when next is no longer held.
func (m *MemoryStore) readRun(next uint64, p *abi.Pattern, dst []abi.Event) ([]abi.Event, uint64, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	last := m.last
	if next > last {
		return dst, next, last, nil
	}
	if m.first > next {
		return dst, next, last, &GapError{From: next, To: m.first - 1}
	}
	end := min(last, next+ringRun-1)
	n := uint64(len(m.ring))
	i := next % n
	for ; next <= end && len(dst) < cap(dst); next++ {
		if ev := &m.ring[i]; p.Match(ev.Type) {
			dst = append(dst, *ev)
		}
		if i++; i == n {
			i = 0
		}
	}
	return dst, next, last, nil
}

// Scan reads under the lock in pages so that appends are not held up
// for the length of a long replay.
func (m *MemoryStore) Scan(ctx context.Context, q Query, fn func(*abi.Event) error) error {
	const page = 1024
	next := max(q.FromSeq, 1)
	out := NewHandout(q, fn)
	buf := make([]abi.Event, 0, page)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		buf = buf[:0]
		m.mu.Lock()
		if m.first > next && next <= m.last {
			gap := &GapError{From: next, To: m.first - 1}
			m.mu.Unlock()
			return gap
		}
		hi := m.last
		if q.ToSeq != 0 && q.ToSeq < hi {
			hi = q.ToSeq
		}
		n := uint64(len(m.ring))
		for ; next <= hi && len(buf) < page; next++ {
			ev := &m.ring[next%n]
			if q.MatchMeta(ev) {
				buf = append(buf, *ev)
			}
		}
		m.mu.Unlock()
		if err := out.Hand(buf); err != nil {
			if err == ErrStop {
				return nil
			}
			return err
		}
		if next > hi {
			return nil
		}
	}
}
