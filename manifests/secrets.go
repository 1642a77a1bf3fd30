package manifests

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/kairo-os/kairo/kernel/secrets"
)

// SecretGrants is the [secrets] table of a skill manifest, and of an MCP
// server ([mcp.NAME.secrets]): the operator's secrets the process tree
// gets when the kernel spawns it, and how. Secrets are named as the store
// names them (`kairo secrets list`); their values never appear in a
// manifest.
//
//	[secrets]
//	env = { DEPLOY_TOKEN = "deploy" }  # the variable DEPLOY_TOKEN holds the secret deploy
//	files = ["ca-key"]                 # $KAIRO_SECRETS/ca-key, a 0400 file only this tree reads
//	children = false                   # what it starts through the kernel gets them too
type SecretGrants struct {
	// Env maps an environment variable to the secret it holds.
	Env map[string]string `toml:"env"`
	// Files are the secrets written each to a file of its name in the
	// folder $KAIRO_SECRETS names.
	Files []string `toml:"files"`
	// Children gives the secrets to the processes the tree starts through
	// the kernel as well; false keeps them to the tree the kernel spawned.
	Children bool `toml:"children"`
}

// Names is every secret the grants name, sorted, each once.
func (g SecretGrants) Names() []string {
	var names []string
	for _, n := range g.Env {
		names = append(names, n)
	}
	names = append(names, g.Files...)
	slices.Sort(names)
	return slices.Compact(names)
}

// Empty reports whether the grants give no secret.
func (g SecretGrants) Empty() bool { return len(g.Env) == 0 && len(g.Files) == 0 }

// sandboxVars are the variables the sandbox and the kernel set in a
// process tree's environment, besides those of the KAIRO_ prefix: a secret
// in one of them would be overwritten, or would overwrite what the tree
// relies on.
var sandboxVars = []string{"PATH", "HOME", "TMPDIR", "LANG",
	"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy"}

// keyProblem is a problem with a key under a [secrets] table: the key's
// elements below the table, and what to do.
type keyProblem struct {
	key toml.Key
	msg string
}

// check finds the problems of the grants. others are the variables the
// manifest sets or passes otherwise, with the key that does ("env.set").
func (g SecretGrants) check(others map[string]string) []keyProblem {
	var out []keyProblem
	bad := func(k toml.Key, format string, args ...any) {
		out = append(out, keyProblem{k, fmt.Sprintf(format, args...)})
	}
	given := map[string]string{} // secret → the variable that holds it
	for _, v := range sortedKeys(g.Env) {
		k, name := toml.Key{"env", v}, g.Env[v]
		switch {
		case !identRE.MatchString(v):
			bad(k, "%q is not an environment variable name; use letters, digits and _, starting with a letter or _, such as \"DEPLOY_TOKEN\"", v)
		case slices.Contains(sandboxVars, v) || strings.HasPrefix(v, "KAIRO_"):
			bad(k, "%s is set by the sandbox or the kernel, and would not hold the secret; name another variable, such as \"DEPLOY_TOKEN\"", v)
		case others[v] != "":
			bad(k, "%s is also in %s, and the two would clash; keep one", v, others[v])
		}
		if err := secrets.ValidName(name); err != nil {
			bad(k, "%v", err)
		} else if prev, ok := given[name]; ok {
			bad(k, "the secret %s is in %s already; give it in one variable", name, prev)
		} else {
			given[name] = v
		}
	}
	for i, name := range g.Files {
		k := toml.Key{"files", index(i)}
		if err := secrets.ValidName(name); err != nil {
			bad(k, "%v", err)
		} else if j := slices.Index(g.Files, name); j < i {
			bad(k, "the secret %s is listed already, as files[%d]; list it once", name, j)
		}
	}
	return out
}

// SecretsConfig is the [secrets] table of kairo.toml: where the store
// keeps the operator's secrets, and the secrets it reads from elsewhere.
type SecretsConfig struct {
	// Dir is the store's folder, relative to KAIRO_HOME; mode 0700, one
	// 0600 file a secret (`kairo secrets set NAME`).
	Dir string `toml:"dir"`
	// External are secrets the operator keeps outside the store,
	// [secrets.external.NAME]: a file, or a variable of the daemon's
	// environment.
	External map[string]SecretSource `toml:"external"`
}

// SecretSource is a [secrets.external.NAME] table: exactly one of File,
// an absolute path, and Env, a variable of the daemon's environment.
type SecretSource struct {
	File string `toml:"file"`
	Env  string `toml:"env"`
}

// Sources is External as the store takes it.
func (c SecretsConfig) Sources() map[string]secrets.Source {
	out := make(map[string]secrets.Source, len(c.External))
	for name, s := range c.External {
		out[name] = secrets.Source{File: s.File, Env: s.Env}
	}
	return out
}

// SecretsPath is the secret store's folder of a daemon whose data folder is
// home.
func (c *Config) SecretsPath(home string) string { return underHome(home, c.Secrets.Dir) }

func (c SecretsConfig) validate() []*Error {
	var errs []*Error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if c.Dir == "" {
		bad("secrets.dir", "is empty; name the store's folder, such as \"secrets\" (relative to KAIRO_HOME)")
	}
	for _, name := range sortedKeys(c.External) {
		s, key := c.External[name], "secrets.external."+name
		if err := secrets.ValidName(name); err != nil {
			bad(key, "%v", err)
		}
		switch {
		case (s.File == "") == (s.Env == ""):
			bad(key, "give file = \"/abs/path\" or env = \"VARIABLE\", one of the two")
		case s.File != "" && !filepath.IsAbs(s.File):
			bad(key+".file", "%q is relative; give the file's absolute path, such as \"/etc/kairo/%s\"", s.File, name)
		case s.Env != "" && !identRE.MatchString(s.Env):
			bad(key+".env", "%q is not an environment variable name; use letters, digits and _, such as \"GITHUB_TOKEN\"", s.Env)
		}
	}
	return errs
}
