package sandbox

import "golang.org/x/sys/unix"

// auditArch is the only syscall ABI the filter lets through; 32-bit arm
// (compat) processes report AUDIT_ARCH_ARM and are killed.
const auditArch = unix.AUDIT_ARCH_AARCH64

// x32Bit is zero: arm64 has no second ABI hidden in the syscall number.
const x32Bit = 0

// archDeniedSyscalls is empty: arm64 has no port I/O or vm86 calls.
var archDeniedSyscalls []uint32
