package sqlite

import (
	"context"
	"fmt"
	"io"
	"strings"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/kairo-os/kairo/internal/sqlitecache"
)

// packsQuery selects the packs that reach into seqs ?3..?2: one that
// reaches ?3 starts at most packEvents-1 before it, at ?1.
const packsQuery = `SELECT first_seq, last_seq, envs FROM packs WHERE first_seq >= ? AND first_seq <= ? AND last_seq >= ? ORDER BY first_seq`

// packConn reads packs on a read-only connection of its own, through
// SQLite's C API (modernc.org/sqlite/lib) rather than database/sql's
// driver, for a long scan's worker. The driver copies each pack into a
// slice it makes, which Go zeroes first (32 KiB cleared and then
// overwritten, 6-7 % of a replay's CPU in pprof), and boxes each row's
// numbers: 50k allocations a million events. packConn copies the pack
// once into memory that is not cleared first (a strings.Builder's), and
// allocates nothing else: 12k; the replay's CPU fell by about 5 %
// (docs/RATIONALE.md#packs-of-envelopes). SQLite cannot write into Go's
// memory itself: its transpiled code's pointer arithmetic fails the
// checks of -race (checkptr). One goroutine uses a packConn.
type packConn struct {
	tls  *libc.TLS
	db   uintptr // sqlite3*
	stmt uintptr // packsQuery, prepared
}

// openPackConn opens the store's file at path read-only, with the
// readers' page cache and no memory map (docs/RATIONALE.md#sqlite-page-caches),
// through the readahead VFS (readahead.go).
func openPackConn(path string) (_ *packConn, err error) {
	c := &packConn{tls: libc.NewTLS()}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	zPath, err := libc.CString(path)
	if err != nil {
		return nil, err
	}
	defer libc.Xfree(c.tls, zPath)
	if err := registerReadahead(c.tls); err != nil {
		return nil, err
	}
	zVFS, err := libc.CString(readaheadVFS)
	if err != nil {
		return nil, err
	}
	defer libc.Xfree(c.tls, zVFS)
	pp := c.tls.Alloc(8)
	defer c.tls.Free(8)
	rc := sqlite3.Xsqlite3_open_v2(c.tls, zPath, pp, sqlite3.SQLITE_OPEN_READONLY, zVFS)
	c.db = *cptr[uintptr](pp)
	if rc != sqlite3.SQLITE_OK {
		return nil, c.err(rc)
	}
	sqlite3.Xsqlite3_busy_timeout(c.tls, c.db, 10000)
	if err := c.exec("PRAGMA query_only(1); PRAGMA mmap_size(0); PRAGMA cache_size(-" + fmt.Sprint(sqlitecache.CacheBytes()>>10) + ")"); err != nil {
		return nil, err
	}
	zQuery, err := libc.CString(packsQuery)
	if err != nil {
		return nil, err
	}
	defer libc.Xfree(c.tls, zQuery)
	if rc := sqlite3.Xsqlite3_prepare_v2(c.tls, c.db, zQuery, -1, pp, 0); rc != sqlite3.SQLITE_OK {
		return nil, c.err(rc)
	}
	c.stmt = *cptr[uintptr](pp)
	return c, nil
}

func (c *packConn) exec(sql string) error {
	z, err := libc.CString(sql)
	if err != nil {
		return err
	}
	defer libc.Xfree(c.tls, z)
	if rc := sqlite3.Xsqlite3_exec(c.tls, c.db, z, 0, 0, 0); rc != sqlite3.SQLITE_OK {
		return c.err(rc)
	}
	return nil
}

// err is the error of the last call on c's connection that returned rc.
func (c *packConn) err(rc int32) error {
	e := &libError{code: int(rc)}
	if c.db != 0 {
		e.code = int(sqlite3.Xsqlite3_extended_errcode(c.tls, c.db))
		e.msg = libc.GoString(sqlite3.Xsqlite3_errmsg(c.tls, c.db))
	} else {
		e.msg = libc.GoString(sqlite3.Xsqlite3_errstr(c.tls, rc))
	}
	return e
}

// close finalizes c's statement and closes its connection.
func (c *packConn) close() {
	if c.stmt != 0 {
		sqlite3.Xsqlite3_finalize(c.tls, c.stmt)
	}
	if c.db != 0 {
		sqlite3.Xsqlite3_close_v2(c.tls, c.db)
	}
	c.tls.Close()
}

// packs runs packsQuery with lo, hi and from and returns its rows; they
// must be closed before the next call.
func (c *packConn) packs(ctx context.Context, lo, hi, from int64) packRows {
	for i, v := range []int64{lo, hi, from} {
		sqlite3.Xsqlite3_bind_int64(c.tls, c.stmt, int32(i+1), v)
	}
	return &libPackRows{c: c, ctx: ctx}
}

// libPackRows are the rows of a packConn's query.
type libPackRows struct {
	c   *packConn
	ctx context.Context
}

func (r *libPackRows) next() (first, last int64, blob []byte, ok bool, err error) {
	if err := r.ctx.Err(); err != nil {
		return 0, 0, nil, false, err
	}
	c := r.c
	switch rc := sqlite3.Xsqlite3_step(c.tls, c.stmt); rc {
	case sqlite3.SQLITE_ROW:
	case sqlite3.SQLITE_DONE:
		return 0, 0, nil, false, io.EOF
	default:
		return 0, 0, nil, false, c.err(rc)
	}
	first = sqlite3.Xsqlite3_column_int64(c.tls, c.stmt, 0)
	last = sqlite3.Xsqlite3_column_int64(c.tls, c.stmt, 1)
	if sqlite3.Xsqlite3_column_type(c.tls, c.stmt, 2) != sqlite3.SQLITE_BLOB {
		return first, last, nil, false, nil
	}
	p := sqlite3.Xsqlite3_column_blob(c.tls, c.stmt, 2)
	n := int(sqlite3.Xsqlite3_column_bytes(c.tls, c.stmt, 2))
	if p == 0 || n == 0 {
		return first, last, nil, true, nil
	}
	// A Builder grows into memory Go does not clear; the pack is never
	// written again once copied, so a slice of the string's bytes is as
	// safe as the string (the events' strings alias it anyway).
	var b strings.Builder
	b.Grow(n)
	b.Write(unsafe.Slice(cptr[byte](p), n))
	s := b.String()
	return first, last, unsafe.Slice(unsafe.StringData(s), n), true, nil
}

// close resets the statement, which ends its read transaction: a scan
// holds no snapshot between its chunks.
func (r *libPackRows) close() {
	sqlite3.Xsqlite3_reset(r.c.tls, r.c.stmt)
}

// cptr reads the value at p, memory of SQLite's allocator (outside Go's
// heap), as a T.
func cptr[T any](p uintptr) *T {
	return *(**T)(unsafe.Pointer(&p))
}

// libError is an error of SQLite's C API on a packConn, with its extended
// result code, as the driver's *sqlite.Error has it.
type libError struct {
	code int
	msg  string
}

func (e *libError) Error() string { return fmt.Sprintf("%s (%d)", e.msg, e.code) }

// Code is the extended result code.
func (e *libError) Code() int { return e.code }
