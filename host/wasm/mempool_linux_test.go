package wasm

import (
	"bytes"
	"testing"
)

// A memory back from a closed instance is the next instance's, as fresh as
// a new one: every byte the last guest had is zero again, the part kept
// resident and the part given back alike.
func TestMemoryPoolGivesFreshMemory(t *testing.T) {
	var mp memoryPool
	const max = 64 << 20
	alloc := mp.allocator()
	for _, used := range []int{1 << 20, poolClearBytes + 3<<20} {
		m := alloc.Allocate(0, max)
		buf := m.Reallocate(uint64(used))
		for i := range buf {
			buf[i] = 0xa5
		}
		m.Free()
		again := alloc.Allocate(0, max)
		if again != m {
			t.Fatalf("used %d: the pool made a new mapping", used)
		}
		got := again.Reallocate(uint64(used) + 4096)
		if i := bytes.IndexFunc(got, func(r rune) bool { return r != 0 }); i >= 0 {
			t.Fatalf("used %d: byte %d of the reused memory is not zero", used, i)
		}
		again.Free()
	}
	// Another size is another mapping; one is kept at most; drained, none.
	other := alloc.Allocate(0, max/2)
	if other == mp.free {
		t.Fatal("a mapping of another size was reused")
	}
	other.Free()
	mp.drain(true)
	if mp.free != nil {
		t.Fatal("a drained pool keeps a mapping")
	}
	m := alloc.Allocate(0, max)
	m.Free()
	if mp.free != nil {
		t.Fatal("a closed pool keeps a mapping")
	}
}
