package abi

import (
	"regexp"
	"strings"
	"testing"
)

func TestParseMemoryAnchor(t *testing.T) {
	a := MemoryAnchor{RunLoopID: "0193ab-cd", IterationIndex: 2, SegmentIndex: 11, SegmentType: MemorySegmentToolResult}
	got, err := ParseMemoryAnchor(a.String())
	if err != nil || got != a {
		t.Fatalf("ParseMemoryAnchor(%q) = %+v, %v", a.String(), got, err)
	}
	if got, err := ParseMemoryAnchor("x#0.1"); err != nil || got.SegmentType != "" || got.SegmentIndex != 1 {
		t.Fatalf("without a type: %+v, %v", got, err)
	}
	for _, bad := range []string{"", "x", "x#1", "x#a.b", "#1.2", "x#1.2(Bad)"} {
		if _, err := ParseMemoryAnchor(bad); err == nil {
			t.Errorf("ParseMemoryAnchor(%q) accepted", bad)
		}
	}
}

// anchorRE is the grammar ParseMemoryAnchor reads, as it was written
// before abi held it.
var anchorRE = regexp.MustCompile(`^([^#\s]+)#(\d+)\.(\d+)(?:\(([a-z_]+)\))?$`)

// The hand-written parser takes what the regexp it replaced took.
func TestParseMemoryAnchorGrammar(t *testing.T) {
	for s, ok := range map[string]bool{
		"a#1.2": true, "a#1.2(tool_call)": true, " a#01.2 ": true, "0193…#0.2": true,
		"a b#1.2": false, "a#1.2()": false, "a#1.2(X)": false, "a#1.2(x": false, "a#1.2x": false,
		"a#.2": false, "a#1.": false, "a#1#2.3": false, "a\t#1.2": false, "a#1.2(x)y": false,
	} {
		if _, err := ParseMemoryAnchor(s); (err == nil) != ok {
			t.Errorf("ParseMemoryAnchor(%q): %v, want ok %v", s, err, ok)
		}
		if re := anchorRE.MatchString(strings.TrimSpace(s)); re != ok {
			t.Errorf("the regexp takes %q: %v, want %v", s, re, ok)
		}
	}
}
