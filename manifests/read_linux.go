package manifests

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// procSelfFD is where the descriptors of this process are opened again;
// tests point it elsewhere to try the fallback.
var procSelfFD = "/proc/self/fd/"

// openRegular opens the regular file at path for reading and returns its
// size. It first opens the path with O_PATH, which opens nothing for I/O
// (a FIFO does not block, a device driver's open is not called), checks
// with fstat that this very inode is a regular file, and only then opens
// that inode for reading through /proc/self/fd, so the path cannot be
// swapped between the check and the open.
func openRegular(path string) (*os.File, int64, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, 0, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, 0, notRegular(path, fileMode(st.Mode))
	}
	f, err := os.OpenFile(procSelfFD+strconv.Itoa(fd), os.O_RDONLY|unix.O_NOCTTY, 0)
	if errors.Is(err, os.ErrNotExist) {
		// No /proc (a bare chroot): open the path again, not blocking
		// should it now be a FIFO, and check the inode is the one just
		// checked.
		f, err = os.OpenFile(path, os.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
		if err == nil {
			var again unix.Stat_t
			if err := unix.Fstat(int(f.Fd()), &again); err != nil || again.Dev != st.Dev || again.Ino != st.Ino {
				f.Close()
				return nil, 0, &os.PathError{Op: "open", Path: path, Err: errors.New("the file changed while it was opened")}
			}
		}
	}
	if err != nil {
		return nil, 0, &os.PathError{Op: "open", Path: path, Err: errors.Unwrap(err)}
	}
	return f, st.Size, nil
}

// fileMode is the os.FileMode type bits of a stat mode.
func fileMode(m uint32) os.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		return os.ModeDir
	case unix.S_IFIFO:
		return os.ModeNamedPipe
	case unix.S_IFSOCK:
		return os.ModeSocket
	case unix.S_IFCHR:
		return os.ModeDevice | os.ModeCharDevice
	case unix.S_IFBLK:
		return os.ModeDevice
	}
	return os.ModeIrregular
}
