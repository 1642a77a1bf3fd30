package wasm

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A module path that names a device or a FIFO is refused at once, before
// anything is read; a module over the cap is refused on its size. The
// control: a small regular file is read whole.
func TestReadModuleBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "p.wasm")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.wasm")
	f, _ := os.Create(big)
	f.Truncate(MaxModuleBytes + 1)
	f.Close()
	for path, want := range map[string]string{"/dev/zero": "not a regular file", fifo: "not a regular file", big: "over the module cap"} {
		done := make(chan error, 1)
		go func() { _, err := readModule(path); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("readModule(%s) = %v, want an error with %q", path, err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("readModule(%s) hangs", path)
		}
	}
	small := filepath.Join(dir, "small.wasm")
	os.WriteFile(small, []byte("\x00asm\x01\x00\x00\x00"), 0o644)
	if b, err := readModule(small); err != nil || len(b) != 8 {
		t.Fatalf("readModule(small) = %d bytes, %v", len(b), err)
	}
}
