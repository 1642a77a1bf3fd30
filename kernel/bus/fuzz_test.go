package bus_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
)

func FuzzSubject(f *testing.F) {
	for _, s := range []string{
		"kairo.user.message", "kairo", "kairo.>", "kairo.*.message", ">", "*", "a.*.>", "",
		".", "a..b", "a.", ".a", "a b", "a*", "a.>.b", "kairo.\x00", "ä.日本", strings.Repeat("a.", 130),
	} {
		f.Add(s)
	}
	all := bus.MustCompilePattern(">")
	f.Fuzz(func(t *testing.T, s string) {
		subjErr := bus.ValidateSubject(s)
		patErr := bus.ValidatePattern(s)
		for _, err := range []error{subjErr, patErr} {
			var se *bus.SubjectError
			if err != nil && (!errors.As(err, &se) || se.Rule == "") {
				t.Fatalf("%q: error %v is not a *SubjectError with a rule", s, err)
			}
		}
		if patErr == nil {
			if _, err := bus.CompilePattern(s); err != nil {
				t.Fatalf("ValidatePattern(%q) passed but CompilePattern failed: %v", s, err)
			}
		}
		if subjErr != nil {
			return
		}
		if patErr != nil {
			t.Fatalf("%q is a valid subject but not a valid pattern: %v", s, patErr)
		}
		if strings.ContainsAny(s, "*> \t\n") || len(s) > bus.MaxSubjectLen || strings.Contains(s, "..") {
			t.Fatalf("ValidateSubject accepted %q", s)
		}
		p, err := bus.CompilePattern(s)
		if err != nil {
			t.Fatalf("valid subject %q does not compile as a pattern: %v", s, err)
		}
		if !p.Match(s) {
			t.Fatalf("pattern %q does not match itself", s)
		}
		if !all.Match(s) {
			t.Fatalf("\">\" does not match %q", s)
		}
	})
}

func FuzzMatch(f *testing.F) {
	for _, c := range [][2]string{
		{"kairo.>", "kairo.user.message"}, {"kairo.>", "kairo"}, {"kairo.*.message", "kairo.agent.message"},
		{"*", "a"}, {"*", "a.b"}, {"a.*.>", "a.b.c"}, {"a.*.>", "a.b"}, {">", "x"}, {"*.*", "a.b"},
		{"kairo.user.message", "kairo.user.message"}, {"a.b", "a.b.c"}, {"a.>", "ab.c"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, pattern, subject string) {
		if bus.ValidatePattern(pattern) != nil || bus.ValidateSubject(subject) != nil {
			return
		}
		p, err := bus.CompilePattern(pattern)
		if err != nil {
			t.Fatalf("CompilePattern(%q): %v", pattern, err)
		}
		if got, want := p.Match(subject), bustest.RefMatch(pattern, subject); got != want {
			t.Fatalf("%q.Match(%q) = %v, want %v", pattern, subject, got, want)
		}
	})
}
