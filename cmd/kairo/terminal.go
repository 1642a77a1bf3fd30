package main

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// The terminal is handled with golang.org/x/sys/unix, which the module
// already needs, rather than golang.org/x/term, a second module for the
// same three ioctls.

// isTerminal reports whether fd is a terminal.
func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}

// termSize is the terminal's window size; ok is false when fd is not a
// terminal or reports no size.
func termSize(fd int) (cols, rows uint16, ok bool) {
	ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 || ws.Row == 0 {
		return 0, 0, false
	}
	return ws.Col, ws.Row, true
}

// terminal is kairo's own terminal in raw mode, while keys go to a process
// on a PTY: that PTY's line discipline, not ours, echoes them and turns
// Ctrl-C into SIGINT.
type terminal struct {
	fd    int
	saved unix.Termios
	once  sync.Once
}

// rawTerminal puts the terminal fd in raw mode, as cfmakeraw(3) does.
func rawTerminal(fd int) (*terminal, error) {
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	t := &terminal{fd: fd, saved: *tio}
	tio.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	tio.Oflag &^= unix.OPOST
	tio.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	tio.Cflag &^= unix.CSIZE | unix.PARENB
	tio.Cflag |= unix.CS8
	tio.Cc[unix.VMIN], tio.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, tio); err != nil {
		return nil, err
	}
	return t, nil
}

// restore puts the terminal back as it was; only the first call acts, and
// a nil terminal is none.
func (t *terminal) restore() {
	if t == nil {
		return
	}
	t.once.Do(func() { unix.IoctlSetTermios(t.fd, unix.TCSETS, &t.saved) })
}

// readNoEcho writes prompt to w once the terminal f no longer echoes, then
// reads a line from f, as passwd does: at most max bytes, its newline
// included. A prompt shown before would let what is typed or pasted at
// once be echoed. The terminal is put back as it was after, also when ctx
// ends first (Ctrl-C).
func readNoEcho(ctx context.Context, f *os.File, w io.Writer, prompt string, max int) ([]byte, error) {
	fd := int(f.Fd())
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	saved := *tio
	tio.Lflag &^= unix.ECHO
	tio.Lflag |= unix.ICANON | unix.ISIG | unix.ECHONL
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, tio); err != nil {
		return nil, err
	}
	defer unix.IoctlSetTermios(fd, unix.TCSETS, &saved)
	io.WriteString(w, prompt)
	type line struct {
		b   []byte
		err error
	}
	done := make(chan line, 1)
	go func() { // ends with the line, or with the process
		b, err := readLine(f, max)
		done <- line{b, err}
	}()
	select {
	case l := <-done:
		return l.b, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readLine reads r a byte at a time up to its first newline, or its end,
// or max bytes.
func readLine(r io.Reader, max int) ([]byte, error) {
	var b []byte
	c := make([]byte, 1)
	for len(b) < max {
		n, err := r.Read(c)
		if n == 1 {
			b = append(b, c[0])
			if c[0] == '\n' {
				return b, nil
			}
		}
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}
