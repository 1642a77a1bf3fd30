package abi

import (
	"errors"
	"strings"
	"testing"
)

func FuzzSubject(f *testing.F) {
	for _, s := range []string{
		"kairo.user.message", "kairo", "kairo.>", "kairo.*.message", ">", "*", "a.*.>", "",
		".", "a..b", "a.", ".a", "a b", "a*", "a.>.b", "kairo.\x00", "ä.日本", strings.Repeat("a.", 130),
	} {
		f.Add(s)
	}
	all := MustCompilePattern(">")
	f.Fuzz(func(t *testing.T, s string) {
		subjErr := ValidateSubject(s)
		patErr := ValidatePattern(s)
		for _, err := range []error{subjErr, patErr} {
			var se *SubjectError
			if err != nil && (!errors.As(err, &se) || se.Rule == "") {
				t.Fatalf("%q: error %v is not a *SubjectError with a rule", s, err)
			}
		}
		if patErr == nil {
			if _, err := CompilePattern(s); err != nil {
				t.Fatalf("ValidatePattern(%q) passed but CompilePattern failed: %v", s, err)
			}
		}
		if subjErr != nil {
			return
		}
		if patErr != nil {
			t.Fatalf("%q is a valid subject but not a valid pattern: %v", s, patErr)
		}
		if strings.ContainsAny(s, "*> \t\n") || len(s) > MaxSubjectLen || strings.Contains(s, "..") {
			t.Fatalf("ValidateSubject accepted %q", s)
		}
		p, err := CompilePattern(s)
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

// refMatch is the NATS rule written token by token, as the reference for
// Pattern.Match and its fast paths.
func refMatch(pattern, subject string) bool {
	pt, st := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, p := range pt {
		if p == ">" {
			return len(st) > i
		}
		if i >= len(st) || p != "*" && p != st[i] {
			return false
		}
	}
	return len(pt) == len(st)
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
		if ValidatePattern(pattern) != nil || ValidateSubject(subject) != nil {
			return
		}
		p, err := CompilePattern(pattern)
		if err != nil {
			t.Fatalf("CompilePattern(%q): %v", pattern, err)
		}
		if got, want := p.Match(subject), refMatch(pattern, subject); got != want {
			t.Fatalf("%q.Match(%q) = %v, want %v", pattern, subject, got, want)
		}
	})
}
