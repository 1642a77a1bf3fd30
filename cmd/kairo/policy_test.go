package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `kairo up` with a policy no plugin provides stops at the start, with the
// file, the line, the key, the value and the policies to choose from, as
// it says of a key misspelled; it once started and failed every tick. The
// control, a policy that runs, starts and stops cleanly.
func TestUpRefusesAnUnknownPolicy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy string
		fails  bool
	}{{"llmm", true}, {"rules", false}} {
		t.Run(tc.policy, func(t *testing.T) {
			home := t.TempDir()
			config := filepath.Join(home, "kairo.toml")
			if err := os.WriteFile(config, []byte("# the agent\n[agent]\npolicy = \""+tc.policy+"\"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if !tc.fails {
				if code := startUp(t, home).stop(); code != 0 {
					t.Fatalf("kairo up with policy %q stopped with exit code %d", tc.policy, code)
				}
				return
			}
			r := kairo(t, home, "up", "--home", home)
			want := config + `:3: agent.policy: "llmm" names no installed plugin; the policy plugins that run are "llm", "rules": set [agent] policy to one of them in kairo.toml`
			if r.code == 0 || !strings.Contains(r.stderr, want) {
				t.Fatalf("kairo up with policy %q: %s\nwant an exit code other than 0 and %q", tc.policy, r, want)
			}
			if strings.Contains(r.stderr, "kairo is up") {
				t.Fatalf("kairo up said it is up:\n%s", r.stderr)
			}
		})
	}
}
