package proc

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel's end of a stdio pipe waits in the runtime's poller, so that
// closing it ends a read that waits (the pump's end on exit); the child's
// end is blocking and close-on-exec, as a program expects its stdio and as
// os.Pipe's end is once started.
func TestStdioPipe(t *testing.T) {
	for _, parentReads := range []bool{true, false} {
		parent, child, err := stdioPipe("stdio", parentReads)
		if err != nil {
			t.Fatal(err)
		}
		flags := func(f *os.File) (status, fd int) {
			t.Helper()
			// Not f.Fd(): that would make it blocking.
			rc, err := f.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			rc.Control(func(d uintptr) {
				status, _ = unix.FcntlInt(d, unix.F_GETFL, 0)
				fd, _ = unix.FcntlInt(d, unix.F_GETFD, 0)
			})
			return status, fd
		}
		ps, pfd := flags(parent)
		cs, cfd := flags(child)
		if ps&unix.O_NONBLOCK == 0 {
			t.Errorf("parentReads %v: the kernel's end is blocking", parentReads)
		}
		if cs&unix.O_NONBLOCK != 0 {
			t.Errorf("parentReads %v: the child's end is non-blocking", parentReads)
		}
		if pfd&unix.FD_CLOEXEC == 0 || cfd&unix.FD_CLOEXEC == 0 {
			t.Errorf("parentReads %v: an end is not close-on-exec (kernel's %#x, child's %#x)", parentReads, pfd, cfd)
		}
		reader, writer := parent, child
		if !parentReads {
			reader, writer = child, parent
		}
		if got := ps & unix.O_ACCMODE; parentReads && got != unix.O_RDONLY || !parentReads && got != unix.O_WRONLY {
			t.Errorf("parentReads %v: the kernel's end has access mode %#x", parentReads, got)
		}
		if _, err := writer.Write([]byte("x")); err != nil {
			t.Fatalf("parentReads %v: write: %v", parentReads, err)
		}
		b := make([]byte, 4)
		if n, err := reader.Read(b); err != nil || string(b[:n]) != "x" {
			t.Fatalf("parentReads %v: read %q, %v; want x", parentReads, b[:n], err)
		}
		if parentReads {
			// A read that waits ends when its file is closed: only a file
			// in the poller does that.
			got := make(chan error, 1)
			go func() { _, err := parent.Read(b); got <- err }()
			time.Sleep(20 * time.Millisecond)
			parent.Close()
			select {
			case err := <-got:
				if !errors.Is(err, os.ErrClosed) {
					t.Errorf("the waiting read ended with %v, want os.ErrClosed", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("closing the kernel's read end did not end the read waiting on it")
			}
		} else {
			parent.Close()
		}
		child.Close()
	}
}
