package console

import (
	"math"
	"testing"
)

// The first paint converts values as the page's script does: a number as
// Number.prototype.toString, an object as JSON.stringify (its array-index
// keys first), a string clipped by UTF-16 units.
func TestJSValueAsTheScript(t *testing.T) {
	for f, want := range map[float64]string{
		0: "0", 1: "1", -1.5: "-1.5", 1e21: "1e+21", 1e20: "100000000000000000000", 1.5e-7: "1.5e-7",
		0.000001: "0.000001", 123456789012: "123456789012", 0.30000000000000004: "0.30000000000000004",
		math.Inf(1): "Infinity", math.NaN(): "NaN", 2.5e-10: "2.5e-10", 1.25e30: "1.25e+30",
	} {
		if got := jsNumber(f); got != want {
			t.Errorf("jsNumber(%v) = %q, want %q", f, got, want)
		}
	}
	for in, want := range map[string]string{
		`{"b":1,"a":[1,"x",null,true],"10":"ten","2":"two","c":{}}`: `{"2":"two","10":"ten","b":1,"a":[1,"x",null,true],"c":{}}`,
		`{"a":1,"a":2,"b":1.0}`:            `{"a":2,"b":1}`,
		`{"s":"\u003c\u2028\n\u0001\"\\"}`: `{"s":"<` + "\u2028" + `\n\u0001\"\\"}`,
		`[1e400, -0]`:                      `[null,0]`,
	} {
		v, err := parseJS([]byte(in))
		if err != nil {
			t.Fatalf("parseJS(%s): %v", in, err)
		}
		if got := v.str(); got != want {
			t.Errorf("str(%s) = %s, want %s", in, got, want)
		}
	}
	if got := clip("ab😀cd", 3); got != "ab…" {
		t.Errorf("clip cuts a pair in two: %q", got)
	}
	if got := humanMS(1250); got != "1.3 s" {
		t.Errorf("humanMS(1250) = %q, want the script's toFixed: 1.3 s", got)
	}
	for _, bad := range []string{`{"a":}`, `[1,`, `"x`, `{"a" 1}`, `tru`} {
		if _, err := parseJS([]byte(bad)); err == nil {
			t.Errorf("parseJS(%s) took it", bad)
		}
	}
}
