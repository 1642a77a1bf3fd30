package proc

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/abi"
)

// The tail keeps the last lines of both streams in order, a line split
// across chunks whole, an unfinished last line, and counts every line.
func TestTail(t *testing.T) {
	var tl tail
	tl.add("stdout", []byte("one\ntw"))
	tl.add("stderr", []byte("oops\r\n"))
	tl.add("stdout", []byte("o\nthree"))
	got, n := tl.last()
	want := []abi.OutputLine{{Stream: "stdout", Text: "one"}, {Stream: "stderr", Text: "oops"}, {Stream: "stdout", Text: "two"}, {Stream: "stdout", Text: "three"}}
	if fmt.Sprint(got) != fmt.Sprint(want) || n != 4 {
		t.Fatalf("last = %v, %d; want %v, 4", got, n, want)
	}

	// Control: many lines keep only the last KeptLines, long ones cut.
	var big tail
	var b strings.Builder
	for i := 1; i <= 1000; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	big.add("stdout", []byte(b.String()))
	big.add("stdout", []byte(strings.Repeat("é", abi.KeptLineBytes)+"\n"))
	got, n = big.last()
	if len(got) != abi.KeptLines || n != 1001 || got[0].Text != fmt.Sprintf("line %d", 1001-abi.KeptLines+1) {
		t.Fatalf("last = %d lines from %q, %d in all", len(got), got[0].Text, n)
	}
	if long := got[len(got)-1].Text; len(long) > abi.KeptLineBytes+len("…") || !strings.HasSuffix(long, "…") {
		t.Fatalf("long line kept as %d bytes", len(long))
	}
}
