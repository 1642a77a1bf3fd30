// Package pipes makes the pipes the kernel hands a child process, with
// each end in the Go runtime's poller or out of it as the caller says.
//
// os.Pipe puts both ends in the poller; the end a child gets must be
// blocking, as a program expects its stdio, and starting the child takes
// it out of the poller again: system calls a spawn waits for. An end in
// the poller is non-blocking, so that a Close ends a Read that waits and
// read deadlines work.
package pipes

import (
	"os"

	"golang.org/x/sys/unix"
)

// Open makes a close-on-exec pipe whose two ends are named name. Its read
// end is non-blocking and in the runtime's poller when pollRead is set,
// its write end when pollWrite is; an end not named stays blocking and out
// of the poller.
func Open(name string, pollRead, pollWrite bool) (r, w *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	for i, poll := range []bool{pollRead, pollWrite} {
		if !poll {
			continue
		}
		// After pipe2 a pipe's file status flags are its access mode
		// alone, which F_SETFL keeps: O_NONBLOCK is all this sets.
		if _, err := unix.FcntlInt(uintptr(p[i]), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
			unix.Close(p[0])
			unix.Close(p[1])
			return nil, nil, os.NewSyscallError("fcntl", err)
		}
	}
	// os.NewFile puts a non-blocking descriptor in the poller and leaves a
	// blocking one out of it.
	return os.NewFile(uintptr(p[0]), name), os.NewFile(uintptr(p[1]), name), nil
}
