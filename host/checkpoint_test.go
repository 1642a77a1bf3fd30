package host_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/host"
	"github.com/kairo-os/kairo/internal/testkit"
	"github.com/kairo-os/kairo/manifests"
)

// A daemon stopped cleanly leaves the approvals' and the grants'
// checkpoints in its data folder, private to its user, and the next start
// folds from them: the first start says it folds the log from its start,
// the second does not.
func TestDaemonKeepsCheckpoints(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	run := func() string {
		t.Helper()
		var logs testkit.SyncBuffer
		d := host.New(host.Config{Home: home, Config: manifests.Default(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		if err := d.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		return logs.String()
	}
	if logs := run(); strings.Count(logs, "the log is folded from its start") != 2 {
		t.Fatalf("the first start: %s\nwant the approvals and the grants folded from the log's start", logs)
	}
	for _, name := range []string{"approvals.ckp", "grants.ckp"} {
		if fi, err := os.Stat(filepath.Join(home, "checkpoints", name)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s after a stop: %v, %v; want a file of mode 0600", name, fi, err)
		}
	}
	if logs := run(); strings.Contains(logs, "the log is folded from its start") {
		t.Fatalf("the second start: %s\nwant both folded from their checkpoints", logs)
	}
}
