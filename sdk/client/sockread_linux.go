package client

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// socketReader is what the read loop reads conn through: a Unix socket is
// read with raw read system calls, which the Go scheduler does not see,
// waiting on the runtime's poller only when the socket is empty. A read
// entered the ordinary way, the first after the loop woke in an otherwise
// idle program, wakes the runtime's monitor thread, which then polls every
// 20 µs for a millisecond: on a stream of process output that is a context
// switch or more a chunk. A non-blocking read returns at once.
func socketReader(conn net.Conn) io.Reader {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return conn
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return conn
	}
	return &rawReader{rc: rc}
}

type rawReader struct{ rc syscall.RawConn }

func (r *rawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n uintptr
	var errno syscall.Errno
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			n, _, errno = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch errno {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait for the poller
			}
			return true
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, os.NewSyscallError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return int(n), nil
}
