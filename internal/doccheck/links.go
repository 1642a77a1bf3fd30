package doccheck

import (
	"fmt"
	"go/doc"
	"go/doc/comment"
	"go/token"
	"path/filepath"
	"regexp"
)

// docLinkLike is what a doc link to a Go name looks like: a name in
// brackets, with its type or package before it and an optional "*".
// Lower-case words in brackets (a TOML table such as sandbox) and names
// in capitals alone (a placeholder such as plugins.NAME) are not links.
var docLinkLike = regexp.MustCompile(`\[\*?(?:[a-z]\w*\.)?(?:[A-Z]\w*\.)?[A-Z]\w*[a-z]\w*\]`)

// DeadLinks returns the doc links of the non-test files of dir that name
// nothing: a name in brackets that go doc shows as plain text, because the name is
// not declared (a rename left the comment behind) or its package is not
// imported by the file. Each is "file:line: ..." naming the link.
func DeadLinks(dir string) ([]string, error) {
	fset, files, err := parseDir(dir)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 || files[0].Name.Name == "main" {
		return nil, nil // a command has no doc links to follow
	}
	pkg, err := doc.NewFromFiles(fset, files, "kairo/"+filepath.Base(dir), doc.AllDecls|doc.PreserveAST)
	if err != nil {
		return nil, fmt.Errorf("doccheck: %w", err)
	}
	p := pkg.Parser()
	var out []string
	check := func(pos token.Pos, text string) {
		if text == "" {
			return
		}
		for _, dead := range plainLinks(p.Parse(text)) {
			out = append(out, fmt.Sprintf("%s: %s names nothing go doc can link: declare it, import its package, or write it without brackets", fset.Position(pos), dead))
		}
	}
	check(files[0].Package, pkg.Doc)
	for _, f := range pkg.Funcs {
		check(f.Decl.Pos(), f.Doc)
	}
	for _, v := range append(pkg.Consts, pkg.Vars...) {
		check(v.Decl.Pos(), v.Doc)
	}
	for _, t := range pkg.Types {
		check(t.Decl.Pos(), t.Doc)
		for _, f := range append(t.Funcs, t.Methods...) {
			check(f.Decl.Pos(), f.Doc)
		}
		for _, v := range append(t.Consts, t.Vars...) {
			check(v.Decl.Pos(), v.Doc)
		}
	}
	return out, nil
}

// plainLinks are the link-like words of d that stayed plain text.
func plainLinks(d *comment.Doc) []string {
	var out []string
	var walk func([]comment.Text)
	walk = func(ts []comment.Text) {
		for _, t := range ts {
			switch t := t.(type) {
			case comment.Plain:
				out = append(out, docLinkLike.FindAllString(string(t), -1)...)
			case comment.Italic:
				out = append(out, docLinkLike.FindAllString(string(t), -1)...)
			case *comment.Link:
				walk(t.Text)
			}
		}
	}
	for _, b := range d.Content {
		switch b := b.(type) {
		case *comment.Paragraph:
			walk(b.Text)
		case *comment.Heading:
			walk(b.Text)
		case *comment.List:
			for _, it := range b.Items {
				for _, c := range it.Content {
					if p, ok := c.(*comment.Paragraph); ok {
						walk(p.Text)
					}
				}
			}
		}
	}
	return out
}
