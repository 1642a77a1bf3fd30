//go:build !amd64 && !arm64

package sandbox

// No syscall table for this architecture: BuildFilter refuses, so a
// sandbox never runs a binary unfiltered by mistake.
const (
	auditArch = 0
	x32Bit    = 0
)

var (
	deniedSyscalls     []uint32
	archDeniedSyscalls []uint32
	argSyscalls        struct {
		clone, clone3, ioctl, personality, socket, socketpair, memfdCreate uint32
		tiocsti, tioclinux                                                 uint32
	}
)
