package agent

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host/wasm"
	"github.com/kairo-os/kairo/internal/wasmbuild"
)

// hostileDir holds host/wasm/testdata/hostile as a policy plugin that
// panics on every batch, built once, by TestMain.
var hostileDir = sync.OnceValues(func() (string, error) {
	dir := filepath.Join(filepath.Dir(pluginDir), "hostile") // removed with pluginDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := wasmbuild.Build("./host/wasm/testdata/hostile", filepath.Join(dir, "hostile.wasm")); err != nil {
		return "", err
	}
	manifest := "[plugin]\nname = \"hostile\"\nkinds = [\"policy\"]\n\n[config]\nmode = \"panic\"\n"
	return dir, os.WriteFile(filepath.Join(dir, "hostile.toml"), []byte(manifest), 0o600)
})

// A policy plugin that traps on every tick, asked at 100 Hz for 3 s with a
// message waiting, is reported at once and then with backoff: a handful
// of kairo.agent.error events, the later ones counting the failures not
// reported, never one per tick. The control, the rule policy on the same
// message, reports none.
func TestFailingPolicyReportedWithBackoff(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  func(t *testing.T, e *env) Policy
		failing bool
	}{
		{"failing", func(t *testing.T, e *env) Policy {
			dir, err := hostileDir()
			if err != nil {
				t.Fatal(err)
			}
			m := wasm.NewManager(wasm.ManagerConfig{Engine: wasmEngine, Kernel: e.kernel, Folders: []wasm.Folder{{Path: dir, Builtin: true}}, Logger: quiet})
			if err := m.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(m.Stop)
			return PluginPolicy(m, "hostile")
		}, true},
		{"healthy", func(t *testing.T, e *env) Policy { return e.rules() }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each waits 3 s with a kernel, a store and plugins of its own:
			// side by side, the package waits 3 s less.
			t.Parallel()
			e := newEnv(t)
			p := tc.policy(t, e)
			var asked atomic.Int64
			e.start(Config{Hz: 100, Policy: PolicyFunc(func(ctx context.Context, b *abi.Batch) (*abi.Reply, error) {
				asked.Add(1)
				return p.Decide(ctx, b)
			})})
			e.say("hello", "")
			time.Sleep(3 * time.Second)
			errs := e.events.all(typed(abi.SubjectAgentError))
			if !tc.failing {
				if len(errs) != 0 {
					t.Fatalf("the healthy policy: %d kairo.agent.error events; want none:\n%s", len(errs), e.events.dump())
				}
				return
			}
			// Reports at 0 s, 1 s and 3 s; one more for a slow machine.
			if len(errs) == 0 || len(errs) > 4 {
				t.Fatalf("a policy failing %d times in 3 s: %d kairo.agent.error events; want 1 to 4:\n%s", asked.Load(), len(errs), e.events.dump())
			}
			if n := asked.Load(); n < 10 {
				t.Fatalf("the policy was asked %d times in 3 s; the bound means nothing under 10", n)
			}
			suppressed := 0
			for i := range errs {
				d := decodeAs[abi.AgentError](t, &errs[i])
				if i == 0 && d.Suppressed != 0 {
					t.Fatalf("the first report counts %d failures before it", d.Suppressed)
				}
				suppressed += d.Suppressed
			}
			if len(errs) > 1 && suppressed == 0 {
				t.Fatalf("the later reports count no failures left unreported: %+v", errs)
			}
			t.Logf("%d failures, %d reported, %d counted as unreported", asked.Load(), len(errs), suppressed)
		})
	}
}
