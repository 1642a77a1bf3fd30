package console_test

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/internal/console"
)

func TestToken(t *testing.T) {
	home := t.TempDir()
	tok, err := console.LoadToken(home)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := hex.DecodeString(tok); err != nil || len(b) != 32 {
		t.Fatalf("token %q: want 32 bytes of hex", tok)
	}
	path := filepath.Join(home, console.TokenFile)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the token file: %v, %v; want mode 0600", fi.Mode(), err)
	}
	again, err := console.LoadToken(home)
	if err != nil || again != tok {
		t.Fatalf("the second start: %q, %v; want the same token", again, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := console.LoadToken(home); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a token file of mode 0644: %v; want a refusal that says chmod 600", err)
	}
	os.Chmod(path, 0o600)
	if os.Getuid() == 0 {
		// Another user's file, even of mode 0600, is refused.
		if err := os.Chown(path, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if _, err := console.LoadToken(home); err == nil || !strings.Contains(err.Error(), "belongs to uid 12345") {
			t.Fatalf("another user's token file: %v", err)
		}
		os.Chown(path, 0, 0)
	}

	// A link, even to a good file, is refused.
	other := t.TempDir()
	if err := os.Symlink(path, filepath.Join(other, console.TokenFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := console.LoadToken(other); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("a linked token file: %v", err)
	}
	// Garbage is refused, not used.
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, console.TokenFile), []byte("secret\n"), 0o600)
	if _, err := console.LoadToken(bad); err == nil || !strings.Contains(err.Error(), "hex digits") {
		t.Fatalf("a token file of garbage: %v", err)
	}
}
