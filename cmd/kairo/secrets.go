package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/kairo-os/kairo/kernel/secrets"
	"github.com/kairo-os/kairo/manifests"
)

var secretsCommands []command

func init() {
	// Set here, not in the declaration: help refers to secretsCommands.
	secretsCommands = []command{
		{"set", "store a secret, its value read from stdin or --file: kairo secrets set NAME", runSecretsSet},
		{"list", "the secrets' names, where each is kept, and the skills and MCP servers that use it", runSecretsList},
		{"rm", "remove a stored secret: kairo secrets rm NAME", runSecretsRm},
		{"help", "show this help, or a command's: kairo secrets help COMMAND", runSecretsHelp},
	}
}

func runSecrets(ctx context.Context, args []string) error {
	if len(args) == 0 {
		printSecretsUsage(os.Stderr)
		return errUsageShown
	}
	return dispatch(ctx, secretsCommands, "kairo secrets", args)
}

func runSecretsHelp(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] != "-h" {
		return dispatch(ctx, secretsCommands, "kairo secrets", append(args[:len(args):len(args)], "-h"))
	}
	printSecretsUsage(os.Stdout)
	return nil
}

func printSecretsUsage(w io.Writer) {
	fmt.Fprint(w, `usage: kairo secrets COMMAND [flags] [args]

The operator's secrets: tokens, keys and passwords that a skill's manifest
(or an MCP server's table in kairo.toml) names in its [secrets] table. The
kernel reads a secret when it starts a process tree that names it, and
hides its value (***NAME***) in everything it stores or shows. These
commands work on the data folder's store directly: no daemon needed, and a
change takes effect at the next spawn. No command prints a value.

commands:
`)
	for _, c := range secretsCommands {
		fmt.Fprintf(w, "  %-5s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun \"kairo secrets COMMAND -h\" for a command's flags.\n")
}

// openSecrets opens the secret store of the client's data folder, and
// returns the config it read.
func openSecrets() (*secrets.Store, manifests.Config, string, error) {
	home := clientHome().dir
	cfg, err := manifests.Load(filepath.Join(home, "kairo.toml"))
	if err != nil {
		return nil, cfg, home, err
	}
	s, err := secrets.Open(cfg.SecretsPath(home), cfg.Secrets.Sources())
	return s, cfg, home, err
}

func runSecretsSet(ctx context.Context, args []string) error {
	f := newFlags("secrets set", "kairo secrets set [--file PATH] NAME", `
Store the secret NAME: its value is read from stdin (typed without echo
when stdin is a terminal), or from the file --file names; one trailing
newline is dropped. A value is never given on the command line: other
users see arguments in ps, and shells keep them in their history.

A name is 1 to 64 of a-z, 0-9, "_", "." and "-"; a value is 6 bytes to
64KiB, with no NUL byte. The value replaces the one NAME held, in one
step; the secrets of kairo.toml [secrets.external] are changed where they
are kept, not here.`)
	file := f.String("file", "", "read the value from this file instead of stdin")
	pos, err := f.parse(args, 1, -1)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return &usageError{msg: "a secret's value is never given on the command line (other users see it in ps, and shells keep it in their history): pipe it on stdin or give --file PATH", synopsis: f.synopsis}
	}
	name := pos[0]
	if err := secrets.ValidName(name); err != nil {
		return err
	}
	value, err := readSecretValue(ctx, name, *file)
	if err != nil {
		return err
	}
	s, _, _, err := openSecrets()
	if err != nil {
		return err
	}
	if err := s.Set(name, value); err != nil {
		return err
	}
	fmt.Printf("set %s (%d bytes)\n", name, len(value))
	return nil
}

// readSecretValue reads a value from the file path, else from stdin (a
// line without echo when it is a terminal), and drops one trailing
// newline. It reads at most a few bytes past secrets.MaxLen.
func readSecretValue(ctx context.Context, name, path string) ([]byte, error) {
	const max = secrets.MaxLen + 2 // and "\r\n"
	var (
		v   []byte
		err error
	)
	switch {
	case path != "":
		var f *os.File
		if f, err = os.Open(path); err != nil {
			return nil, fmt.Errorf("read the value of %s: %w", name, err)
		}
		defer f.Close()
		v, err = io.ReadAll(io.LimitReader(f, max+1))
	case isTerminal(int(os.Stdin.Fd())):
		prompt := fmt.Sprintf("the value of %s (not shown; Enter ends it): ", name)
		v, err = readNoEcho(ctx, os.Stdin, os.Stderr, prompt, max+1)
		fmt.Fprintln(os.Stderr)
	default:
		v, err = io.ReadAll(io.LimitReader(os.Stdin, max+1))
	}
	if err != nil {
		return nil, fmt.Errorf("read the value of %s: %w", name, err)
	}
	if len(v) > max {
		return nil, fmt.Errorf("the value of %s is over %d bytes; a secret is at most that", name, secrets.MaxLen)
	}
	v = bytes.TrimSuffix(v, []byte("\n"))
	return bytes.TrimSuffix(v, []byte("\r")), nil
}

func runSecretsRm(ctx context.Context, args []string) error {
	f := newFlags("secrets rm", "kairo secrets rm NAME", `
Remove the stored secret NAME. A skill that names it fails to start until
it is set again.`)
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	s, _, _, err := openSecrets()
	if err != nil {
		return err
	}
	if err := s.Remove(pos[0]); err != nil {
		return err
	}
	fmt.Printf("removed %s\n", pos[0])
	return nil
}

// secretJSON is a secret as `kairo secrets list --json` prints it: never
// its value.
type secretJSON struct {
	Name string `json:"name"`
	// Source is "store", "file", "env", or "missing": named by a manifest
	// but set nowhere.
	Source string       `json:"source"`
	File   string       `json:"file,omitempty"` // an external file
	Env    string       `json:"env,omitempty"`  // an external variable of the daemon's
	UsedBy []secretUser `json:"usedBy"`
}

// secretUser is a skill or an MCP server whose manifest names a secret.
type secretUser struct {
	Kind     string `json:"kind"` // "skill" or "mcp"
	Name     string `json:"name"`
	Env      string `json:"env,omitempty"` // the variable that holds it
	File     bool   `json:"file"`          // written to a file in $KAIRO_SECRETS
	Children bool   `json:"children"`
}

func (u secretUser) String() string {
	var how []string
	if u.Env != "" {
		how = append(how, "env "+u.Env)
	}
	if u.File {
		how = append(how, "file")
	}
	if u.Children {
		how = append(how, "children too")
	}
	return fmt.Sprintf("%s %s (%s)", u.Kind, u.Name, strings.Join(how, ", "))
}

func runSecretsList(ctx context.Context, args []string) error {
	f := newFlags("secrets list", "kairo secrets list [--json]", `
List the secrets: each one's name, where it is kept (the store, or the
file or variable kairo.toml [secrets.external] names), and the installed
skills and MCP servers whose [secrets] name it, with how each gets it. A
secret a manifest names that is set nowhere is listed as missing. Values
are never shown.

With --json, one JSON object per secret: name, source, file, env, usedBy.`)
	asJSON := f.Bool("json", false, "print one JSON object per secret")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	s, cfg, home, err := openSecrets()
	if err != nil {
		return err
	}
	list := secretList(s, cfg, home)
	if *asJSON {
		for _, e := range list {
			fmt.Printf("%s\n", marshalJSON(e))
		}
		return nil
	}
	if len(list) == 0 {
		fmt.Println("no secrets; store one with `kairo secrets set NAME` (the value on stdin)")
		return nil
	}
	return printSecretList(list)
}

func printSecretList(list []secretJSON) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSOURCE\tUSED BY")
	var missing []string
	for _, e := range list {
		src := e.Source
		switch {
		case e.File != "":
			src += " " + e.File
		case e.Env != "":
			src += " " + e.Env
		case e.Source == "missing":
			missing = append(missing, e.Name)
		}
		users := make([]string, len(e.UsedBy))
		for i, u := range e.UsedBy {
			users[i] = u.String()
		}
		if len(users) == 0 {
			users = []string{"-"}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", e.Name, termLine(src), termLine(strings.Join(users, "; ")))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, name := range missing {
		fmt.Printf("\n%s is named but set nowhere: `kairo secrets set %s` stores it\n", name, name)
	}
	return nil
}

// secretList is every secret the store holds or a manifest names, sorted
// by name, with who uses it.
func secretList(s *secrets.Store, cfg manifests.Config, home string) []secretJSON {
	byName := map[string]*secretJSON{}
	entry := func(name string) *secretJSON {
		if e, ok := byName[name]; ok {
			return e
		}
		e := &secretJSON{Name: name, Source: "missing", UsedBy: []secretUser{}}
		byName[name] = e
		return e
	}
	for _, name := range s.Names() {
		e := entry(name)
		e.Source = "store"
		if src, ok := s.IsExternal(name); ok {
			e.Source, e.File, e.Env = "file", src.File, src.Env
			if src.Env != "" {
				e.Source = "env"
			}
		}
	}
	for _, u := range secretUsers(cfg, home) {
		for _, name := range u.grants.Names() {
			user := u.user
			user.File = slices.Contains(u.grants.Files, name)
			for v, n := range u.grants.Env {
				if n == name {
					user.Env = v
				}
			}
			e := entry(name)
			e.UsedBy = append(e.UsedBy, user)
		}
	}
	out := make([]secretJSON, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, *byName[name])
	}
	return out
}

// secretGrants is a skill's or an MCP server's [secrets], and who it is.
type secretGrants struct {
	user   secretUser
	grants manifests.SecretGrants
}

// maxScannedSkills bounds the skills folder's entries read, as the
// daemon's SkillsFolder does.
const maxScannedSkills = 256

// secretUsers is the installed skills and the MCP servers of cfg that name
// secrets. A skill whose manifest does not load is left out: `kairo
// skills` says why.
func secretUsers(cfg manifests.Config, home string) []secretGrants {
	var out []secretGrants
	if d, err := os.Open(cfg.SkillsPath(home)); err == nil {
		entries, _ := d.ReadDir(maxScannedSkills)
		d.Close()
		slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
		for _, e := range entries {
			sk, err := manifests.LoadSkill(filepath.Join(cfg.SkillsPath(home), e.Name(), "skill.toml"))
			if err != nil || sk.Secrets.Empty() {
				continue
			}
			out = append(out, secretGrants{secretUser{Kind: "skill", Name: sk.Skill.Name, Children: sk.Secrets.Children}, sk.Secrets})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.MCP)) {
		if g := cfg.MCP[name].Secrets; !g.Empty() {
			out = append(out, secretGrants{secretUser{Kind: "mcp", Name: name, Children: g.Children}, g})
		}
	}
	return out
}
