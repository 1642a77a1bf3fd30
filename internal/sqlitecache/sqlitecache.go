// Package sqlitecache sizes the memory SQLite holds for Kairo's stores
// (events.db, memory.db): a page cache per connection sized to the machine
// within a fixed cap, no memory map, and idle connections closed, so that
// a daemon's resident memory does not follow the size of its files. Why:
// docs/RATIONALE.md#sqlite-page-caches.
package sqlitecache

import (
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// MinCacheBytes is the least page cache a connection gets: a cache is
	// 1/4096 of physical memory, within MinCacheBytes and MaxCacheBytes.
	MinCacheBytes = 512 << 10
	// MaxCacheBytes caps one connection's page cache, whatever the machine:
	// the two stores' eleven connections together stay near 11 MiB, which
	// a daemon that idles under 40 MiB can afford. The kernel's page cache
	// holds the file; SQLite's saves only the decoding of hot pages.
	MaxCacheBytes = 1 << 20
	// cacheShare is the fraction of physical memory one connection's cache
	// may take: 2 GiB of RAM gives the minimum, 4 GiB the cap.
	cacheShare = 4096

	// MaxReaders bounds a store's reader connections, each with a cache of
	// its own.
	MaxReaders = 4
	// ReaderIdle is how long a reader connection is kept unused: closing it
	// frees its cache, so a scan's pages do not stay resident.
	ReaderIdle = 30 * time.Second
)

// CacheBytes is one connection's page cache on this machine: physical
// memory / 1024, within [MinCacheBytes, MaxCacheBytes].
func CacheBytes() int64 {
	return cacheFor(physicalMemory())
}

func cacheFor(ram uint64) int64 {
	return min(max(int64(ram/cacheShare), MinCacheBytes), MaxCacheBytes)
}

// physicalMemory is the machine's RAM; 0 when the kernel does not say,
// which gives the minimum cache.
func physicalMemory() uint64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}

// Pragmas are the DSN parameters (each "&_pragma=…", for a DSN that
// already has a "?") that give a connection CacheBytes of page cache and no
// memory map: with a map, every page a scan touches counts in the
// process's resident memory until the map goes.
func Pragmas() string {
	return "&_pragma=cache_size(-" + strconv.FormatInt(CacheBytes()>>10, 10) + ")&_pragma=mmap_size(0)"
}
