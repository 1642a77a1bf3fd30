package manifests

import (
	"path/filepath"
	"testing"
)

// Every home of a user shares the user's compilation cache, unless its
// kairo.toml names one.
func TestCachePath(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	c := Default()
	want := filepath.Join(xdg, "kairo", "wasm")
	for _, home := range []string{"/srv/a", "/srv/b"} {
		if got := c.CachePath(home); got != want {
			t.Errorf("CachePath(%s) = %s, want %s", home, got, want)
		}
	}
	c.Host.CacheDir = "cache"
	if got := c.CachePath("/srv/a"); got != "/srv/a/cache" {
		t.Errorf("with cache_dir = \"cache\": %s", got)
	}
	c.Host.CacheDir = "/var/cache/kairo"
	if got := c.CachePath("/srv/a"); got != "/var/cache/kairo" {
		t.Errorf("with cache_dir = \"/var/cache/kairo\": %s", got)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	c.Host.CacheDir = ""
	if got := c.CachePath("/srv/a"); got != "/srv/a/cache" {
		t.Errorf("without a user cache folder: %s", got)
	}
}
