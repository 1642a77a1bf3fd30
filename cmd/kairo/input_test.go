package main

import (
	"github.com/kairo-os/kairo/abi"

	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The built-in input sources are plugins: a line typed at kairo chat goes
// through the terminal plugin, which makes it the user message the agent
// answers; a timer of the timer plugin, set in kairo.toml, sends the agent
// its message when due. Either way the agent runs the task to its end.
func TestInputSources(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	toml := `
[[plugins.timer.config.timers]]
name = "every-second"
every = "1s"
say = "run echo from-timer"
` + grantAsManifest(t, "terminal", "timer")
	if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	startUp(t, home)
	if r := kairo(t, home, "tools"); r.code != 0 || !strings.Contains(r.stdout, abi.MethodProcessSpawn) || !strings.Contains(r.stdout, abi.MethodProcessWait) {
		t.Fatalf("kairo tools on the daemon:\n%s", r)
	}

	r := kairoStdin(t, home, strings.NewReader("run echo chat-ok\n"), "chat")
	if r.code != 0 || strings.Contains(r.stdout, "does not run") {
		t.Fatalf("kairo chat:\n%s", r)
	}
	waitRuns := func(goal string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			r := kairo(t, home, "runs", "--limit", "100")
			if regexpMatch(`(?m)\sdone\s+\d+\s+0\s+`+goal+`$`, r.stdout) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no finished run loop %q:\n%s", goal, r)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitRuns("run echo chat-ok")
	waitRuns("run echo from-timer")

	r = kairo(t, home, "events", "replay", "--json", "kairo.user.message")
	if !strings.Contains(r.stdout, `"source":"plugin/terminal"`) || !strings.Contains(r.stdout, `"source":"plugin/timer"`) || !strings.Contains(r.stdout, `"messageId":"timer:every-second:`) {
		t.Fatalf("the user messages do not come from the plugins:\n%s", r)
	}
}
