// Package doccheck finds the public surface that has no doc comment: a
// package without a package doc, and an exported top-level name — a
// function, a method of an exported type, a type, a constant or a
// variable — without a comment of its own. Its test holds the module to
// it; go vet and gofmt cannot, since a missing comment is not an error to
// the compiler.
//
// A comment on a grouped const or var block documents every name in it,
// as go doc shows the block whole; so does a name's line comment inside a
// group. A type in a group needs a comment of its own. Test files, main
// packages and testdata are not part of the surface and are skipped.
package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Problem is one missing doc comment: where it should be and what it
// should document.
type Problem struct {
	Pos token.Position
	// Package is the package's name; Name the exported name, or "" when
	// the package itself has no package doc.
	Package string
	Name    string
}

// String says what has no doc comment, in the file:line form editors
// jump to.
func (p Problem) String() string {
	if p.Name == "" {
		return fmt.Sprintf("%s: package %s has no package doc comment", p.Pos, p.Package)
	}
	return fmt.Sprintf("%s: %s.%s has no doc comment", p.Pos, p.Package, p.Name)
}

// Files returns what the files of one package leave undocumented, in the
// order of the files and of the declarations in them. The files must have
// been parsed with parser.ParseComments; a main package has no public
// surface and yields nothing.
func Files(fset *token.FileSet, files []*ast.File) []Problem {
	if len(files) == 0 || files[0].Name.Name == "main" {
		return nil
	}
	var out []Problem
	pkg := files[0].Name.Name
	hasDoc := false
	for _, f := range files {
		if f.Doc != nil {
			hasDoc = true
		}
	}
	if !hasDoc {
		out = append(out, Problem{Pos: fset.Position(files[0].Package), Package: pkg})
	}
	missing := func(pos token.Pos, name string) {
		out = append(out, Problem{Pos: fset.Position(pos), Package: pkg, Name: name})
	}
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				name, ok := funcName(d)
				if ok && d.Doc == nil {
					missing(d.Pos(), name)
				}
			case *ast.GenDecl:
				grouped := d.Lparen.IsValid()
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						if s.Doc == nil && (grouped || d.Doc == nil) {
							missing(s.Pos(), s.Name.Name)
						}
					case *ast.ValueSpec:
						if s.Doc != nil || d.Doc != nil || (grouped && s.Comment != nil) {
							continue
						}
						for _, n := range s.Names {
							if n.IsExported() {
								missing(n.Pos(), n.Name)
							}
						}
					}
				}
			}
		}
	}
	return out
}

// funcName is how a function or method is named in a Problem (Type.Method
// for a method), and whether it is part of the public surface: an exported
// function, or an exported method of an exported type.
func funcName(d *ast.FuncDecl) (string, bool) {
	if !d.Name.IsExported() {
		return "", false
	}
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name, true
	}
	t := d.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.ParenExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		}
		break
	}
	id, ok := t.(*ast.Ident)
	if !ok || !id.IsExported() {
		return "", false
	}
	return id.Name + "." + d.Name.Name, true
}

// Dir parses the non-test Go files of one folder, whatever their build
// constraints, and returns what they leave undocumented. A folder with no
// Go files yields nothing.
func Dir(dir string) ([]Problem, error) {
	fset, files, err := parseDir(dir)
	if err != nil {
		return nil, err
	}
	return Files(fset, files), nil
}

// parseDir parses the non-test, non-generated Go files of dir with their
// comments, in file name order.
func parseDir(dir string) (*token.FileSet, []*ast.File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, nil, fmt.Errorf("doccheck: %w", err)
		}
		if ast.IsGenerated(f) {
			continue
		}
		files = append(files, f)
	}
	sort.Slice(files, func(i, j int) bool {
		return fset.Position(files[i].Package).Filename < fset.Position(files[j].Package).Filename
	})
	return fset, files, nil
}

// Module returns what every package under root leaves undocumented,
// folder by folder. It skips testdata, folders whose names start with "."
// or "_", and nested modules (a folder with a go.mod of its own).
func Module(root string) ([]Problem, error) {
	var out []Problem
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != root {
			n := d.Name()
			if n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		ps, err := Dir(path)
		if err != nil {
			return err
		}
		out = append(out, ps...)
		return nil
	})
	return out, err
}
