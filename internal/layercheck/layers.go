package layercheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
)

// floorOf is the floor of pkg, a path within the module, and whether
// [floors] places it: an exact entry first, then a pattern with "*", then
// the longest "/..." folder that holds it.
func floorOf(pkg string) (int, bool) {
	best, bestLen, kind := -1, -1, 0 // kind: 3 exact, 2 glob, 1 folder
	for f, entries := range floors {
		for _, e := range entries {
			switch {
			case e == pkg:
				return f, true
			case strings.Contains(e, "*"):
				if ok, _ := path.Match(e, pkg); ok && kind < 2 {
					best, kind = f, 2
				}
			case strings.HasSuffix(e, "/..."):
				dir := strings.TrimSuffix(e, "/...")
				if strings.HasPrefix(pkg, dir+"/") && kind <= 1 && len(dir) > bestLen {
					best, bestLen, kind = f, len(dir), 1
				}
			}
		}
	}
	return best, best >= 0
}

// imports is a package's imports of the module's packages, both by path
// within the module.
type imports map[string][]string

// upwardImports lists each import in g of a package on the same floor or a
// higher one, and each package [floors] does not place.
func upwardImports(g imports) []string {
	var bad []string
	for _, pkg := range slices.Sorted(maps.Keys(g)) {
		from, ok := floorOf(pkg)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s is on no floor: add it to layercheck.floors", pkg))
			continue
		}
		for _, imp := range g[pkg] {
			to, ok := floorOf(imp)
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("%s imports %s, which is on no floor: add it to layercheck.floors", pkg, imp))
			case to >= from:
				bad = append(bad, fmt.Sprintf("%s (floor %d) imports %s (floor %d): a floor imports only floors below it; declare what it needs as an interface of its own", pkg, from, imp, to))
			}
		}
	}
	return bad
}

// assemblies lists the calls in the Go source src, the file name of
// package pkg (a path within the module), of a constructor of
// [assemblers]: a package other than host, or the constructor's own,
// that puts a kernel together.
func assemblies(pkg, name string, src []byte) ([]string, error) {
	if pkg == "host" || slices.Contains(forTests, pkg) {
		return nil, nil
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	local := map[string]string{} // the name a file gives an import → its path within the module
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		within, ok := strings.CutPrefix(p, module+"/")
		if !ok || within == pkg {
			continue
		}
		n := path.Base(within)
		if imp.Name != nil {
			n = imp.Name.Name
		}
		local[n] = within
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		if within, ok := local[id.Name]; ok && slices.Contains(assemblers[within], sel.Sel.Name) {
			out = append(out, fmt.Sprintf("%s: %s calls %s.%s: only package host assembles a kernel; ask the daemon for a mode (host.Private, host.Replaying) instead", fset.Position(call.Pos()), pkg, within, sel.Sel.Name))
		}
		return true
	})
	return out, nil
}
