package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// The values the tests set: none of them may show anywhere but in its
// store file.
const (
	deployValue = "tok-deploy-V4LU3-never-shown"
	caValue     = "-----BEGIN KEY----- c4-V4LU3 -----END KEY-----"
)

// deployerSkill names the secrets deploy (in a variable) and ca-key (a
// file), and one set nowhere.
const deployerSkill = `[skill]
name = "deployer"
command = ["/bin/true"]
[fs]
exec = ["/bin/true"]
[secrets]
env = { DEPLOY_TOKEN = "deploy", OTHER = "unset-one" }
files = ["ca-key"]
children = true
`

// secretsHome is a data folder with the deployer skill installed and an
// MCP server and an external secret in its kairo.toml.
func secretsHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, "skills", "deployer"), 0o700)
	os.WriteFile(filepath.Join(home, "skills", "deployer", "skill.toml"), []byte(deployerSkill), 0o600)
	os.WriteFile(filepath.Join(home, "kairo.toml"), []byte(`[mcp.gh]
command = ["/usr/bin/gh-mcp"]
[mcp.gh.secrets]
env = { GITHUB_TOKEN = "github" }
[secrets.external.github]
env = "KAIRO_TEST_GITHUB_TOKEN"
`), 0o600)
	return home
}

// noValueOutside fails when a file of home, but the store's file of the
// secret, holds one of the values.
func noValueOutside(t *testing.T, home string, values ...string) {
	t.Helper()
	filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(path)
		for _, v := range values {
			if bytes.Contains(b, []byte(v)) && filepath.Dir(path) != filepath.Join(home, "secrets") {
				t.Errorf("%s holds a secret's value", path)
			}
		}
		return nil
	})
}

func TestSecretsSetListRm(t *testing.T) {
	t.Parallel()
	home := secretsHome(t)
	r := kairoStdin(t, home, strings.NewReader(deployValue+"\n"), "secrets", "set", "deploy")
	if r.code != 0 || r.stdout != "set deploy (28 bytes)\n" {
		t.Fatalf("secrets set from stdin:\n%s", r)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(caFile, []byte(caValue+"\n"), 0o600)
	if r := kairo(t, home, "secrets", "set", "--file", caFile, "ca-key"); r.code != 0 || r.stdout != "set ca-key (46 bytes)\n" {
		t.Fatalf("secrets set --file:\n%s", r)
	}
	store := filepath.Join(home, "secrets")
	for path, want := range map[string]os.FileMode{store: 0o700, filepath.Join(store, "deploy"): 0o600, filepath.Join(store, "ca-key"): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, mode %v; want %04o", path, err, fi.Mode().Perm(), want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(store, "deploy")); string(b) != deployValue {
		t.Errorf("the store holds %q; want the value without its newline", b)
	}

	r = kairo(t, home, "secrets", "list")
	if r.code != 0 {
		t.Fatalf("secrets list:\n%s", r)
	}
	for _, want := range []string{
		"NAME", "USED BY",
		"ca-key", "store", "skill deployer (file, children too)",
		"deploy", "skill deployer (env DEPLOY_TOKEN, children too)",
		"github", "env KAIRO_TEST_GITHUB_TOKEN", "mcp gh (env GITHUB_TOKEN)",
		"unset-one", "missing",
		"unset-one is named but set nowhere: `kairo secrets set unset-one` stores it",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("secrets list does not say %q:\n%s", want, r.stdout)
		}
	}
	r = kairo(t, home, "secrets", "list", "--json")
	var got []secretJSON
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var e secretJSON
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("secrets list --json: %v\n%s", err, r)
		}
		got = append(got, e)
	}
	if len(got) != 4 || got[1].Name != "deploy" || got[1].Source != "store" || len(got[1].UsedBy) != 1 || got[1].UsedBy[0].Env != "DEPLOY_TOKEN" {
		t.Errorf("secrets list --json = %+v", got)
	}
	for _, out := range []string{r.stdout, r.stderr, kairo(t, home, "secrets", "list").stdout} {
		if strings.Contains(out, deployValue) || strings.Contains(out, "V4LU3") {
			t.Errorf("secrets list shows a value:\n%s", out)
		}
	}
	noValueOutside(t, home, deployValue, caValue)

	if r := kairo(t, home, "secrets", "rm", "deploy"); r.code != 0 || r.stdout != "removed deploy\n" {
		t.Fatalf("secrets rm:\n%s", r)
	}
	if _, err := os.Stat(filepath.Join(store, "deploy")); err == nil {
		t.Error("secrets rm left the file")
	}
	if r := kairo(t, home, "secrets", "rm", "deploy"); r.code != 1 || !strings.Contains(r.stderr, "no such secret") {
		t.Errorf("secrets rm of a removed secret:\n%s", r)
	}
	if r := kairo(t, home, "secrets", "list"); !regexpMatch(`(?m)^deploy +missing +skill deployer`, r.stdout) {
		t.Errorf("after rm, deploy is not listed as missing:\n%s", r)
	}
}

// A value is never read from the command line: an extra argument is
// refused, saying how to give the value, and nothing is stored. The
// control: the same value on stdin is stored.
func TestSecretsSetRefusesArgv(t *testing.T) {
	home := secretsHome(t)
	r := kairo(t, home, "secrets", "set", "deploy", deployValue)
	if r.code != 2 || !strings.Contains(r.stderr, "never given on the command line") || !strings.Contains(r.stderr, "stdin or give --file PATH") {
		t.Errorf("secrets set NAME VALUE:\n%s", r)
	}
	if strings.Contains(r.stderr, deployValue) {
		t.Errorf("the refusal repeats the value:\n%s", r)
	}
	if _, err := os.Stat(filepath.Join(home, "secrets", "deploy")); err == nil {
		t.Error("a value from the command line was stored")
	}
	if r := kairoStdin(t, home, strings.NewReader(deployValue), "secrets", "set", "deploy"); r.code != 0 {
		t.Errorf("the control, from stdin:\n%s", r)
	}
}

// Bad names and values are refused with why; a folder others may read is
// refused with the chmod that mends it.
func TestSecretsSetRefuses(t *testing.T) {
	t.Parallel()
	home := secretsHome(t)
	for _, c := range []struct {
		args  []string
		stdin string
		code  int
		want  string
	}{
		{[]string{"set", "Deploy"}, deployValue, 1, `"Deploy" is not a secret name`},
		{[]string{"set", "../x"}, deployValue, 1, "is not a secret name"},
		{[]string{"set", "deploy"}, "short\n", 1, "at least 6"},
		{[]string{"set", "deploy"}, "", 1, "at least 6"},
		{[]string{"set", "github"}, deployValue, 1, "external"},
		{[]string{"set"}, deployValue, 2, "missing arguments"},
		{[]string{"set", "--file", "/nonexistent", "deploy"}, "", 1, "no such file"},
		{[]string{"rm", "Deploy"}, "", 1, "not a secret name"},
		{[]string{"nope"}, "", 2, "unknown command"},
	} {
		r := kairoStdin(t, home, strings.NewReader(c.stdin), append([]string{"secrets"}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("secrets %q: want exit %d saying %q; got\n%s", c.args, c.code, c.want, r)
		}
	}
	os.Chmod(filepath.Join(home, "secrets"), 0o755)
	r := kairoStdin(t, home, strings.NewReader(deployValue), "secrets", "set", "deploy")
	if r.code != 1 || !strings.Contains(r.stderr, "chmod 700") {
		t.Errorf("secrets set into a 0755 folder:\n%s", r)
	}
	os.Chmod(filepath.Join(home, "secrets"), 0o700)
	if r := kairoStdin(t, home, strings.NewReader(deployValue), "secrets", "set", "deploy"); r.code != 0 {
		t.Errorf("the control, at 0700:\n%s", r)
	}
}

// On a terminal the value is typed without echo: the terminal shows the
// prompt and the result, never the value.
func TestSecretsSetTerminal(t *testing.T) {
	home := secretsHome(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kairoBin, "secrets", "set", "deploy")
	cmd.Env = childEnv(home)
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	var shown syncBuffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			shown.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	for !strings.Contains(shown.String(), "not shown") {
		if ctx.Err() != nil {
			t.Fatalf("no prompt: %q", shown.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	tty.Write([]byte(deployValue + "\n"))
	cmd.Wait()
	<-read
	if out := shown.String(); strings.Contains(out, deployValue) || !strings.Contains(out, "set deploy (28 bytes)") {
		t.Errorf("the terminal showed %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "secrets", "deploy")); string(b) != deployValue {
		t.Errorf("stored %q", b)
	}
}
