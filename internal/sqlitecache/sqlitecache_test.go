package sqlitecache

import (
	"strconv"
	"strings"
	"testing"
)

// The cache follows the machine's memory and stays within its bounds; the
// pragmas say what CacheBytes says, in KiB.
func TestCacheBytes(t *testing.T) {
	for _, c := range []struct {
		ram  uint64
		want int64
	}{
		{0, MinCacheBytes},
		{512 << 20, MinCacheBytes},
		{3 << 30, 768 << 10},
		{8 << 30, MaxCacheBytes},
		{1 << 40, MaxCacheBytes},
	} {
		if got := cacheFor(c.ram); got != c.want {
			t.Errorf("cacheFor(%d MiB) = %d, want %d", c.ram>>20, got, c.want)
		}
	}
	if n := CacheBytes(); n < MinCacheBytes || n > MaxCacheBytes {
		t.Errorf("CacheBytes() = %d, outside [%d, %d]", n, MinCacheBytes, MaxCacheBytes)
	}
	if p := Pragmas(); !strings.Contains(p, "cache_size(-"+strconv.FormatInt(CacheBytes()>>10, 10)+")") || !strings.Contains(p, "mmap_size(0)") {
		t.Errorf("Pragmas() = %q", p)
	}
}
