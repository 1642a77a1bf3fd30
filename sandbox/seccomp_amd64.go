package sandbox

import "golang.org/x/sys/unix"

// auditArch is the only syscall ABI the filter lets through. A 64-bit
// process can still enter the kernel through the i386 ABI (int 0x80), whose
// syscall numbers differ; the filter kills it rather than keep a second
// table.
const auditArch = unix.AUDIT_ARCH_X86_64

// x32Bit marks a syscall number of the x32 ABI, which the kernel reports
// with the x86_64 arch and serves from its own table. The filter kills
// every number with the bit set; -1, which has it too, is never a real call.
const x32Bit = 0x40000000

// archDeniedSyscalls: direct access to I/O ports, which reaches hardware
// past every kernel check. (vm86 exists only for i386, which the arch check
// kills.)
var archDeniedSyscalls = []uint32{
	unix.SYS_IOPL,
	unix.SYS_IOPERM,
}
