package wasm

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
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

// A memory no instance takes within poolKeep is given back: a plugin
// reloaded once (its new instance made while the old one ran) does not
// hold two memories for good.
func TestMemoryPoolGivesBackWhatWaits(t *testing.T) {
	defer func(k time.Duration) { poolKeep = k }(poolKeep)
	poolKeep = 20 * time.Millisecond
	var mp memoryPool
	alloc := mp.allocator()
	live, spare := alloc.Allocate(0, 1<<20), alloc.Allocate(0, 1<<20)
	spare.Reallocate(4096)
	spare.Free()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		mp.mu.Lock()
		kept := mp.free != nil
		mp.mu.Unlock()
		if !kept {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pool still keeps a memory no instance took")
		}
	}
	live.Free()
	mp.drain(true)
}

// The spans a module's data segments write are left to the next
// instantiation, which writes them again: an instance made of a memory
// its module's last instance filled with garbage starts with the very
// memory the first instance, of a fresh mapping, started with.
func TestMemoryPoolLeavesDataToInstantiation(t *testing.T) {
	ctx := context.Background()
	mod, err := testEngine.Prepare(ctx, guests["echo"], InstanceConfig{Name: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Release()
	if len(mod.mem.data) == 0 {
		t.Fatal("no data spans known for echo: the test tests nothing")
	}
	mod.mem.drain(false)
	instantiate := func() api.Module {
		t.Helper()
		g, err := mod.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, mod.mem.allocator()), mod.compiled,
			wazero.NewModuleConfig().WithName("memtest").WithStartFunctions())
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g := instantiate()
	size := g.Memory().Size()
	fresh, _ := g.Memory().Read(0, size)
	fresh = bytes.Clone(fresh)
	if _, grew := g.Memory().Grow(16); !grew {
		t.Fatal("the guest's memory did not grow")
	}
	all, _ := g.Memory().Read(0, g.Memory().Size())
	for i := range all {
		all[i] = 0xa5
	}
	g.Close(ctx)
	g = instantiate()
	defer g.Close(ctx)
	if g.Memory().Size() != size {
		t.Fatalf("the second instance's memory is %d bytes, the first's was %d", g.Memory().Size(), size)
	}
	again, _ := g.Memory().Read(0, size)
	if !bytes.Equal(again, fresh) {
		for i := range fresh {
			if again[i] != fresh[i] {
				t.Fatalf("byte %d of the reused memory is %#x; a fresh instance had %#x", i, again[i], fresh[i])
			}
		}
	}
}

func TestDataSpans(t *testing.T) {
	// A data section: active at 100 (5000 bytes), passive (3 bytes),
	// active of memory 0 at 5050 (explicit, 4000 bytes: merged with the
	// first), active at 20000 (10 bytes: too short to keep).
	seg := func(b []byte, head []byte, n int) []byte {
		b = append(b, head...)
		b = uleb(b, uint64(n))
		return append(b, make([]byte, n)...)
	}
	var body []byte
	body = uleb(body, 4)
	body = seg(body, []byte{0, 0x41, 0xe4, 0x00, 0x0b}, 5000)
	body = seg(body, []byte{1}, 3)
	body = seg(body, []byte{2, 0, 0x41, 0xba, 0x27, 0x0b}, 4000)
	body = seg(body, []byte{0, 0x41, 0xa0, 0x9c, 0x01, 0x0b}, 10)
	wasm := append(slices.Clone(wasmHeader), 11)
	wasm = uleb(wasm, uint64(len(body)))
	wasm = append(wasm, body...)
	if got, want := dataSpans(wasm), []memSpan{{100, 9050}}; !slices.Equal(got, want) {
		t.Errorf("dataSpans = %v, want %v", got, want)
	}
	// An offset from a global: nothing is known.
	body = uleb(nil, 1)
	body = seg(body, []byte{0, 0x23, 0, 0x0b}, 5000)
	wasm = append(slices.Clone(wasmHeader), 11)
	wasm = uleb(wasm, uint64(len(body)))
	wasm = append(wasm, body...)
	if got := dataSpans(wasm); got != nil {
		t.Errorf("dataSpans with a global's offset = %v, want none", got)
	}

	buf := bytes.Repeat([]byte{1}, 100)
	clearExcept(buf, []memSpan{{10, 20}, {30, 40}, {95, 200}})
	for i, b := range buf {
		in := (i >= 10 && i < 20) || (i >= 30 && i < 40) || i >= 95
		if in != (b == 1) {
			t.Fatalf("clearExcept: byte %d is %d", i, b)
		}
	}
}
