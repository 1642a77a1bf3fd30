package manifests

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Without /proc the file is opened again by path, with the same refusals.
func TestOpenRegularWithoutProc(t *testing.T) {
	old := procSelfFD
	procSelfFD = filepath.Join(t.TempDir(), "no-proc") + "/"
	defer func() { procSelfFD = old }()
	good := writeSkill(t, transcode)
	if _, err := LoadSkill(good); err != nil {
		t.Fatalf("control: %v", err)
	}
	fifo := filepath.Join(t.TempDir(), "skill.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/dev/zero", fifo, t.TempDir()} {
		if _, err := LoadSkill(p); !errors.Is(err, ErrNotRegular) {
			t.Errorf("LoadSkill(%s) = %v; want ErrNotRegular", p, err)
		}
	}
	if _, err := LoadSkill(filepath.Join(t.TempDir(), "none.toml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v; want ErrNotExist", err)
	}
}
