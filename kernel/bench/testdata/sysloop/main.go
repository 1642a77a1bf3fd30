// Command sysloop times cheap system calls from inside whatever confines
// it, for the sandbox benchmarks of kernel/bench. It is built static
// (CGO_ENABLED=0), so that it needs no loader and starts the same bare and
// sandboxed.
//
//	sysloop syscall N       ioctl and getppid, N of each per round
//	sysloop open N FILE     open and close of FILE, N per round
//
// It prints "name ns" lines, one per call it timed: the nanoseconds one
// call took in the fastest of a few rounds, which leaves out the rounds
// another process interrupted.
package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

const rounds = 5

func main() {
	if len(os.Args) < 3 {
		fail("usage: sysloop syscall N | sysloop open N FILE")
	}
	n, err := strconv.Atoi(os.Args[2])
	if err != nil || n <= 0 {
		fail("N must be a positive count")
	}
	switch {
	case os.Args[1] == "syscall":
		// ioctl on a descriptor that is not open fails at once with EBADF,
		// but a seccomp filter must run for it: the filter reads its
		// request argument, so the kernel cannot cache the verdict.
		report("ioctl", n, func() {
			_, _, e := syscall.RawSyscall(syscall.SYS_IOCTL, ^uintptr(0), syscall.TCGETS, 0)
			if e != syscall.EBADF {
				fail("ioctl(-1, TCGETS): want EBADF, got " + e.Error())
			}
		})
		// getppid takes no argument: the kernel's seccomp cache allows it
		// without running the filter.
		report("getppid", n, func() { syscall.RawSyscall(syscall.SYS_GETPPID, 0, 0, 0) })
	case os.Args[1] == "open" && len(os.Args) == 4:
		path, err := syscall.BytePtrFromString(os.Args[3])
		if err != nil {
			fail(err.Error())
		}
		fdcwd := -100 // AT_FDCWD
		report("open", n, func() {
			fd, _, e := syscall.RawSyscall6(syscall.SYS_OPENAT, uintptr(fdcwd), uintptr(unsafe.Pointer(path)), syscall.O_RDONLY|syscall.O_CLOEXEC, 0, 0, 0)
			if e != 0 {
				fail("open " + os.Args[3] + ": " + e.Error())
			}
			syscall.RawSyscall(syscall.SYS_CLOSE, fd, 0, 0)
		})
	default:
		fail("usage: sysloop syscall N | sysloop open N FILE")
	}
}

// report times n calls of op in each round, after a round to warm up, and
// prints the fastest round's time per call.
func report(name string, n int, op func()) {
	best := time.Duration(-1)
	for r := 0; r <= rounds; r++ {
		start := time.Now()
		for range n {
			op()
		}
		if d := time.Since(start); r > 0 && (best < 0 || d < best) {
			best = d
		}
	}
	fmt.Printf("%s %.1f\n", name, float64(best.Nanoseconds())/float64(n))
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "sysloop:", msg)
	os.Exit(1)
}
