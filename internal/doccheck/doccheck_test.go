package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// moduleRoot is the folder of the go.mod above the test's folder.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = up
	}
}

// Every package of the module has a package doc, and every exported
// top-level name a doc comment: the public surface says what it is for.
// Run it alone with
//
//	go test -run TestDocComments ./internal/doccheck
func TestDocComments(t *testing.T) {
	root := moduleRoot(t)
	problems, err := Module(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) == 0 {
		return
	}
	lines := make([]string, len(problems))
	for i, p := range problems {
		if rel, err := filepath.Rel(root, p.Pos.Filename); err == nil {
			p.Pos.Filename = rel
		}
		lines[i] = p.String()
	}
	t.Errorf("%d exported names or packages have no doc comment; say in a line or two what each is for:\n\t%s",
		len(problems), strings.Join(lines, "\n\t"))
}

// The check finds what it should and nothing else, on small packages.
func TestFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want []string // names missing a comment; "" is the package doc
	}{
		{"documented", `// Package p does one thing.
package p

// F does it.
func F() {}

// T is the thing.
type T struct{}

// M does it to T.
func (*T) M() {}

// Values of T.
const (
	A = 1
	B = 2
)

// V is a variable.
var V int
`, nil},
		{"no package doc", `package p`, []string{""}},
		{"bare names", `// Package p.
package p

func F() {}
type T int
func (T) M() {}
const C = 1
var V, W int
`, []string{"F", "T", "T.M", "C", "V", "W"}},
		{"unexported are not surface", `// Package p.
package p

func f() {}
type t int
func (t) M() {}
func (T) m() {}

// T is exported.
type T int
var v int
`, nil},
		{"groups", `// Package p.
package p

const (
	// A has its own comment.
	A = 1
	B = 2 // B has a line comment.
	C = 3
)

// G documents the group.
type (
	G int
	// H has its own.
	H int
)

var X, y = 1, 2
`, []string{"C", "G", "X"}},
		{"methods of pointers and generics", `// Package p.
package p

// L is a list.
type L[E any] []E

func (l *L[E]) Push(e E) {}

// Pop takes the last.
func (l *L[E]) Pop() E { var e E; return e }

// M maps.
type M[K comparable, V any] map[K]V

func (M[K, V]) Len() int { return 0 }
`, []string{"L.Push", "M.Len"}},
		{"main has no surface", `package main

func Exported() {}
`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "p.go", tc.src, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range Files(fset, []*ast.File{f}) {
				got = append(got, p.Name)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("missing %q, want %q", got, tc.want)
			}
		})
	}
}

// Module reads folders from disk, and skips testdata and test files.
func TestModule(t *testing.T) {
	root := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n")
	write("a/a.go", "// Package a.\npackage a\n\nfunc Bad() {}\n")
	write("a/a_test.go", "package a\n\nfunc TestHelper() {}\n")
	write("a/testdata/x.go", "package x\n\nfunc Bad() {}\n")
	write("b/b.go", "package b\n")
	problems, err := Module(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		rel, _ := filepath.Rel(root, p.Pos.Filename)
		got = append(got, rel+" "+p.Package+"."+p.Name)
	}
	want := []string{"a/a.go a.Bad", "b/b.go b."}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems %q, want %q", got, want)
	}
}
