package proc

import "testing"

// A bare program name not on PATH is found out before the spawn, in an
// argv and in the first word of a shell line; a path, shell syntax, a
// builtin and a program that is there are left to the exec and the shell.
func TestMissingProgram(t *testing.T) {
	env := []string{"PATH=/usr/bin:/bin"}
	sh := func(line string) []string { return []string{"/bin/sh", "-c", line} }
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"nosuchprog", "-x"}, "nosuchprog"},
		{sh("nosuchprog a b"), "nosuchprog"},
		{sh("  progress-demo steps=2"), "progress-demo"},
		{sh("nosuchprog"), "nosuchprog"},
		// The controls.
		{[]string{"true"}, ""},
		{sh("true"), ""},
		{sh("echo hi | tr a-z A-Z"), ""},
		{sh("cd /tmp && nosuchprog"), ""},
		{sh("FOO=1 nosuchprog"), ""},
		{sh("nosuchprog; true"), ""},
		{sh("for i in 1; do :; done"), ""},
		{sh("$CMD x"), ""},
		{[]string{"/opt/nosuch/prog"}, ""},
		{[]string{"/bin/sh", "-c", "nosuchprog", "extra"}, ""},
		{nil, ""},
	} {
		if got := missingProgram(tc.argv, env); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.argv, got, tc.want)
		}
	}
	// The PATH is the sandbox's: a program outside it is missing there.
	if got := missingProgram([]string{"true"}, []string{"PATH=/nonexistent"}); got != "true" {
		t.Errorf("true with PATH=/nonexistent: got %q", got)
	}
}
