package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandLine checks exit codes and messages of command lines that need
// no running kernel: bad input is refused before kairo dials.
func TestCommandLine(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	badConfig := filepath.Join(home, "bad.toml")
	if err := os.WriteFile(badConfig, []byte("[store]\nkind = \"postgres\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string // substring; "" means any
		stderr string
	}{
		{"no command", nil, 2, "", "usage: kairo COMMAND"},
		{"unknown command", []string{"frobnicate"}, 2, "", `kairo: unknown command "frobnicate"; ` + "`kairo help`"},
		{"unknown events command", []string{"events", "frob"}, 2, "", `unknown command "frob"; ` + "`kairo events help`"},
		{"help", []string{"help"}, 0, "commands:\n  up ", ""},
		{"help for a command", []string{"help", "events", "replay"}, 0, "usage: kairo events replay", ""},
		{"-h", []string{"events", "publish", "-h"}, 0, "usage: kairo events publish [flags] SUBJECT [JSON]", ""},
		{"unknown flag", []string{"events", "tail", "--bogus"}, 2, "", "flag provided but not defined: -bogus"},
		{"missing subject", []string{"events", "publish"}, 2, "", "kairo: missing arguments\nusage: kairo events publish"},
		{"too many arguments", []string{"version", "extra"}, 2, "", `too many arguments: ["extra"]`},
		{"bad subject", []string{"events", "publish", "bad subject", "{}"}, 1, "",
			`kairo: invalid subject "bad subject": byte 3 is whitespace or a control character`},
		{"wildcard subject", []string{"events", "publish", "a.*", "{}"}, 1, "", `wildcard "*" is only allowed in subscription patterns`},
		{"bad JSON", []string{"events", "publish", "a.b", "{bad"}, 1, "",
			"kairo: invalid JSON data at line 1, column 2: invalid character 'b' looking for beginning of object key string"},
		{"truncated JSON", []string{"events", "publish", "a.b", `{"a":[1,`}, 1, "", "line 1, column 9: the JSON ends before the value is complete"},
		{"two JSON values", []string{"events", "publish", "a.b", `1 2`}, 1, "", "column 3: invalid character '2' after top-level value"},
		{"bad pattern", []string{"events", "tail", "a.>.b"}, 1, "", `'>' must be the last token`},
		{"negative limit", []string{"events", "replay", "--limit", "-1"}, 2, "", "must not be negative"},
		{"no kernel", []string{"ping"}, 1, "", "kairo: the kernel is not running: nothing listens on " + filepath.Join(home, "kernel.sock")},
		{"bad config", []string{"up", "--home", home, "--config", badConfig}, 1, "",
			"kairo: " + badConfig + `:2: store.kind: "postgres" is not a store kind`},
		{"missing config", []string{"up", "--home", home, "--config", filepath.Join(home, "nope.toml")}, 1, "", "--config: stat"},
		{"spawn without a command", []string{"spawn", "--pty"}, 2, "", "kairo: missing the command to run\nusage: kairo spawn"},
		{"spawn with a bad mode", []string{"spawn", "--mode", "word", "--", "true"}, 2, "", `kairo: --mode "word": want chunk or line`},
		{"spawn leaves the command's flags", []string{"spawn", "ls", "-l", "--bogus"}, 1, "", "kairo: the kernel is not running"},
		{"kill without an ID", []string{"kill", "--signal", "TERM"}, 2, "", "kairo: missing arguments\nusage: kairo kill"},
		{"kill with a negative wait", []string{"kill", "--wait", "-1s", "p1"}, 2, "", "--wait must not be negative"},
		{"attach without an ID", []string{"attach"}, 2, "", "usage: kairo attach"},
		{"version", []string{"version"}, 0, "kairo dev (ABI 1, go", ""},
		{"version --json", []string{"version", "--json"}, 0, `{"version":"dev","abiVersion":1,"go":"go`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := kairo(t, home, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stdout, tc.stdout) || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("kairo %s:\n%s\nwant exit %d, stdout with %q, stderr with %q", strings.Join(tc.args, " "), r, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}
