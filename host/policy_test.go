package host_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/host"
	"github.com/kairo-os/kairo/manifests"
)

// A daemon whose [agent] policy names no policy plugin that runs — a
// name no plugin has, a plugin that is not a policy, a policy plugin
// that does not load — does not start: the error names the key, the
// value and the policy plugins that run. Every tick would fail
// otherwise. The control, a policy that runs, starts.
func TestDaemonRefusesAPolicyThatCannotRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy string
		want   []string // in the error; nil: the daemon starts
	}{
		{"llmm", []string{`"llmm" names no installed plugin`, `the policy plugins that run are "llm", "rules"`, "[agent] policy", `or install "llmm" in `}},
		{"terminal", []string{`the plugin "terminal" is not a policy (it is of kind input)`, `the policy plugins that run are "llm", "rules"`, "[agent] policy"}},
		{"broken", []string{`the policy plugin "broken" did not start (refused: `, `the policy plugins that run are "llm", "rules"`, "[agent] policy"}},
		{"rules", nil},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			home := t.TempDir()
			// A drop-in policy whose module is no wasm: it is refused.
			plugins := filepath.Join(home, "plugins")
			if err := os.MkdirAll(plugins, 0o700); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(plugins, "broken.wasm"), []byte("not a module"), 0o600)
			os.WriteFile(filepath.Join(plugins, "broken.toml"), []byte("[plugin]\nname = \"broken\"\nkinds = [\"policy\"]\n"), 0o600)
			cfg := manifests.Default()
			cfg.Agent.Policy = tc.policy
			d := host.New(host.Config{Home: home, Config: cfg})
			err := d.Start()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("policy %q: %v", tc.policy, err)
				}
				d.Stop(context.Background())
				return
			}
			if err == nil {
				d.Stop(context.Background())
				t.Fatalf("policy %q: the daemon started", tc.policy)
			}
			var bad *manifests.Error
			if !errors.As(err, &bad) || bad.Key != "agent.policy" {
				t.Fatalf("policy %q: %v (%T); want a *manifests.Error of agent.policy", tc.policy, err, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("policy %q: %v\nwant it to say %q", tc.policy, err, w)
				}
			}
			// What it started stopped again: the home takes a daemon.
			cfg.Agent.Policy = "rules"
			again := host.New(host.Config{Home: home, Config: cfg})
			if err := again.Start(); err != nil {
				t.Fatalf("a daemon after the refused one: %v", err)
			}
			again.Stop(context.Background())
		})
	}
}
