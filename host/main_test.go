package host_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kairo-os/kairo/host"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sandbox"
)

// The daemons of these tests spawn their processes through this test
// binary as the sandbox helper, as a program that embeds Kairo does: the
// hook comes first (the Example shows it in a program's main).
func TestMain(m *testing.M) {
	if sandbox.IsHelper() {
		sandbox.HelperMain() // confine this process and exec the target; never returns
	}
	os.Exit(m.Run())
}

// loadConfig writes toml as home's kairo.toml and loads it.
func loadConfig(t *testing.T, home, toml string) (manifests.Config, error) {
	t.Helper()
	path := filepath.Join(home, "kairo.toml")
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	return manifests.Load(path)
}

// startWith starts a daemon on home with toml as its kairo.toml; it stops
// when the test ends.
func startWith(t *testing.T, home, toml string) *host.Daemon {
	t.Helper()
	cfg, err := loadConfig(t, home, toml)
	if err != nil {
		t.Fatal(err)
	}
	d := host.New(host.Config{Home: home, Config: cfg})
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	return d
}
