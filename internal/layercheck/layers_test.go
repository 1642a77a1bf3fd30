package layercheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goList runs go list on the whole module with format, one line a package.
func goList(t *testing.T, format string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", format, module+"/...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func within(p string) (string, bool) { return strings.CutPrefix(p, module+"/") }

// Every package of the module is on a floor, and imports (tests aside)
// only packages on floors below its own.
func TestImportsPointDown(t *testing.T) {
	g := imports{}
	for _, line := range goList(t, "{{.ImportPath}} {{join .Imports \" \"}}") {
		fields := strings.Fields(line)
		pkg, ok := within(fields[0])
		if !ok {
			continue // the module's root package, should it have one
		}
		g[pkg] = nil
		for _, imp := range fields[1:] {
			if p, ok := within(imp); ok {
				g[pkg] = append(g[pkg], p)
			}
		}
	}
	if len(g) < 30 {
		t.Fatalf("go list found %d packages of the module; the check reads the wrong tree", len(g))
	}
	for _, bad := range upwardImports(g) {
		t.Error(bad)
	}
}

// The check itself: an import up a floor, one across a floor and a package
// on no floor are reported; imports down are not.
func TestUpwardImportsControl(t *testing.T) {
	bad := upwardImports(imports{
		"kernel":         {"host"},            // up
		"internal/tools": {"internal/memory"}, // down
		"host/wasm":      {"kernel/ipc"},      // across
		"kernel/bus":     {"abi"},             // down
		"nowhere":        nil,                 // on no floor
	})
	want := []string{"kernel (floor", "host/wasm (floor", "nowhere is on no floor"}
	if len(bad) != len(want) {
		t.Fatalf("reported %d, want %d: %q", len(bad), len(want), bad)
	}
	for _, w := range want {
		found := false
		for _, b := range bad {
			found = found || strings.Contains(b, w)
		}
		if !found {
			t.Errorf("no report says %q: %q", w, bad)
		}
	}
	for p, want := range map[string]int{"internal/pipes": 0, "abi": 1, "kernel/bus/sqlite": 4, "plugins/llm/wasm": 4, "plugins/llm": 3, "kernel/internal/egress": 5, "host": 11} {
		if f, ok := floorOf(p); !ok || f != want {
			t.Errorf("floorOf(%s) = %d, %v; want %d", p, f, ok, want)
		}
	}
}

// Only package host puts a kernel together: no other package's code (tests
// aside) calls a constructor of assemblers.
func TestOneAssembly(t *testing.T) {
	n := 0
	for _, line := range goList(t, "{{.ImportPath}} {{.Dir}} {{join .GoFiles \" \"}}") {
		fields := strings.Fields(line)
		pkg, ok := within(fields[0])
		if !ok || len(fields) < 3 {
			continue
		}
		for _, name := range fields[2:] {
			src, err := os.ReadFile(filepath.Join(fields[1], name))
			if err != nil {
				t.Fatal(err)
			}
			found, err := assemblies(pkg, filepath.Join(pkg, name), src)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range found {
				t.Error(f)
			}
			n++
		}
	}
	if n < 100 {
		t.Fatalf("read %d files of the module; the check reads the wrong tree", n)
	}
}

// The check itself: a call of a constructor from another package is
// reported, under its own name or another; host's and the constructor's
// own package's are not.
func TestOneAssemblyControl(t *testing.T) {
	src := `package main
import (
	"github.com/kairo-os/kairo/kernel"
	kb "github.com/kairo-os/kairo/kernel/bus"
)
func f() { kernel.New(kb.New(nil, kb.Config{}), kernel.Config{}) }
`
	for pkg, want := range map[string]int{"cmd/kairo": 2, "host": 0, "kernel/bus": 1} {
		got, err := assemblies(pkg, pkg+"/f.go", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != want {
			t.Errorf("in %s: %d reported, want %d: %q", pkg, len(got), want, got)
		}
	}
}

// Every constructor assemblers names exists: one renamed away would leave
// the check passing on nothing.
func TestAssemblersExist(t *testing.T) {
	dirs := map[string]string{}
	for _, line := range goList(t, "{{.ImportPath}} {{.Dir}}") {
		fields := strings.Fields(line)
		if pkg, ok := within(fields[0]); ok {
			dirs[pkg] = fields[1]
		}
	}
	for pkg, names := range assemblers {
		dir, ok := dirs[pkg]
		if !ok {
			t.Errorf("assemblers names package %s, which the module does not have", pkg)
			continue
		}
		for _, name := range names {
			if !declares(t, dir, name) {
				t.Errorf("assemblers names %s.%s, which package %s does not declare", pkg, name, pkg)
			}
		}
	}
}
