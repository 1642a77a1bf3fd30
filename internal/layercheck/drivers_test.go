package layercheck

import (
	"os/exec"
	"strings"
	"testing"
)

// The heavy dependencies a store driver brings.
const (
	natsServer = "github.com/nats-io/nats-server"
	sqliteLib  = "modernc.org/sqlite"
)

// deps lists what pkg links, by go list.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", module+"/"+pkg).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, msg)
	}
	return strings.Fields(string(out))
}

// linked reports the first of deps under prefix, "" when none is.
func linked(deps []string, prefix string) string {
	for _, d := range deps {
		if d == prefix || strings.HasPrefix(d, prefix+"/") {
			return d
		}
	}
	return ""
}

// Stores are drivers: reading kairo.toml links neither store, and a
// program that embeds the daemon gets SQLite without the NATS server. The
// control is kairo itself, which links both, so the check can fail.
func TestStoreDrivers(t *testing.T) {
	for _, c := range []struct {
		pkg    string
		prefix string
		want   bool
	}{
		{"manifests", natsServer, false},
		{"manifests", sqliteLib, false},
		{"manifests", module + "/kernel/bus/sqlite", false},
		{"manifests", module + "/kernel/bus/jetstream", false},
		{"host", natsServer, false},
		{"host", module + "/kernel/bus/jetstream", false},
		{"host", module + "/kernel/bus/sqlite", true},
		{"cmd/kairo", natsServer, true},
		{"cmd/kairo", sqliteLib, true},
	} {
		got := linked(deps(t, c.pkg), c.prefix)
		switch {
		case c.want && got == "":
			t.Errorf("%s does not link %s: the control fails, so the check cannot", c.pkg, c.prefix)
		case !c.want && got != "":
			t.Errorf("%s links %s: a store is linked only by the program that imports its driver (kernel/bus/sqlite, kernel/bus/jetstream)", c.pkg, got)
		}
	}
}
