package sqlite

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// dbSyncer flushes the database file to disk through SQLite's own file
// descriptor, found in /proc/self/fd. A PASSIVE checkpoint that the writer
// overtakes copies pages into the database file but leaves their sync to
// the checkpoint that completes, which holds the writer; syncing them
// before moves that wait off the append path. The store must not open a
// descriptor of its own: closing it would drop every POSIX lock the
// process holds on the file, SQLite's included.
type dbSyncer struct {
	path   string
	target string // path resolved as /proc shows it, once found
	fd     int    // SQLite's descriptor of it when last found; -1 none
}

func newDBSyncer(path string) dbSyncer { return dbSyncer{path: path, fd: -1} }

// sync flushes the file's written pages and reports whether it found the
// file to flush. Without /proc it does nothing; the completing checkpoint
// syncs in any case.
func (d *dbSyncer) sync() bool {
	if d.target == "" {
		abs, err := filepath.Abs(d.path)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			return false
		}
		d.target = abs
	}
	if d.fd < 0 || !d.is(d.fd) {
		d.fd = d.find()
	}
	// The descriptor may be closed and its number reused between the check
	// and the sync: the sync then flushes another file, which harms none.
	return d.fd >= 0 && syscall.Fsync(d.fd) == nil
}

func (d *dbSyncer) is(fd int) bool {
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	return err == nil && link == d.target
}

func (d *dbSyncer) find() int {
	f, err := os.Open("/proc/self/fd")
	if err != nil {
		return -1
	}
	names, _ := f.Readdirnames(-1)
	own := int(f.Fd())
	defer f.Close()
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err == nil && fd != own && d.is(fd) {
			return fd
		}
	}
	return -1
}
