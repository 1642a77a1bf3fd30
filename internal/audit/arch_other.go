//go:build !amd64 && !arm64

package audit

// No system call names here: the sandbox's filter has no table for this
// architecture either (a seccomp refusal is named by its number).
const auditArch = 0

const clone3 = -1

var syscallNames = map[int]string{}
