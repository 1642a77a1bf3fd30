package bus

import (
	"fmt"
	"strings"
)

// MaxSubjectLen bounds subjects and patterns, as NATS does in practice.
const MaxSubjectLen = 256

// SubjectError says which rule a subject or pattern broke.
type SubjectError struct {
	Subject string
	Rule    string
}

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
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			c := s[i]
			if c <= ' ' || c == 0x7f {
				return &SubjectError{s, fmt.Sprintf("byte %d is whitespace or a control character", i)}
			}
			if c != '.' {
				continue
			}
		}
		tok := s[start:i]
		switch {
		case tok == "":
			return &SubjectError{s, fmt.Sprintf("empty token at byte %d (leading, trailing or doubled '.')", start)}
		case tok == "*" || tok == ">":
			if !wildcards {
				return &SubjectError{s, fmt.Sprintf("wildcard %q is only allowed in subscription patterns, not in published subjects", tok)}
			}
			if tok == ">" && i != len(s) {
				return &SubjectError{s, "'>' must be the last token"}
			}
		case strings.ContainsAny(tok, "*>"):
			return &SubjectError{s, fmt.Sprintf("token %q mixes a wildcard with other characters; '*' and '>' must stand alone", tok)}
		}
		start = i + 1
	}
	return nil
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

// MustCompilePattern is CompilePattern for patterns known to be valid.
func MustCompilePattern(p string) *Pattern {
	pt, err := CompilePattern(p)
	if err != nil {
		panic(err)
	}
	return pt
}

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
