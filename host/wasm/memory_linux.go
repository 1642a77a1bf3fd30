package wasm

import (
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// guestMemory backs each guest's linear memory with an anonymous mapping
// of its maximum size (its memory limit), outside the Go heap. wazero's own
// memory is a Go slice that each memory.grow reallocates and copies: a
// guest growing to its limit a MiB at a time left the host two to three
// times that limit in garbage, which the daemon's RSS kept until the next
// collections. A mapping grows in place, costs only the pages the guest
// touches, and is returned to the system when the instance closes.
var guestMemory experimental.MemoryAllocator = experimental.MemoryAllocatorFunc(func(_, max uint64) experimental.LinearMemory {
	if max > 0 && max <= 1<<32 {
		b, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE)
		if err == nil {
			return &mappedMemory{buf: b}
		}
	}
	return &heapMemory{max: max}
})

// mappedMemory is a linear memory in a mapping of its maximum size.
//
// wazero frees it only when the instance closes, and the host closes an
// instance only when no call into it runs (Plugin.stop and Plugin.Close run
// on the goroutine that made the call; the close-on-context-done fallback
// leaves freeing to that goroutine too), so nothing reads the mapping after
// it is gone.
type mappedMemory struct{ buf []byte }

func (m *mappedMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.buf)) {
		return nil
	}
	return m.buf[:size:size]
}

func (m *mappedMemory) Free() {
	if m.buf != nil {
		_ = syscall.Munmap(m.buf)
		m.buf = nil
	}
}

// heapMemory is a linear memory on the Go heap, grown as wazero grows its
// own: for when the mapping cannot be had.
type heapMemory struct {
	buf []byte
	max uint64
}

func (h *heapMemory) Reallocate(size uint64) []byte {
	if size > h.max {
		return nil
	}
	if size <= uint64(cap(h.buf)) {
		h.buf = h.buf[:size]
	} else {
		h.buf = append(h.buf, make([]byte, size-uint64(len(h.buf)))...)
	}
	return h.buf
}

func (h *heapMemory) Free() { h.buf = nil }
