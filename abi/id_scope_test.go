package abi

import (
	"strings"
	"testing"
)

func TestScopeEventID(t *testing.T) {
	for _, c := range []struct {
		source, id, want, err string
	}{
		{"skill/fetch", "", "", ""},
		{"skill/fetch", "x", "skill/fetch:x", ""},
		{"skill/fetch", "skill/fetch:x", "skill/fetch:x", ""},             // answered before: kept
		{"skill/other", "skill/fetch:x", "skill/other:skill/fetch:x", ""}, // another's: scoped
		{"skill/fetch", "skill/fetch", "skill/fetch:skill/fetch", ""},     // not its scope
		{"skill/fetch via plugin/terminal", "m1", "skill/fetch via plugin/terminal:m1", ""},
		{"", "x", "", "cannot name"},
		{"a:b", "x", "", "cannot name"},
		{"skill/fetch", strings.Repeat("i", MaxIDLen-len("skill/fetch:")+1), "", "at most 244 bytes"},
		{"skill/fetch", strings.Repeat("i", MaxIDLen+1), "", "over its bound"},
	} {
		got, err := ScopeEventID(c.source, c.id)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("ScopeEventID(%q, %q) = %q, %v; want %q", c.source, c.id, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ScopeEventID(%q, %.20q): %v; want an error saying %q", c.source, c.id, err, c.err)
		}
	}
	// The longest id that fits its scope.
	if got, err := ScopeEventID("skill/fetch", strings.Repeat("i", MaxIDLen-len("skill/fetch:"))); err != nil || len(got) != MaxIDLen {
		t.Errorf("the longest id: %d bytes, %v", len(got), err)
	}
}
