//go:build !linux

package wasm

import "github.com/tetratelabs/wazero/experimental"

// guestMemory is nil here: each guest's memory is wazero's own.
var guestMemory experimental.MemoryAllocator
