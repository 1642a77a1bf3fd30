package client_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/sdk/client"
)

// ReadPointer follows only a pointer its user alone could have written:
// each refusal beside the same pointer made right, which it follows.
func TestReadPointer(t *testing.T) {
	good := func(t *testing.T) (dir, pointer string) {
		dir = filepath.Join(t.TempDir(), "kairo")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		pointer = filepath.Join(dir, "current")
		if err := os.WriteFile(pointer, []byte("/srv/home\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir, pointer
	}
	for _, c := range []struct {
		name  string
		spoil func(t *testing.T, dir, pointer string) error
		want  string // in the error; "" for none
	}{
		{"right", func(*testing.T, string, string) error { return nil }, ""},
		{"file others may write", func(_ *testing.T, _, p string) error { return os.Chmod(p, 0o620) }, "others may write it"},
		{"folder others may write", func(_ *testing.T, d, _ string) error { return os.Chmod(d, 0o757) }, "others may write it"},
		{"a link", func(t *testing.T, _, p string) error {
			other := filepath.Join(t.TempDir(), "other")
			os.WriteFile(other, []byte("/srv/home\n"), 0o600)
			os.Remove(p)
			return os.Symlink(other, p)
		}, "too many levels of symbolic links"},
		{"a relative path", func(_ *testing.T, _, p string) error { return os.WriteFile(p, []byte("srv/home\n"), 0o600) }, "does not hold an absolute path"},
		{"too long", func(_ *testing.T, _, p string) error {
			return os.WriteFile(p, []byte("/"+strings.Repeat("a", 5000)), 0o600)
		}, "over 4096 bytes"},
		{"another user's", func(t *testing.T, _, p string) error {
			if os.Getuid() != 0 {
				t.Skip("only root can give a file away")
			}
			return os.Chown(p, 4242, 4242)
		}, "belongs to uid 4242"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, pointer := good(t)
			if err := c.spoil(t, dir, pointer); err != nil {
				t.Fatal(err)
			}
			home, err := client.ReadPointer(pointer)
			switch {
			case c.want == "" && (err != nil || home != "/srv/home"):
				t.Fatalf("ReadPointer = %q, %v; want /srv/home", home, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("ReadPointer = %q, %v; want an error with %q", home, err, c.want)
			}
		})
	}
}

// FindHome takes $KAIRO_HOME, else the folder the user's pointer names
// while a kernel listens there, else ./.kairo.
func TestFindHome(t *testing.T) {
	t.Chdir(t.TempDir())
	runtime := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", runtime)
	t.Setenv("KAIRO_HOME", "")
	t.Setenv("KAIRO_SOCKET", "")
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(runtime, "kairo"), 0o700); err != nil {
		t.Fatal(err)
	}
	pointer := client.PointerPath()
	if pointer != filepath.Join(runtime, "kairo", "current") {
		t.Fatalf("PointerPath = %q", pointer)
	}
	if err := os.WriteFile(pointer, []byte(home+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if h, p := client.FindHome(nil); h != ".kairo" || p != "" {
		t.Fatalf("nobody listens: FindHome = %q, %q; want .kairo", h, p)
	}
	l, err := net.Listen("unix", filepath.Join(home, "kernel.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if h, p := client.FindHome(nil); h != home || p != pointer {
		t.Fatalf("a kernel listens at the pointer's folder: FindHome = %q, %q; want %q, %q", h, p, home, pointer)
	}
	if s := client.SocketPath(); s != filepath.Join(home, "kernel.sock") {
		t.Fatalf("SocketPath = %q", s)
	}
	t.Setenv("KAIRO_HOME", "/elsewhere")
	if h, p := client.FindHome(nil); h != "/elsewhere" || p != "" {
		t.Fatalf("with KAIRO_HOME: FindHome = %q, %q", h, p)
	}
}
