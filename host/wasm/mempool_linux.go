package wasm

import (
	"sync"
	"syscall"
	"time"

	"github.com/tetratelabs/wazero/experimental"
)

// memoryPool keeps the linear memory of a module's last closed instance
// for its next one: a restart or a reload then finds its pages already
// mapped in, not faulted in one by one, which cost as much as a third of
// an instantiation. The memory is cleared as it comes back — the next
// instance's memory is as fresh as a new mapping's — up to poolClearBytes;
// past that it is given back to the system (MADV_DONTNEED), which makes it
// zero again. One mapping at most per module, released when the module is
// no longer held (drain).
//
// What the module's data segments write is left as it is: only an
// instance of the same module takes the memory, and its instantiation
// writes those spans again before any of its code runs, so they hold then
// what a fresh memory would. For a Go guest that is its data, some 2 MB,
// about half of what a reload cleared only to write again.
//
// A reload makes the new instance while the old one still runs
// (readyInstance), so the old one's memory comes back while another
// instance lives; it is kept for the next reload for poolKeep, then given
// back: a plugin reloaded once does not hold two memories for good.
type memoryPool struct {
	mu     sync.Mutex
	free   *pooledMemory
	closed bool
	data   []memSpan   // set once, before the first instance
	keep   *time.Timer // gives free back poolKeep after it came
}

// poolKeep is how long a memory waits in the pool for an instance: longer
// than a restart's backoff, and than a rebuild between two reloads.
var poolKeep = time.Minute

// written records the spans of memory the module's data segments write
// (dataSpans), before any instance is made.
func (mp *memoryPool) written(data []memSpan) { mp.data = data }

// poolClearBytes is how much of a returned memory is cleared and kept
// resident; a guest's start touches a few MiB.
const poolClearBytes = 16 << 20

// allocator is the memory allocator of the module's instances: the pooled
// mapping when there is one of the size asked, else a new one.
func (mp *memoryPool) allocator() experimental.MemoryAllocator {
	return experimental.MemoryAllocatorFunc(func(capacity, max uint64) experimental.LinearMemory {
		mp.mu.Lock()
		m := mp.free
		if m != nil && uint64(len(m.buf)) == max {
			mp.free = nil
			mp.mu.Unlock()
			return m
		}
		mp.mu.Unlock()
		if max > 0 && max <= 1<<32 {
			b, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE)
			if err == nil {
				return &pooledMemory{buf: b, pool: mp}
			}
		}
		return guestMemory.Allocate(capacity, max)
	})
}

// pooledMemory is a linear memory in a mapping of its maximum size, which
// goes back to its pool when the instance closes. As with mappedMemory,
// wazero frees it only when the instance closes, and the host closes an
// instance only when no call into it runs.
type pooledMemory struct {
	buf  []byte
	used int // the most the guest had
	pool *memoryPool
}

func (m *pooledMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.buf)) {
		return nil
	}
	m.used = max(m.used, int(size))
	return m.buf[:size:size]
}

func (m *pooledMemory) Free() {
	mp := m.pool
	keep := min(m.used, poolClearBytes)
	clearExcept(m.buf[:keep], mp.data)
	if m.used > keep {
		_ = syscall.Madvise(m.buf[keep:m.used], syscall.MADV_DONTNEED)
	}
	m.used = 0
	mp.mu.Lock()
	if !mp.closed && mp.free == nil {
		mp.free = m
		m = nil
		if mp.keep == nil {
			mp.keep = time.AfterFunc(poolKeep, func() { mp.drain(false) })
		} else {
			mp.keep.Reset(poolKeep)
		}
	}
	mp.mu.Unlock()
	if m != nil {
		_ = syscall.Munmap(m.buf)
	}
}

// drain gives the pooled mapping back to the system; closed, the pool keeps
// none again.
func (mp *memoryPool) drain(closed bool) {
	mp.mu.Lock()
	m := mp.free
	mp.free = nil
	mp.closed = mp.closed || closed
	if mp.closed && mp.keep != nil {
		mp.keep.Stop()
	}
	mp.mu.Unlock()
	if m != nil {
		_ = syscall.Munmap(m.buf)
	}
}
