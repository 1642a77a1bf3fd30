package secrets

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Bounds of what a Masker holds: values, and the bytes of those values
// (each masked in about 14 forms, so the patterns take some 15 times
// more). Past either bound, Add lets the oldest values go: first those a
// newer value of the same secret replaced, then the oldest of all.
const (
	MaxMasked      = 1024
	MaxMaskedBytes = 4 << 20
)

// Masker replaces the values it was given, in each of their forms (see
// [Masker.Add]), with ***NAME***. It is safe for concurrent use: the Mask
// methods read an index that is never changed, without a lock; the first
// of them after an Add builds a new index and swaps it in, so values added
// together (a spawn's) are indexed once. Make one with [NewMasker].
type Masker struct {
	mu      sync.Mutex  // guards entries and size, and serializes building
	entries []entry     // oldest first
	size    int         // the bytes of the entries' values
	stale   atomic.Bool // entries changed since cur was built
	cur     atomic.Pointer[matcher]
}

// entry is one value of one secret.
type entry struct {
	name  string
	value []byte
	forms [][]byte
}

// NewMasker is a Masker that masks nothing yet.
func NewMasker() *Masker { return &Masker{} }

// Add masks value, as the secret name, from now on: the value itself, its
// hex (lower and upper case), its base64 (standard and URL alphabets, each
// padded and not), the part of its base64 that is the same wherever it
// starts inside a longer encoded string, and its JSON string escaping.
// The values a name had before stay masked (a rotated secret's old value
// is still a secret), within [MaxMasked] values and [MaxMaskedBytes]
// bytes; dropped is how many old values Add let go to stay within them,
// which are no longer masked.
//
// A name that is not a [ValidName], or a value shorter than [MinLen] or
// longer than [MaxLen], is refused: nothing is masked.
func (m *Masker) Add(name string, value []byte) (dropped int, err error) {
	if err := ValidName(name); err != nil {
		return 0, err
	}
	if len(value) < MinLen || len(value) > MaxLen {
		return 0, fmt.Errorf("mask secret %s: the value is %d bytes; a secret is %d to %d bytes", name, len(value), MinLen, MaxLen)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, e := range m.entries {
		if e.name == name && bytes.Equal(e.value, value) {
			// Masked already: keep it longest, as the newest.
			m.entries = append(append(m.entries[:i:i], m.entries[i+1:]...), e)
			return 0, nil
		}
	}
	v := bytes.Clone(value)
	m.entries = append(m.entries, entry{name, v, forms(v)})
	m.size += len(v)
	for len(m.entries) > MaxMasked || m.size > MaxMaskedBytes {
		i := m.victim()
		m.size -= len(m.entries[i].value)
		m.entries = append(m.entries[:i], m.entries[i+1:]...)
		dropped++
	}
	m.stale.Store(true)
	return dropped, nil
}

// index is the matcher of the values added so far; nil for none.
func (m *Masker) index() *matcher {
	if m.stale.Load() {
		m.mu.Lock()
		if m.stale.Load() {
			m.cur.Store(newMatcher(m.patterns()))
			m.stale.Store(false)
		}
		m.mu.Unlock()
	}
	return m.cur.Load()
}

// victim is the entry to let go: the oldest one a newer value of its name
// replaced, else the oldest.
func (m *Masker) victim() int {
	newest := map[string]int{}
	for i, e := range m.entries {
		newest[e.name] = i
	}
	for i, e := range m.entries {
		if newest[e.name] != i {
			return i
		}
	}
	return 0
}

// patterns is every form of every entry, the newest entry's first: where
// two secrets share a value, the newer one's name marks it.
func (m *Masker) patterns() []pattern {
	var pats []pattern
	for i := len(m.entries) - 1; i >= 0; i-- {
		for _, f := range m.entries[i].forms {
			pats = append(pats, pattern{f, m.entries[i].name})
		}
	}
	return pats
}

// Empty reports whether the Masker masks nothing.
func (m *Masker) Empty() bool { return m.index() == nil }

// Mask is b with every masked value in it replaced by ***NAME***: b itself,
// not copied, when it holds none; else a new slice. Where two values
// overlap, the bytes of both are replaced, by the markers of both.
func (m *Masker) Mask(b []byte) []byte { return m.index().mask(b) }

// MaskString is Mask for a string: s itself when it holds no value.
func (m *Masker) MaskString(s string) string {
	mt := m.index()
	if mt == nil || s == "" {
		return s
	}
	// Read in place: regions only reads b.
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	rs := mt.regions(b)
	if rs == nil {
		return s
	}
	return string(appendMasked(make([]byte, 0, len(s)+64), b, rs, 0))
}
