package audit

import "golang.org/x/sys/unix"

// auditArch is the AUDIT_ARCH_* of this machine's native system calls.
const auditArch = unix.AUDIT_ARCH_AARCH64

// clone3 is the system call the sandbox's filter fails with ENOSYS on
// purpose.
const clone3 = unix.SYS_CLONE3
