package modelname

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/abi"
)

func TestAssignKeepsPlainNames(t *testing.T) {
	got := Assign([]string{"process.spawn", "mcp.files.read_file", "skill.backup", "echo.upper"})
	for name, want := range map[string]string{
		"process.spawn": "process_spawn", "mcp.files.read_file": "mcp_files_read_file",
		"skill.backup": "skill_backup", "echo.upper": "echo_upper",
	} {
		if got[name] != want {
			t.Errorf("%s offered as %q, want %q", name, got[name], want)
		}
	}
}

// The attack of issue 15: names that share their first 70 characters once
// made the policy's de-duplication loop run for ever (the suffix it added
// was cut away by the 64-character limit).
func TestAssignLongNamesThatShareAPrefix(t *testing.T) {
	prefix := "mcp.evil." + strings.Repeat("x", 61)
	var names []string
	for i := range 200 {
		names = append(names, fmt.Sprintf("%s%d", prefix, i))
	}
	names = append(names, prefix+"0") // a duplicate is one tool
	got := Assign(names)
	if len(got) != 200 {
		t.Fatalf("%d names assigned, want 200", len(got))
	}
	seen := map[string]string{}
	for n, m := range got {
		if !Valid(m) {
			t.Errorf("%s offered as %q, which OpenAI refuses", n, m)
		}
		if o, ok := seen[m]; ok {
			t.Errorf("%s and %s are both offered as %q", n, o, m)
		}
		seen[m] = n
	}
	// The same every time, whatever the order.
	rev := make([]string, len(names))
	for i, n := range names {
		rev[len(names)-1-i] = n
	}
	again := Assign(rev)
	for n, m := range got {
		if again[n] != m {
			t.Fatalf("%s offered as %q, then as %q", n, m, again[n])
		}
	}
}

func TestAssignCollisions(t *testing.T) {
	// "a.b" and "a_b" come out the same: both are told apart by hash; a
	// name that is already what another hashes to gets a counter.
	got := Assign([]string{"a.b", "a_b", ""})
	if got["a.b"] == got["a_b"] || !strings.HasPrefix(got["a.b"], "a_b_") || !Valid(got[""]) {
		t.Fatalf("got %q", got)
	}
	h := got["a.b"]
	got = Assign([]string{"a.b", "a_b", h})
	if got[h] != h || got["a.b"] == h || !Valid(got["a.b"]) {
		t.Fatalf("a name that is another's hashed form: got %q", got)
	}
	for _, m := range got {
		if !Valid(m) {
			t.Errorf("%q is not valid", m)
		}
	}
}

func FuzzAssign(f *testing.F) {
	f.Add("mcp.a.b", "mcp.a_b", strings.Repeat("é", 40))
	f.Fuzz(func(t *testing.T, a, b, c string) {
		got := Assign([]string{a, b, c, a + b, Sanitize(a)})
		seen := map[string]bool{}
		for _, m := range got {
			if !Valid(m) || seen[m] {
				t.Fatalf("got %q", got)
			}
			seen[m] = true
		}
	})
}

// Spawn is the kernel's method, spelled out.
func TestSpawnIsTheMethod(t *testing.T) {
	if Spawn != abi.MethodProcessSpawn {
		t.Fatalf("Spawn = %q, abi.MethodProcessSpawn = %q", Spawn, abi.MethodProcessSpawn)
	}
}
