package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// No doc comment of the module links a name that does not exist: after a
// rename, go doc would show the old name as plain text.
func TestDocLinks(t *testing.T) {
	root := moduleRoot(t)
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if name := d.Name(); path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		dead, err := DeadLinks(path)
		if err != nil {
			return err
		}
		for _, d := range dead {
			t.Error(d)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 30 {
		t.Fatalf("read %d folders; the check reads the wrong tree", n)
	}
}

// The check itself: a link to a declared name, a method, an imported
// package's name pass; a link to a name that is gone is reported; a TOML
// table and a placeholder in brackets are not links.
func TestDeadLinks(t *testing.T) {
	dir := t.TempDir()
	src := `// Package p is a test.
package p

import "strings"

// T is a type.
type T struct{}

// M is a method.
func (T) M() {}

// F uses [T], [T.M], [*T], [strings.Builder] and [Gone]; [sandbox] and
// [plugins.NAME] are tables of a config file.
func F() {}

// G was renamed from [Old.Method].
func G() {}
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	dead, err := DeadLinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 2 || !strings.Contains(dead[0]+dead[1], "[Gone]") || !strings.Contains(dead[0]+dead[1], "[Old.Method]") {
		t.Fatalf("DeadLinks = %q; want [Gone] and [Old.Method]", dead)
	}
}
