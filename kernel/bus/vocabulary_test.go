package bus

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/abi"
)

// abiConsts reads the string constants of package abi (its source beside
// this package, tests left out) whose names begin with prefix: name → value.
// A constant of that prefix whose value is not a plain string literal fails
// the test, since the checks below could not see its value.
func abiConsts(t *testing.T, prefix string) map[string]string {
	t.Helper()
	dir := filepath.Join("..", "..", "abi")
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	fset := token.NewFileSet()
	out := map[string]string{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, prefix) {
						continue
					}
					var lit *ast.BasicLit
					if i < len(vs.Values) {
						lit, _ = vs.Values[i].(*ast.BasicLit)
					}
					if lit == nil || lit.Kind != token.STRING {
						t.Errorf("abi.%s is not a string literal; write the subject out", n.Name)
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[n.Name] = v
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no constants %s... found in %s", prefix, dir)
	}
	return out
}

// Every abi.Subject... constant is a subject events can be published on,
// or, where it holds a wildcard, a pattern a subscription can ask for; each
// is Kairo's ("kairo."), none is a method name, and no two share a value —
// one name for each subject. The kernel's own ones are all in
// abi.KernelSubjects, so that no caller can forge them.
func TestSubjectVocabulary(t *testing.T) {
	subjects := abiConsts(t, "Subject")
	methods := abiConsts(t, "Method")
	byValue := map[string]string{}
	for name, v := range subjects {
		if other, dup := byValue[v]; dup {
			t.Errorf("abi.%s and abi.%s are both %q", name, other, v)
		}
		byValue[v] = name
		if !strings.HasPrefix(v, "kairo.") {
			t.Errorf("abi.%s = %q: not under kairo.", name, v)
		}
		if strings.ContainsAny(v, "*>") {
			if err := abi.ValidatePattern(v); err != nil {
				t.Errorf("abi.%s: %v", name, err)
			}
			if !strings.HasSuffix(name, "All") && !strings.HasSuffix(name, "s") {
				t.Errorf("abi.%s = %q is a pattern: name it ...All (a family) or in the plural", name, v)
			}
			continue
		}
		if err := abi.ValidateSubject(v); err != nil {
			t.Errorf("abi.%s: %v", name, err)
		}
	}
	for name, v := range methods {
		if subj, dup := byValue[v]; dup {
			t.Errorf("the method abi.%s and the subject abi.%s are both %q", name, subj, v)
		}
		if strings.HasPrefix(v, "kairo.") {
			t.Errorf("abi.%s = %q: a method name under kairo., where subjects are", name, v)
		}
	}

	// Anyone granted may publish these; every other subject is the kernel's.
	open := map[string]bool{
		abi.SubjectAll: true, abi.SubjectUserMessage: true,
		abi.SubjectObservation: true, abi.SubjectTerminalInput: true,
	}
	for name, v := range subjects {
		if open[v] {
			continue
		}
		covered := false
		for _, k := range abi.KernelSubjects {
			covered = covered || abi.Covers(k, v)
		}
		if !covered {
			t.Errorf("abi.%s = %q is in no family of abi.KernelSubjects: a caller could forge it", name, v)
		}
	}
	for _, k := range abi.KernelSubjects {
		if byValue[k] == "" {
			t.Errorf("abi.KernelSubjects lists %q, which no abi.Subject...All names", k)
		}
	}
}

// abi.SubjectIn and abi.IsAgentMessageSubject agree with the patterns
// they stand for.
func TestSubjectHelpers(t *testing.T) {
	subjects := []string{
		abi.SubjectProcessExited, abi.SubjectProcessOutputThrottled, abi.SubjectAgentError,
		abi.AgentMessageSubject("default"), abi.AgentMessageSubject("a-b_1"), "kairo.agent.message",
		"kairo.agent.a.b.message", "kairo.process", "kairo.processes.x", abi.SubjectUserMessage, "other.kairo.process.x",
	}
	families := []string{abi.SubjectAll, abi.SubjectProcessAll, abi.SubjectAgentAll, abi.SubjectUserMessage + ".>"}
	for _, f := range families {
		p := abi.MustCompilePattern(f)
		for _, s := range subjects {
			if got, want := abi.SubjectIn(s, f), p.Match(s); got != want {
				t.Errorf("abi.SubjectIn(%q, %q) = %v, the pattern matches: %v", s, f, got, want)
			}
		}
	}
	messages := abi.MustCompilePattern(abi.SubjectAgentMessages)
	for _, s := range subjects {
		if got, want := abi.IsAgentMessageSubject(s), messages.Match(s); got != want {
			t.Errorf("abi.IsAgentMessageSubject(%q) = %v, %s matches: %v", s, got, abi.SubjectAgentMessages, want)
		}
	}
	if abi.SubjectIn(abi.SubjectProcessExited, abi.SubjectProcessExited) {
		t.Error("abi.SubjectIn takes a subject for a family")
	}
}
