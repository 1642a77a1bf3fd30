package abi

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateSubject(t *testing.T) {
	valid := []string{
		"kairo",
		"kairo.user.message",
		"kairo.agent.42.message",
		"kairo.process.output.throttled",
		"a.b.c.d.e.f",
		"x-y_z.ä.日本",
		strings.Repeat("a", MaxSubjectLen),
		strings.Repeat("a.", MaxSubjectLen/2-1) + "bb",
	}
	for _, s := range valid {
		if err := ValidateSubject(s); err != nil {
			t.Errorf("ValidateSubject(%q) = %v, want nil", s, err)
		}
		if err := ValidatePattern(s); err != nil {
			t.Errorf("ValidatePattern(%q) = %v, want nil: every subject is a pattern", s, err)
		}
	}

	tests := []struct {
		name, s, rule string
	}{
		{"empty", "", "it is empty"},
		{"leading dot", ".kairo.x", "empty token at byte 0 (leading, trailing or doubled '.')"},
		{"trailing dot", "kairo.x.", "empty token at byte 8"},
		{"double dot", "kairo..x", "empty token at byte 6"},
		{"only a dot", ".", "empty token at byte 0"},
		{"space", "kairo.user message", "byte 10 is whitespace or a control character"},
		{"leading space", " kairo", "byte 0 is whitespace"},
		{"tab", "kairo\t.x", "byte 5 is whitespace"},
		{"newline", "kairo.x\n", "byte 7 is whitespace"},
		{"nul", "kai\x00ro", "byte 3 is whitespace or a control character"},
		{"del", "kairo.\x7f", "byte 6 is whitespace or a control character"},
		{"star in subject", "kairo.*.message", `wildcard "*" is only allowed in subscription patterns`},
		{"gt in subject", "kairo.>", `wildcard ">" is only allowed in subscription patterns`},
		{"lone star", "*", `wildcard "*"`},
		{"mixed star", "kairo.a*", `token "a*" mixes a wildcard with other characters`},
		{"mixed gt", "kairo.>b", `token ">b" mixes a wildcard`},
		{"star prefix", "*a.b", `token "*a" mixes a wildcard`},
		{"too long", strings.Repeat("a", MaxSubjectLen+1), "it is 257 bytes, the limit is 256"},
		{"too long dotted", strings.Repeat("ab.", 100) + "c", "it is 301 bytes, the limit is 256"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkSubjectError(t, ValidateSubject(tc.s), tc.s, tc.rule)
		})
	}
}

func TestValidatePattern(t *testing.T) {
	valid := []string{">", "*", "kairo.>", "kairo.*", "kairo.*.message", "*.*", "*.>", "a.*.>", "a.*.b.*.c", "kairo.user.message"}
	for _, p := range valid {
		if err := ValidatePattern(p); err != nil {
			t.Errorf("ValidatePattern(%q) = %v, want nil", p, err)
		}
	}

	tests := []struct {
		name, p, rule string
	}{
		{"empty", "", "it is empty"},
		{"leading dot", ".>", "empty token at byte 0"},
		{"trailing dot", "kairo.*.", "empty token at byte 8"},
		{"double dot", "kairo..>", "empty token at byte 6"},
		{"whitespace", "kairo. >", "byte 6 is whitespace"},
		{"gt not last", "kairo.>.message", "'>' must be the last token"},
		{"gt first", ">.x", "'>' must be the last token"},
		{"two gts", ">.>", "'>' must be the last token"},
		{"mixed star", "kairo.a*", `token "a*" mixes a wildcard with other characters`},
		{"mixed gt", "kairo.a>", `token "a>" mixes a wildcard`},
		{"double star", "kairo.**", `token "**" mixes a wildcard`},
		{"star gt", "kairo.*>", `token "*>" mixes a wildcard`},
		{"too long", strings.Repeat("*.", MaxSubjectLen/2) + ">", "the limit is 256"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkSubjectError(t, ValidatePattern(tc.p), tc.p, tc.rule)
			if _, err := CompilePattern(tc.p); tc.p != "" && err == nil {
				t.Errorf("CompilePattern(%q) accepted an invalid pattern", tc.p)
			}
		})
	}
}

func checkSubjectError(t *testing.T, err error, s, rule string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%q accepted, want an error saying %q", s, rule)
	}
	var se *SubjectError
	if !errors.As(err, &se) {
		t.Fatalf("error %v is a %T, want *SubjectError", err, err)
	}
	if !strings.Contains(se.Rule, rule) {
		t.Errorf("rule %q does not say %q", se.Rule, rule)
	}
	if !strings.HasPrefix(err.Error(), "invalid subject ") || !strings.Contains(err.Error(), se.Rule) {
		t.Errorf("message %q does not carry the rule %q", err, se.Rule)
	}
	// Over-long subjects are cut in the error so it stays readable.
	if len(s) > MaxSubjectLen {
		if se.Subject != s[:32]+"…" {
			t.Errorf("long subject reported as %q, want its first 32 bytes and an ellipsis", se.Subject)
		}
	} else if se.Subject != s {
		t.Errorf("error names subject %q, want %q", se.Subject, s)
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern string
		yes, no []string
	}{
		{">", []string{"a", "kairo.user.message", "a.b.c.d"}, nil},
		{"", []string{"a", "kairo.user.message"}, nil}, // empty means ">"
		{"*", []string{"a", "kairo"}, []string{"a.b", "kairo.user.message"}},
		{"kairo.>", []string{"kairo.x", "kairo.user.message", "kairo.a.b.c.d"}, []string{"kairo", "kairox.y", "kairo-x.y", "x.kairo.y", "kair.o"}},
		{"kairo.user.message", []string{"kairo.user.message"}, []string{"kairo.user", "kairo.user.message.x", "kairo.user.messages", "x.kairo.user.message"}},
		{"kairo.*.message", []string{"kairo.agent.message", "kairo.user.message"}, []string{"kairo.message", "kairo.agent.x.message", "kairo.agent.messages", "kairo.agent.message.x", "x.agent.message"}},
		{"kairo.agent.*.message", []string{"kairo.agent.42.message"}, []string{"kairo.agent.message", "kairo.agent.42.thought"}},
		{"kairo.*", []string{"kairo.x", "kairo.system"}, []string{"kairo", "kairo.x.y"}},
		{"*.message", []string{"user.message", "a.message"}, []string{"message", "a.b.message", "user.messages"}},
		{"*.*", []string{"a.b"}, []string{"a", "a.b.c"}},
		{"*.>", []string{"a.b", "a.b.c"}, []string{"a"}},
		{"a.*.>", []string{"a.b.c", "a.b.c.d", "a.x.y"}, []string{"a", "a.b", "b.b.c", "ab.b.c"}},
		{"a.*.c.>", []string{"a.b.c.d", "a.x.c.d.e"}, []string{"a.b.c", "a.b.d.e", "b.b.c.d"}},
		{"*.b.*", []string{"a.b.c"}, []string{"a.b", "a.b.c.d", "a.c.c", "b.c"}},
		{"a.>", []string{"a.a"}, []string{"a", "b.a", "aa.a"}},
	}
	for _, tc := range tests {
		p, err := CompilePattern(tc.pattern)
		if err != nil {
			t.Fatalf("CompilePattern(%q): %v", tc.pattern, err)
		}
		for _, s := range tc.yes {
			if !p.Match(s) {
				t.Errorf("%q does not match %q, want a match", tc.pattern, s)
			}
		}
		for _, s := range tc.no {
			if p.Match(s) {
				t.Errorf("%q matches %q, want no match", tc.pattern, s)
			}
		}
	}
}

func TestCompilePattern(t *testing.T) {
	if p, err := CompilePattern(""); err != nil || p.String() != ">" {
		t.Errorf(`CompilePattern("") = %v, %v; want ">"`, p, err)
	}
	if p := MustCompilePattern("kairo.*.x"); p.String() != "kairo.*.x" {
		t.Errorf("String() = %q, want the pattern as given", p.String())
	}
	_, err := CompilePattern("kairo.>.x")
	var se *SubjectError
	if !errors.As(err, &se) {
		t.Fatalf(`CompilePattern("kairo.>.x") = %v, want a *SubjectError`, err)
	}
	defer func() {
		if r := recover(); r == nil {
			t.Error("MustCompilePattern of an invalid pattern did not panic")
		}
	}()
	MustCompilePattern("a..b")
}

func TestCovers(t *testing.T) {
	for _, c := range []struct {
		grant, pattern string
		want           bool
	}{
		{">", "a", true},
		{">", "a.b.>", true},
		{"a.>", "a.b", true},
		{"a.>", "a.*.c", true},
		{"a.>", "a.>", true},
		{"a.>", "a", false},
		{"a.>", ">", false},
		{"a.*", "a.b", true},
		{"a.*", "a.*", true},
		{"a.*", "a.>", false},
		{"a.*", "a.b.c", false},
		{"a.b", "a.*", false},
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"*.b", "a.b", true},
		{"a.b.c", "a.b", false},
		{"a.b.c", "a.b.c", true},
		{"a.b.c", "a.b.d", false},
		{"a.b", "a.b.c", false},
		{"a.*.c", "a.x.c", true},
		{"a.*.c", "a.*.c", true},
		{"a.*.c", "a.>", false},
		{"a.*", "a.x.y", false},
		{"a.>", "a.x", true},
		{"a.>", "a.x.y.z", true},
		{"a.>", "a.*", true},
		{">", ">", true},
		{">", "anything.at.all", true},
		{"a.b.>", "a.*.c", false},
		{"", "a.b", true}, // the empty pattern is ">"
		{"a.>", "", false},
	} {
		if got := Covers(c.grant, c.pattern); got != c.want {
			t.Errorf("Covers(%q, %q) = %v, want %v", c.grant, c.pattern, got, c.want)
		}
	}
}
