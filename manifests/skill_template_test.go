package manifests

import (
	"slices"
	"strings"
	"testing"
)

// ArgvTemplate shows a required param not given as its placeholder and
// names it; given params and defaults are filled in as Argv fills them,
// and a bad value is an error still.
func TestArgvTemplate(t *testing.T) {
	sk, err := ParseSkill("/skills/t/skill.toml", []byte(`[skill]
name = "t"
command = ["/usr/bin/tool", "--in={input}", "{count}", "--level={level}"]
[params.input]
description = "the input"
[params.count]
type = "integer"
default = 3
[params.level]
required = false
[fs]
exec = ["/usr/bin/tool"]
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  map[string]string
		want  string
		unset []string
		err   string
	}{
		{nil, "/usr/bin/tool --in={input} 3", []string{"input"}, ""},
		{map[string]string{"input": "a.txt", "level": "2"}, "/usr/bin/tool --in=a.txt 3 --level=2", nil, ""},
		{map[string]string{"count": "many"}, "", nil, `param "count"`},
	} {
		argv, unset, err := sk.ArgvTemplate(tc.args, nil)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: want an error saying %q, got %v", tc.args, tc.err, err)
			}
			continue
		}
		if err != nil || strings.Join(argv, " ") != tc.want || !slices.Equal(unset, tc.unset) {
			t.Errorf("%v: got %q %v %v, want %q %v", tc.args, argv, unset, err, tc.want, tc.unset)
		}
	}
	// Argv, the control: the same missing param is an error there.
	if _, err := sk.Argv(nil, nil); err == nil || !strings.Contains(err.Error(), `needs param "input"`) {
		t.Errorf("Argv without input: %v", err)
	}
}
