package sqlite

import (
	"fmt"
	"sync"
	"unsafe"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"
)

// readaheadVFS is the name of the VFS a long scan's packConn opens the
// store with: the default unix VFS, except that a read of the main
// database file is served from the aligned window of readaheadBytes around
// it, read in one pread. SQLite reads a pack's overflow pages one pread of
// a page each (about 8 a pack, in near order): on the 2-core machines
// Kairo is measured on, a pread's entry and exit cost more than its copy,
// and the preads were a fifth of a replay's CPU. A window the file does
// not fill whole (its end), or whose read fails, is not kept: the read
// goes to the base VFS as asked, which returns what it returns without
// the readahead (a short read, an I/O error that ExplainDamage names).
//
// A window holds bytes of the main file alone (not of its WAL), and only
// within one read transaction: SQLite takes or releases a lock (xLock,
// xUnlock, xShmLock) between transactions, and each of them drops the
// window. Within one, no page a reader reads from the main file changes:
// a checkpoint writes into it only pages whose newer frames every reader's
// snapshot holds, and those a reader reads from the WAL. SQLite's memory
// map relies on the same. Each file so opened holds one window of SQLite's
// memory, freed when it closes.
const readaheadVFS = "kairo-readahead"

// readaheadBytes is the size of a file's window: 16 pages of 4 KiB, the
// overflow pages of about two packs. Larger windows read more again at
// each chunk's new transaction, which drops the window.
const readaheadBytes = 64 << 10

var readahead struct {
	once sync.Once
	err  error
	// vfs is in SQLite's memory, as is each table of methods: its code's
	// pointer arithmetic on Go's memory fails -race's checkptr.
	vfs *sqlite3.Tsqlite3_vfs
	// base is the default VFS, which readahead's calls go to.
	base     *sqlite3.Tsqlite3_vfs
	baseOpen uintptr
	// slot is where in a file's struct its *raFile is: after the base's.
	slot uintptr

	mu sync.Mutex
	// methods is the table of methods that wraps each base table.
	methods map[uintptr]*sqlite3.Tsqlite3_io_methods
	// files keeps each open raFile reachable for the collector; SQLite's
	// file struct holds it as a uintptr.
	files map[*raFile]struct{}
}

// raFile is the state of one main database file opened through
// readaheadVFS.
type raFile struct {
	base *sqlite3.Tsqlite3_io_methods
	buf  uintptr // readaheadBytes of SQLite's memory
	off  int64   // the file offset of buf's first byte
	n    int64   // how many bytes of buf hold the file's, from off; 0: none
}

// registerReadahead registers readaheadVFS once.
func registerReadahead(tls *libc.TLS) error {
	ra := &readahead
	ra.once.Do(func() {
		base := sqlite3.Xsqlite3_vfs_find(tls, 0)
		if base == 0 {
			ra.err = fmt.Errorf("register the %s VFS: SQLite has no default VFS", readaheadVFS)
			return
		}
		ra.base = cptr[sqlite3.Tsqlite3_vfs](base)
		p := libc.Xmalloc(tls, types.Size_t(unsafe.Sizeof(sqlite3.Tsqlite3_vfs{})))
		if p == 0 {
			ra.err = fmt.Errorf("register the %s VFS: out of memory", readaheadVFS)
			return
		}
		ra.vfs = cptr[sqlite3.Tsqlite3_vfs](p)
		*ra.vfs = *ra.base
		ra.baseOpen = ra.vfs.FxOpen
		size := (uintptr(ra.vfs.FszOsFile) + 7) &^ 7
		ra.slot = size
		ra.vfs.FszOsFile = int32(size + 8)
		ra.vfs.FpNext = 0
		if ra.vfs.FzName, ra.err = libc.CString(readaheadVFS); ra.err != nil {
			return
		}
		*(*func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32)(unsafe.Pointer(&ra.vfs.FxOpen)) = raOpen
		ra.methods = make(map[uintptr]*sqlite3.Tsqlite3_io_methods)
		ra.files = make(map[*raFile]struct{})
		if rc := sqlite3.Xsqlite3_vfs_register(tls, uintptr(unsafe.Pointer(ra.vfs)), 0); rc != sqlite3.SQLITE_OK {
			ra.err = fmt.Errorf("register the %s VFS: %s (%d)", readaheadVFS, libc.GoString(sqlite3.Xsqlite3_errstr(tls, rc)), rc)
		}
	})
	return ra.err
}

// raOpen opens a file with the base VFS and, for a main database file,
// puts the readahead's methods in front of the base's.
func raOpen(tls *libc.TLS, pVfs, zName, pFile uintptr, flags int32, pOutFlags uintptr) int32 {
	ra := &readahead
	*cptr[uintptr](pFile + ra.slot) = 0
	open := *(*func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32)(unsafe.Pointer(&ra.baseOpen))
	rc := open(tls, uintptr(unsafe.Pointer(ra.base)), zName, pFile, flags, pOutFlags)
	if rc != sqlite3.SQLITE_OK || flags&sqlite3.SQLITE_OPEN_MAIN_DB == 0 {
		return rc
	}
	file := cptr[sqlite3.Tsqlite3_file](pFile)
	if file.FpMethods == 0 {
		return rc
	}
	buf := libc.Xmalloc(tls, readaheadBytes)
	if buf == 0 {
		return rc // reads go to the base, as without the readahead
	}
	f := &raFile{base: cptr[sqlite3.Tsqlite3_io_methods](file.FpMethods), buf: buf}
	ra.mu.Lock()
	m := ra.methods[file.FpMethods]
	if m == nil {
		if m = raMethods(tls, f.base); m == nil {
			ra.mu.Unlock()
			libc.Xfree(tls, buf)
			return rc // reads go to the base, as without the readahead
		}
		ra.methods[file.FpMethods] = m
	}
	ra.files[f] = struct{}{}
	ra.mu.Unlock()
	*cptr[uintptr](pFile + ra.slot) = uintptr(unsafe.Pointer(f))
	file.FpMethods = uintptr(unsafe.Pointer(m))
	return rc
}

// raMethods is base with the readahead's read and close, and with every
// method that may end a read transaction or change the file dropping the
// readahead first.
func raMethods(tls *libc.TLS, base *sqlite3.Tsqlite3_io_methods) *sqlite3.Tsqlite3_io_methods {
	p := libc.Xmalloc(tls, types.Size_t(unsafe.Sizeof(*base)))
	if p == 0 {
		return nil
	}
	m := cptr[sqlite3.Tsqlite3_io_methods](p)
	*m = *base
	*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&m.FxRead)) = raRead
	*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&m.FxClose)) = raClose
	*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&m.FxWrite)) = raWrite
	*(*func(*libc.TLS, uintptr, int64) int32)(unsafe.Pointer(&m.FxTruncate)) = raTruncate
	*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&m.FxLock)) = raLock
	*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&m.FxUnlock)) = raUnlock
	if m.FiVersion >= 2 && m.FxShmLock != 0 {
		*(*func(*libc.TLS, uintptr, int32, int32, int32) int32)(unsafe.Pointer(&m.FxShmLock)) = raShmLock
	}
	return m
}

// raOf is the raFile of pFile, opened by raOpen.
func raOf(pFile uintptr) *raFile {
	return *cptr[*raFile](pFile + readahead.slot)
}

func raRead(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	f := raOf(pFile)
	read := *(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&f.base.FxRead))
	n := int64(iAmt)
	if iOfst < f.off || iOfst+n > f.off+f.n {
		// The aligned window around the read: SQLite reads a pack's
		// overflow pages in near order (41, 43, 42, 44, ...), and a
		// long scan reads the file's pages of packs about in order.
		// Anything short of a whole window (the end of the file, an
		// error) goes to the base as asked, which says what it says
		// without the readahead.
		start := iOfst &^ (readaheadBytes - 1)
		if n <= 0 || iOfst+n > start+readaheadBytes {
			return read(tls, pFile, zBuf, iAmt, iOfst)
		}
		f.n = 0
		if read(tls, pFile, f.buf, readaheadBytes, start) != sqlite3.SQLITE_OK {
			return read(tls, pFile, zBuf, iAmt, iOfst)
		}
		f.off, f.n = start, readaheadBytes
	}
	libc.Xmemcpy(tls, zBuf, f.buf+uintptr(iOfst-f.off), uint64(n))
	return sqlite3.SQLITE_OK
}

func raClose(tls *libc.TLS, pFile uintptr) int32 {
	f := raOf(pFile)
	ra := &readahead
	ra.mu.Lock()
	delete(ra.files, f)
	ra.mu.Unlock()
	*cptr[uintptr](pFile + ra.slot) = 0
	libc.Xfree(tls, f.buf)
	f.buf, f.n = 0, 0
	// The base's close, on its own table, as the file was opened.
	cptr[sqlite3.Tsqlite3_file](pFile).FpMethods = uintptr(unsafe.Pointer(f.base))
	return (*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&f.base.FxClose)))(tls, pFile)
}

func raWrite(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	f := raOf(pFile)
	f.n = 0
	return (*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&f.base.FxWrite)))(tls, pFile, zBuf, iAmt, iOfst)
}

func raTruncate(tls *libc.TLS, pFile uintptr, size int64) int32 {
	f := raOf(pFile)
	f.n = 0
	return (*(*func(*libc.TLS, uintptr, int64) int32)(unsafe.Pointer(&f.base.FxTruncate)))(tls, pFile, size)
}

func raLock(tls *libc.TLS, pFile uintptr, lock int32) int32 {
	f := raOf(pFile)
	f.n = 0
	return (*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&f.base.FxLock)))(tls, pFile, lock)
}

func raUnlock(tls *libc.TLS, pFile uintptr, lock int32) int32 {
	f := raOf(pFile)
	f.n = 0
	return (*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&f.base.FxUnlock)))(tls, pFile, lock)
}

func raShmLock(tls *libc.TLS, pFile uintptr, ofst, n, flags int32) int32 {
	f := raOf(pFile)
	f.n = 0
	return (*(*func(*libc.TLS, uintptr, int32, int32, int32) int32)(unsafe.Pointer(&f.base.FxShmLock)))(tls, pFile, ofst, n, flags)
}
