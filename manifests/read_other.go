//go:build !linux

package manifests

import (
	"os"
	"syscall"
)

// openRegular opens the regular file at path for reading and returns its
// size. O_NONBLOCK keeps the open of a FIFO from waiting for a writer; the
// fstat of the opened descriptor refuses anything but a regular file.
// (On Linux, read_linux.go never opens a non-regular file at all.)
func openRegular(path string) (*os.File, int64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, notRegular(path, fi.Mode())
	}
	return f, fi.Size(), nil
}
