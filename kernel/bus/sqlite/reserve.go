package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"modernc.org/sqlite"
)

// A SQLite store keeps a reserve beside its file, PATH.reserve: space the
// store gives itself back when the disk is full. SQLite cannot even open a
// store in WAL mode without room for its shared-memory file; with the
// reserve released, a daemon on a full disk still opens its store, serves
// reads and subscriptions, refuses new events, and stops cleanly.
const reserveSize = 1 << 20

func reservePath(path string) string { return path + ".reserve" }

// freeBytes is the space left to an unprivileged writer on dir's file
// system.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// ensureReserve writes the reserve if it is missing and the disk has room
// for it and as much again; it reports whether the reserve is there.
func ensureReserve(path string) bool {
	rp := reservePath(path)
	if fi, err := os.Stat(rp); err == nil && fi.Size() >= reserveSize {
		return true
	}
	if free, err := freeBytes(filepath.Dir(path)); err != nil || free < 2*reserveSize {
		return false
	}
	f, err := os.OpenFile(rp, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return false
	}
	// Real blocks, not a hole: a sparse file would give nothing back.
	_, err = f.Write(make([]byte, reserveSize))
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err != nil {
		os.Remove(rp)
		return false
	}
	return true
}

// Open opens (creating if needed) the event store at path. On a
// full disk it releases the store's reserve and opens it refusing new
// events until space is freed.
func Open(path string, opts Config) (*Store, error) {
	s, err := openSQLiteFile(path, opts)
	if err != nil && wantsRoom(err) {
		if rerr := os.Remove(reservePath(path)); rerr == nil {
			if s, err = openSQLiteFile(path, opts); err == nil {
				s.full.Store(true)
				return s, nil
			}
		}
	}
	if err != nil {
		if wantsRoom(err) {
			return nil, fmt.Errorf("the disk of %s is full: the event store cannot even be opened (SQLite needs room for its WAL and shared-memory files, and there is no reserve left to release); free some space: %w", path, err)
		}
		return nil, err
	}
	ensureReserve(path)
	return s, nil
}

// wantsRoom reports whether an open failed for want of disk space: SQLite
// says so as SQLITE_FULL, or as an I/O error sizing its shared memory.
func wantsRoom(err error) bool {
	if IsDiskFull(err) {
		return true
	}
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == 4874 // SQLITE_IOERR_SHMSIZE
}

// room refuses an append while the disk is full; once it has room again,
// the reserve is written back first. The caller holds s.mu.
func (s *Store) room() error {
	if !s.full.Load() {
		return nil
	}
	if !ensureReserve(s.path) {
		return &os.PathError{Op: "append to the event store", Path: s.path, Err: syscall.ENOSPC}
	}
	s.full.Store(false)
	return nil
}
