package wasm

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/testkit"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
	"github.com/kairo-os/kairo/kernel/bus/checkpoint"
	"github.com/kairo-os/kairo/kernel/bus/sqlite"
)

// grantHome is a data folder with a log of the operator's grants.
type grantHome struct {
	t    *testing.T
	dir  string
	bus  *bus.Bus
	k    *kernel.Kernel
	logs testkit.SyncBuffer
}

func newGrantHome(t *testing.T) *grantHome {
	dir := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(filepath.Join(dir, "events.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h := &grantHome{t: t, dir: dir, bus: bus.New(st, bus.Config{})}
	h.k = kernel.New(h.bus, kernel.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() { h.k.Close(); h.bus.Close() })
	return h
}

func (h *grantHome) ckp() string { return filepath.Join(h.dir, "checkpoints", "grants.ckp") }

// record stores a grant (or revoke) as plugins.grant does.
func (h *grantHome) record(revoke bool, g abi.PluginGrant) uint64 {
	h.t.Helper()
	g.By = "operator/1000"
	raw, _ := msgpack.Marshal(&g)
	subject := subjectGranted
	if revoke {
		subject = subjectRevoked
	}
	return bustest.MustPublish(h.t, h.bus, &abi.Event{Type: subject, Source: abi.PrincipalHost, Data: raw}).Seq
}

// fold starts a manager's fold of the grants, with the checkpoint or
// without, and stops it (saving the checkpoint): what it granted, and how
// many events it read.
func (h *grantHome) fold(withCheckpoint bool) (map[string]*abi.PluginGrant, uint64) {
	h.t.Helper()
	cfg := ManagerConfig{Kernel: h.k, Logger: slog.New(slog.NewTextHandler(&h.logs, nil))}
	if withCheckpoint {
		cfg.Checkpoints = filepath.Dir(h.ckp())
	}
	m := NewManager(cfg)
	if err := m.foldLog(h.t.Context()); err != nil {
		h.t.Fatal(err)
	}
	m.Stop()
	return m.granted, m.grantsRead
}

// The grants a start folds from the checkpoint and the log after it are
// those of a fold of the whole log, and it read only the events after the
// checkpoint; a damaged checkpoint, or one that grants what the log never
// did, is refused, and the start folds the whole log to the same grants.
func TestGrantCheckpoint(t *testing.T) {
	h := newGrantHome(t)
	bustest.PublishN(t, h.bus, "kairo.test.prefix", 5000)
	h.record(false, abi.PluginGrant{Plugin: "a", Call: []string{"m.x", "m.y"}, Publish: []string{"p.>"}})
	h.record(false, abi.PluginGrant{Plugin: "b", Subscribe: []string{"s.>"}})
	h.record(true, abi.PluginGrant{Plugin: "a", Call: []string{"m.y"}})
	h.record(false, abi.PluginGrant{Plugin: "c", WASIEnv: []string{"HOME"}})
	h.record(true, abi.PluginGrant{Plugin: "c", WASIEnv: []string{"HOME"}})
	if _, read := h.fold(true); read < 5000 {
		t.Fatalf("the first start read %d events, want the whole log", read)
	}
	if fi, err := os.Stat(h.ckp()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the checkpoint: %v, %v; want a file of mode 0600:\n%s", fi, err, h.logs.String())
	}
	h.record(false, abi.PluginGrant{Plugin: "b", Call: []string{"m.z"}})
	h.record(true, abi.PluginGrant{Plugin: "a", Publish: []string{"p.>"}})
	h.record(false, abi.PluginGrant{Plugin: "d", WASIFS: []string{"/srv"}})

	want, fullRead := h.fold(false)
	wantGrants := map[string]*abi.PluginGrant{
		"a": {Plugin: "a", Call: []string{"m.x"}, Publish: []string{}},
		"b": {Plugin: "b", Subscribe: []string{"s.>"}, Call: []string{"m.z"}},
		"d": {Plugin: "d", WASIFS: []string{"/srv"}},
	}
	for name, w := range wantGrants {
		g := want[name]
		if g == nil || !slices.Equal(g.Call, w.Call) || !slices.Equal(g.Publish, w.Publish) || !slices.Equal(g.Subscribe, w.Subscribe) || !slices.Equal(g.WASIFS, w.WASIFS) {
			t.Fatalf("the whole log grants %s %+v, want %+v", name, g, w)
		}
	}
	if len(want) != len(wantGrants) {
		t.Fatalf("the whole log grants %d plugins, want %d (c's grant was revoked)", len(want), len(wantGrants))
	}

	got, read := h.fold(true)
	t.Logf("a start read %d events with the checkpoint, %d without", read, fullRead)
	if !sameGrants(got, want) {
		t.Fatalf("from the checkpoint: %+v\nwant %+v", got, want)
	}
	if read == 0 || read >= 100 || fullRead < 5000 {
		t.Fatalf("a start read %d events with the checkpoint, %d without; want the tail alone", read, fullRead)
	}
	good, err := os.ReadFile(h.ckp())
	if err != nil {
		t.Fatal(err)
	}

	refused := func(what, why string) {
		t.Helper()
		before := len(h.logs.String())
		got, read := h.fold(true)
		if logs := h.logs.String()[before:]; !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, why) {
			t.Fatalf("%s: the start logged %q; want a warning that says %q", what, logs, why)
		}
		if read < fullRead || !sameGrants(got, want) {
			t.Fatalf("%s: read %d events, granted %+v; want the whole log's %d and %+v", what, read, got, fullRead, want)
		}
	}
	bad := bytes.Clone(good)
	bad[len(bad)-3] ^= 0xff
	os.WriteFile(h.ckp(), bad, 0o600)
	refused("a damaged checkpoint", "checksum")

	// Planted: a grant the log never recorded, citing an event that
	// granted something else, and one citing an event that is no grant.
	var l grantLog
	p, err := checkpoint.Load(t.Context(), h.bus, writeGrants(t, h.ckp(), good), grantFoldVersion, &l)
	if err != nil {
		t.Fatal(err)
	}
	plant := func(what string, change func(l *grantLog)) {
		t.Helper()
		var c grantLog
		checkpoint.Load(t.Context(), h.bus, writeGrants(t, h.ckp(), good), grantFoldVersion, &c)
		change(&c)
		if err := checkpoint.Save(h.ckp(), grantFoldVersion, h.bus.Host(), p, &c); err != nil {
			t.Fatal(err)
		}
		refused(what, "does not grant it")
	}
	plant("a call the log never granted", func(c *grantLog) {
		c.Plugins["a"].Call = append(c.Plugins["a"].Call, "kernel.secret")
		c.From["a"]["call kernel.secret"] = c.From["a"]["call m.x"]
	})
	plant("a grant citing an event that grants none", func(c *grantLog) {
		c.Plugins["evil"] = &abi.PluginGrant{Plugin: "evil", Call: []string{"process.spawn"}}
		c.From["evil"] = map[string]uint64{"call process.spawn": 3}
	})

	// The control: the checkpoint as it was saved is used.
	os.WriteFile(h.ckp(), good, 0o600)
	if got, read := h.fold(true); read >= 100 || !sameGrants(got, want) {
		t.Fatalf("the control: read %d events, granted %+v", read, got)
	}
}

// sameGrants compares grants entry by entry; an empty list is no list.
func sameGrants(a, b map[string]*abi.PluginGrant) bool {
	if len(a) != len(b) {
		return false
	}
	for name, g := range a {
		h := b[name]
		if h == nil || g.Plugin != h.Plugin || !slices.Equal(g.Call, h.Call) || !slices.Equal(g.Publish, h.Publish) ||
			!slices.Equal(g.Subscribe, h.Subscribe) || !slices.Equal(g.WASIFS, h.WASIFS) || !slices.Equal(g.WASIEnv, h.WASIEnv) {
			return false
		}
	}
	return true
}

func writeGrants(t *testing.T, path string, b []byte) string {
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
