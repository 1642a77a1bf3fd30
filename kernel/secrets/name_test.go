package secrets

import (
	"strings"
	"testing"
)

func TestValidName(t *testing.T) {
	for _, name := range []string{"deploy", "ca-key", "a", "0", "db.password", "gh_token", strings.Repeat("a", 64)} {
		if err := ValidName(name); err != nil {
			t.Errorf("ValidName(%q) = %v; want nil", name, err)
		}
	}
	for _, c := range []struct{ name, want string }{
		{"", "is empty"},
		{strings.Repeat("a", 65), "at most 64"},
		{"Deploy", "lower-case letters"},
		{"-deploy", "starting with a letter or a digit"},
		{".hidden", "starting with a letter or a digit"},
		{"..", "starting with a letter or a digit"},
		{"a/b", "not a secret name"},
		{"a b", "not a secret name"},
		{"a\nb", "not a secret name"},
		{"a*b", "not a secret name"},
		{"naïve", "not a secret name"},
	} {
		err := ValidName(c.name)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `"deploy-token"`) {
			t.Errorf("ValidName(%q) = %v; want an error saying %q with an example", c.name, err, c.want)
		}
	}
}

func TestHandle(t *testing.T) {
	for _, c := range []struct {
		in   string
		name string
		ok   bool
	}{
		{"secret:deploy", "deploy", true},
		{"secret:ca-key", "ca-key", true},
		{"deploy", "", false},
		{"secret:", "", false},
		{"secret:Deploy", "", false},
		{"secret:../x", "", false},
		{"SECRET:deploy", "", false},
	} {
		if name, ok := Handle(c.in); name != c.name || ok != c.ok {
			t.Errorf("Handle(%q) = %q, %v; want %q, %v", c.in, name, ok, c.name, c.ok)
		}
	}
}
