package abi

import (
	"fmt"
	"strings"
)

// SubjectError says which rule a subject or pattern broke.
type SubjectError struct {
	Subject string
	Rule    string
}

// Error quotes the subject and names the rule it broke.
func (e *SubjectError) Error() string {
	return fmt.Sprintf("invalid subject %q: %s", e.Subject, e.Rule)
}

// ValidateSubject checks a subject events are published on: dot-separated,
// non-empty tokens, no wildcards, no whitespace.
func ValidateSubject(s string) error { return validate(s, false) }

// ValidatePattern checks a subscription pattern: a subject whose tokens may
// be "*" (exactly one token) or, as the last token, ">" (one or more tokens).
func ValidatePattern(p string) error { return validate(p, true) }

func validate(s string, wildcards bool) error {
	if s == "" {
		return &SubjectError{s, "it is empty; subjects look like \"kairo.user.message\""}
	}
	if len(s) > MaxSubjectLen {
		return &SubjectError{s[:32] + "…", fmt.Sprintf("it is %d bytes, the limit is %d", len(s), MaxSubjectLen)}
	}
	if !wildcards && plainSubject(s) {
		return nil
	}
	// One pass: this runs on every publish.
	start, wild := 0, -1 // wild: index of a '*' or '>' in the current token
	for i := 0; i <= len(s); i++ {
		var c byte = '.'
		if i < len(s) {
			c = s[i]
		}
		switch {
		case c <= ' ' || c == 0x7f:
			return &SubjectError{s, fmt.Sprintf("byte %d is whitespace or a control character", i)}
		case c == '*' || c == '>':
			wild = i
			continue
		case c != '.':
			continue
		}
		switch tok := s[start:i]; {
		case tok == "":
			return &SubjectError{s, fmt.Sprintf("empty token at byte %d (leading, trailing or doubled '.')", start)}
		case wild < 0:
		case len(tok) > 1:
			return &SubjectError{s, fmt.Sprintf("token %q mixes a wildcard with other characters; '*' and '>' must stand alone", tok)}
		case !wildcards:
			return &SubjectError{s, fmt.Sprintf("wildcard %q is only allowed in subscription patterns, not in published subjects", tok)}
		case tok == ">" && i != len(s):
			return &SubjectError{s, "'>' must be the last token"}
		}
		start, wild = i+1, -1
	}
	return nil
}

// special marks the bytes a subject's fast check stops at.
var special = func() (t [256]bool) {
	for c := 0; c <= ' '; c++ {
		t[c] = true
	}
	t[0x7f], t['*'], t['>'] = true, true, true
	return t
}()

// plainSubject is the publish fast path: true when s has no special byte
// and no empty token. Anything else takes the full check for its message.
func plainSubject(s string) bool {
	if s[0] == '.' || s[len(s)-1] == '.' {
		return false
	}
	prevDot := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if special[c] {
			return false
		}
		dot := c == '.'
		if dot && prevDot {
			return false
		}
		prevDot = dot
	}
	return true
}

// Pattern is a validated subscription pattern.
type Pattern struct {
	raw string
	// all is true for ">" alone; prefix holds "a.b." for "a.b.>" with no
	// '*', the common case, matched with one prefix comparison.
	all    bool
	prefix string
	exact  bool
	tokens []string
}

// CompilePattern validates p and prepares it for matching. The empty pattern
// means every subject (">").
func CompilePattern(p string) (*Pattern, error) {
	if p == "" {
		p = ">"
	}
	if err := ValidatePattern(p); err != nil {
		return nil, err
	}
	pt := &Pattern{raw: p, tokens: strings.Split(p, ".")}
	switch {
	case p == ">":
		pt.all = true
	case !strings.Contains(p, "*") && strings.HasSuffix(p, ".>"):
		pt.prefix = p[:len(p)-1]
	case !strings.ContainsAny(p, "*>"):
		pt.exact = true
	}
	return pt, nil
}

// MustCompilePattern is [CompilePattern] for patterns known to be valid.
func MustCompilePattern(p string) *Pattern {
	pt, err := CompilePattern(p)
	if err != nil {
		panic(err)
	}
	return pt
}

// String is the pattern as it was compiled.
func (p *Pattern) String() string { return p.raw }

// Match reports whether subject s matches the pattern. s is assumed valid.
func (p *Pattern) Match(s string) bool {
	switch {
	case p.all:
		return true
	case p.prefix != "":
		return len(s) > len(p.prefix) && s[:len(p.prefix)] == p.prefix
	case p.exact:
		return s == p.raw
	}
	rest := s
	for i, tok := range p.tokens {
		if tok == ">" {
			return true // the previous token ended at a '.', so at least one token is left
		}
		cur := rest
		j := strings.IndexByte(rest, '.')
		if j >= 0 {
			cur, rest = rest[:j], rest[j+1:]
		}
		if tok != "*" && tok != cur {
			return false
		}
		if i == len(p.tokens)-1 {
			return j < 0
		}
		if j < 0 {
			return false
		}
	}
	return false
}

// Covers reports whether every subject that pattern matches is also
// matched by grant: "kairo.>" covers "kairo.user.*", "a.*" covers "a.b",
// and nothing but ">" at the same place covers a ">". Both are assumed
// valid patterns ([ValidatePattern]); the empty pattern is ">".
func Covers(grant, pattern string) bool {
	if grant == "" {
		grant = ">"
	}
	if pattern == "" {
		pattern = ">"
	}
	g, p := strings.Split(grant, "."), strings.Split(pattern, ".")
	for i, gt := range g {
		if gt == ">" {
			return i < len(p)
		}
		if i >= len(p) || p[i] == ">" {
			return false
		}
		if gt != "*" && gt != p[i] {
			return false
		}
	}
	return len(g) == len(p)
}
