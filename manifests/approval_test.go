package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestApprovalConfig(t *testing.T) {
	load := func(text string) (Config, error) {
		p := filepath.Join(t.TempDir(), "kairo.toml")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return Load(p)
	}
	c, err := load("[approval]\ntimeout = \"90s\"\n[approval.tools]\n\"skill.*\" = \"on-deny\"\n\"skill.deploy\" = \"always\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Approval.TimeoutDuration(); d != 90*time.Second {
		t.Errorf("timeout %v", d)
	}
	for tool, want := range map[string]string{"skill.deploy": "always", "skill.fetch": "on-deny", "process.spawn": "never"} {
		if got := c.Approval.ModeFor(tool); got != want {
			t.Errorf("ModeFor(%s) = %s, want %s", tool, got, want)
		}
	}
	for _, bad := range []struct{ text, want string }{
		{"[approval]\ntimeout = \"soon\"\n", `approval.timeout: "soon": give a duration`},
		{"[approval.tools]\n\"skill.*\" = \"sometimes\"\n", `"sometimes" is not a mode`},
		{"[approval.tools]\n\"skill.[\" = \"always\"\n", `is not a tool name or pattern`},
	} {
		if _, err := load(bad.text); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: got %v, want %q", bad.text, err, bad.want)
		}
	}
	if got := StricterApproval(ApprovalNever, ApprovalOnDeny); got != ApprovalOnDeny {
		t.Errorf("stricter of never and on-deny: %s", got)
	}
	if got := StricterApproval(ApprovalAlways, ApprovalOnDeny); got != ApprovalAlways {
		t.Errorf("stricter of always and on-deny: %s", got)
	}
}

func TestSkillApproval(t *testing.T) {
	s, err := ParseSkill("skill.toml", []byte(skillHead+"[approval]\nmode = \"on-deny\"\n"))
	if err != nil || s.Approval.Mode != ApprovalOnDeny {
		t.Fatalf("%v %+v", err, s)
	}
	if _, err := ParseSkill("skill.toml", []byte(skillHead+"[approval]\nmode = \"maybe\"\n")); err == nil || !strings.Contains(err.Error(), `approval.mode: "maybe" is not a mode`) {
		t.Fatalf("bad mode: %v", err)
	}
}
