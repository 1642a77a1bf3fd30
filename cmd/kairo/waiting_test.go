package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/internal/wasmbuild"
)

// A drop-in plugin whose manifest asks for more than it was granted runs
// without it; `kairo up` on a terminal says so before its prompt, with the
// command that grants it, and the log file has it too. The control: the
// same drop-in granted all it asks in kairo.toml starts without a word.
func TestUpTellsWhatWaitsForAGrant(t *testing.T) {
	t.Parallel()
	dropIns := t.TempDir()
	if err := wasmbuild.Plugin("echo", dropIns); err != nil {
		t.Fatal(err)
	}
	const command = `kairo plugins grant echo 'publish=echo.>' 'subscribe=demo.>'`
	for _, tc := range []struct {
		name, config string
		warns        bool
	}{
		{"asks", "", true},
		{"granted", "[plugins.echo.grants]\nsubscribe = [\"demo.>\"]\npublish = [\"echo.>\"]\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			plugins := filepath.Join(home, "plugins")
			if err := os.MkdirAll(plugins, 0o700); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"echo.wasm", "echo.toml"} {
				b, err := os.ReadFile(filepath.Join(dropIns, f))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(plugins, f), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte(tc.config), 0o600); err != nil {
				t.Fatal(err)
			}
			d := startUpPTY(t, home) // returns once the prompt shows
			d.stop()
			screen := d.out.String()
			logged, err := os.ReadFile(filepath.Join(home, "kairo.log"))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.warns {
				if strings.Contains(screen, "not granted") || strings.Contains(string(logged), "not granted") {
					t.Fatalf("a warning of a grant with nothing waiting:\n%q\n%s", screen, logged)
				}
				return
			}
			prompt := strings.Index(screen, "you> ")
			if i := strings.Index(screen, "kairo: plugin echo runs without what it asked for and was not granted (publish=echo.> subscribe=demo.>); to grant it: "+command); i < 0 || i > prompt {
				t.Fatalf("the terminal before the prompt does not tell what waits for a grant and the command %q:\n%q", command, screen)
			}
			if !strings.Contains(string(logged), "level=WARN") || !strings.Contains(string(logged), command) {
				t.Fatalf("the log file does not have the warning with %q:\n%s", command, logged)
			}
		})
	}
}
