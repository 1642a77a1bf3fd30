package wasm

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/testkit"
	"github.com/kairo-os/kairo/manifests"
)

// A drop-in whose manifest and init ask for more than it was granted runs
// without it; the log says so in a warning that names the plugin, what it
// asked for, and the command that grants it, quoted for a shell — once,
// not on each restart. The control, the same drop-in with all of it
// granted in kairo.toml, and the same plugin built in, start without one.
func TestDropInWaitingForAGrantIsTold(t *testing.T) {
	const want = `plugin asker runs without what it asked for and was not granted (call=process.spawn publish=app.> subscribe=boom.>); to grant it: kairo plugins grant asker call=process.spawn 'publish=app.>' 'subscribe=boom.>'`
	for _, tc := range []struct {
		name      string
		overrides map[string]manifests.PluginOverride
		folder    Folder
		warns     bool
	}{
		{"drop-in", nil, Folder{}, true},
		{"drop-in granted", map[string]manifests.PluginOverride{"asker": {Grants: manifests.OperatorGrants{
			Call: []string{abi.MethodProcessSpawn}, Publish: []string{"app.>"}, Subscribe: []string{"boom.>"},
		}}}, Folder{}, false},
		{"built-in", nil, Folder{Builtin: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newManagerEnv(t)
			var log testkit.SyncBuffer
			e.drop("asker", "asker", fmt.Sprintf(askerManifest, "noop", 0))
			tc.folder.Path = e.dir
			m := e.startFolder(ManagerConfig{Overrides: tc.overrides, Logger: slog.New(slog.NewTextHandler(&log, nil))}, tc.folder)
			e.waitState("asker", abi.PluginRunning)
			if err := m.Restart("asker"); err != nil {
				t.Fatal(err)
			}
			e.waitState("asker", abi.PluginRunning)
			text := log.String()
			n := strings.Count(text, "level=WARN msg=\""+strings.ReplaceAll(want, `"`, `\"`))
			switch {
			case tc.warns && n != 1:
				t.Fatalf("%d warnings of what waits for a grant; want 1 saying\n%s\nlog:\n%s", n, want, text)
			case !tc.warns && strings.Contains(text, "was not granted"):
				t.Fatalf("a warning of what waits for a grant, with nothing waiting:\n%s", text)
			}
		})
	}
}
