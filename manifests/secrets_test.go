package manifests

import (
	"errors"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/kernel/secrets"
)

func TestSkillSecrets(t *testing.T) {
	s, err := LoadSkill(writeSkill(t, skillHead+`[secrets]
env = { DEPLOY_TOKEN = "deploy", DB_PASSWORD = "db.password" }
files = ["ca-key", "deploy"]
children = true
`))
	if err != nil {
		t.Fatal(err)
	}
	want := SecretGrants{Env: map[string]string{"DEPLOY_TOKEN": "deploy", "DB_PASSWORD": "db.password"}, Files: []string{"ca-key", "deploy"}, Children: true}
	if !reflect.DeepEqual(s.Secrets, want) {
		t.Errorf("Secrets = %+v; want %+v", s.Secrets, want)
	}
	if got := s.Secrets.Names(); !slices.Equal(got, []string{"ca-key", "db.password", "deploy"}) {
		t.Errorf("Names = %q; want each secret once, sorted", got)
	}
	// Left out: no secret.
	s, err = LoadSkill(writeSkill(t, skillHead))
	if err != nil || !s.Secrets.Empty() || s.Secrets.Names() != nil || s.Secrets.Children {
		t.Errorf("a skill without [secrets]: %+v, %v", s.Secrets, err)
	}
}

// Each problem names its key and line, and says what to do.
func TestSkillSecretsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		line       int
		key, want  string
	}{
		{"bad variable", "[secrets]\nenv = { \"1X\" = \"deploy\" }\n", 8, "secrets.env.1X", `"1X" is not an environment variable name`},
		{"PATH", "[secrets]\nenv = { PATH = \"deploy\" }\n", 8, "secrets.env.PATH", `PATH is set by the sandbox or the kernel.*such as "DEPLOY_TOKEN"`},
		{"HOME", "[secrets]\nenv = { HOME = \"deploy\" }\n", 8, "secrets.env.HOME", `HOME is set by the sandbox`},
		{"a proxy", "[secrets]\nenv = { HTTPS_PROXY = \"deploy\" }\n", 8, "secrets.env.HTTPS_PROXY", `HTTPS_PROXY is set by the sandbox`},
		{"KAIRO_", "[secrets]\nenv = { KAIRO_TOKEN = \"deploy\" }\n", 8, "secrets.env.KAIRO_TOKEN", `KAIRO_TOKEN is set by the sandbox or the kernel`},
		{"also in env.set", "[env]\nset = { TOKEN = \"x\" }\n[secrets]\nenv = { TOKEN = \"deploy\" }\n", 10, "secrets.env.TOKEN", `TOKEN is also in env.set, and the two would clash; keep one`},
		{"also in env.pass", "[env]\npass = [\"TOKEN\"]\n[secrets]\nenv = { TOKEN = \"deploy\" }\n", 10, "secrets.env.TOKEN", `TOKEN is also in env.pass`},
		{"bad secret name", "[secrets]\nenv = { TOKEN = \"Deploy Token\" }\n", 8, "secrets.env.TOKEN", `"Deploy Token" is not a secret name.*such as "deploy-token"`},
		{"a handle, not a name", "[secrets]\nenv = { TOKEN = \"secret:deploy\" }\n", 8, "secrets.env.TOKEN", `"secret:deploy" is not a secret name`},
		{"one secret in two variables", "[secrets]\nenv = { A_TOKEN = \"deploy\", B_TOKEN = \"deploy\" }\n", 8, "secrets.env.B_TOKEN", `the secret deploy is in A_TOKEN already; give it in one variable`},
		{"bad file name", "[secrets]\nfiles = [\"ca-key\", \"../etc/passwd\"]\n", 8, "secrets.files[1]", `"../etc/passwd" is not a secret name`},
		{"a file twice", "[secrets]\nfiles = [\"ca-key\", \"ca-key\"]\n", 8, "secrets.files[1]", `the secret ca-key is listed already, as files\[0\]; list it once`},
		{"unknown key", "[secrets]\nenvs = { TOKEN = \"deploy\" }\n", 8, "secrets.envs", `\[secrets\] takes env, files, children`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeSkill(t, skillHead+tc.text)
			_, err := LoadSkill(path)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("LoadSkill: %v (%T); want a *manifests.Error", err, err)
			}
			if e.Line != tc.line || e.Key != tc.key {
				t.Errorf("error at line %d key %q; want line %d key %q\n(%v)", e.Line, e.Key, tc.line, tc.key, err)
			}
			if !regexp.MustCompile(tc.want).MatchString(e.Msg) {
				t.Errorf("message %q does not match %q", e.Msg, tc.want)
			}
		})
	}
	// The control: the same tables, right.
	if _, err := LoadSkill(writeSkill(t, skillHead+"[env]\nset = { OTHER = \"x\" }\n[secrets]\nenv = { TOKEN = \"deploy\", B = \"b.key\" }\nfiles = [\"ca-key\", \"deploy\"]\n")); err != nil {
		t.Errorf("a right [secrets]: %v", err)
	}
}

func TestMCPSecrets(t *testing.T) {
	c, err := Load(writeConfig(t, `[mcp.gh]
command = ["/usr/bin/gh-mcp"]
[mcp.gh.secrets]
env = { GITHUB_TOKEN = "github" }
files = ["ca-key"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.MCP["gh"].Secrets; !reflect.DeepEqual(got, SecretGrants{Env: map[string]string{"GITHUB_TOKEN": "github"}, Files: []string{"ca-key"}}) {
		t.Errorf("Secrets = %+v", got)
	}
	for _, tc := range []struct{ text, key, want string }{
		{"[mcp.gh.secrets]\nenv = { PATH = \"github\" }\n", "mcp.gh.secrets.env.PATH", "PATH is set by the sandbox"},
		{"env = { GITHUB_TOKEN = \"x\" }\n[mcp.gh.secrets]\nenv = { GITHUB_TOKEN = \"github\" }\n", "mcp.gh.secrets.env.GITHUB_TOKEN", "GITHUB_TOKEN is also in env,"},
		{"env_pass = [\"GITHUB_TOKEN\"]\n[mcp.gh.secrets]\nenv = { GITHUB_TOKEN = \"github\" }\n", "mcp.gh.secrets.env.GITHUB_TOKEN", "GITHUB_TOKEN is also in env_pass"},
		{"[mcp.gh.sandbox.env]\npass = [\"GITHUB_TOKEN\"]\n[mcp.gh.secrets]\nenv = { GITHUB_TOKEN = \"github\" }\n", "mcp.gh.secrets.env.GITHUB_TOKEN", "GITHUB_TOKEN is also in sandbox.env.pass"},
		{"[mcp.gh.secrets]\nfiles = [\"Bad\"]\n", "mcp.gh.secrets.files[0]", `"Bad" is not a secret name`},
	} {
		_, err := Load(writeConfig(t, "[mcp.gh]\ncommand = [\"/usr/bin/gh-mcp\"]\n"+tc.text))
		var e *Error
		if !errors.As(err, &e) || e.Key != tc.key || !strings.Contains(e.Msg, tc.want) {
			t.Errorf("%q: %v; want key %s saying %q", tc.text, err, tc.key, tc.want)
		}
	}
}

func TestSecretsConfig(t *testing.T) {
	c, err := Load(writeConfig(t, `[secrets]
dir = "/srv/kairo-secrets"
[secrets.external.ca-key]
file = "/etc/kairo/ca-key.pem"
[secrets.external."db.password"]
env = "DB_PASSWORD"
`))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.SecretsPath("/home/k"); p != "/srv/kairo-secrets" {
		t.Errorf("SecretsPath = %q", p)
	}
	want := map[string]secrets.Source{"ca-key": {File: "/etc/kairo/ca-key.pem"}, "db.password": {Env: "DB_PASSWORD"}}
	if got := c.Secrets.Sources(); !reflect.DeepEqual(got, want) {
		t.Errorf("Sources = %v; want %v", got, want)
	}
	if d := Default(); d.SecretsPath("/home/k") != filepath.Join("/home/k", "secrets") {
		t.Errorf("the default SecretsPath = %q", d.SecretsPath("/home/k"))
	}
	for _, tc := range []struct{ text, key, want string }{
		{"[secrets]\ndir = \"\"\n", "secrets.dir", "is empty; name the store's folder"},
		{"[secrets.external.ca]\nfile = \"/a\"\nenv = \"A\"\n", "secrets.external.ca", "one of the two"},
		{"[secrets.external.ca]\n", "secrets.external.ca", "one of the two"},
		{"[secrets.external.ca]\nfile = \"ca.pem\"\n", "secrets.external.ca.file", `"ca.pem" is relative; give the file's absolute path`},
		{"[secrets.external.ca]\nenv = \"A-B\"\n", "secrets.external.ca.env", `"A-B" is not an environment variable name`},
		{"[secrets.external.CA]\nenv = \"CA\"\n", "secrets.external.CA", `"CA" is not a secret name`},
		{"[secrets.external.ca]\npath = \"/a\"\n", "secrets.external.ca.path", "unknown"},
	} {
		path := writeConfig(t, tc.text)
		_, err := Load(path)
		var e *Error
		if !errors.As(err, &e) || e.Key != tc.key || !strings.Contains(e.Msg, tc.want) || e.File != path || e.Line == 0 {
			t.Errorf("%q: %v; want %s:LINE key %s saying %q", tc.text, err, path, tc.key, tc.want)
		}
	}
}
