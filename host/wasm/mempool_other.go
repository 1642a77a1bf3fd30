//go:build !linux

package wasm

import "github.com/tetratelabs/wazero/experimental"

// memoryPool is nothing here: each guest's memory is wazero's own.
type memoryPool struct{}

func (mp *memoryPool) allocator() experimental.MemoryAllocator { return guestMemory }

func (mp *memoryPool) drain(closed bool) {}

func (mp *memoryPool) written([]memSpan) {}
