package checkpoint_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
	"github.com/kairo-os/kairo/kernel/bus/checkpoint"
	"github.com/kairo-os/kairo/kernel/bus/sqlite"
)

type folded struct {
	Open  []string       `msgpack:"open"`
	Count map[string]int `msgpack:"count"`
}

func sqliteBus(t *testing.T, dir string) *bus.Bus {
	t.Helper()
	return bustest.NewBus(t, func(t testing.TB) bus.Store {
		s, err := sqlite.Open(filepath.Join(dir, "events.db"), sqlite.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, bus.Config{})
}

func refused(t *testing.T, what string, err error) {
	t.Helper()
	var r *checkpoint.Refused
	if !errors.As(err, &r) {
		t.Fatalf("%s: Load = %v, want a refusal", what, err)
	}
	t.Logf("%s: %v", what, err)
}

// A checkpoint saved at an event of the log loads back whole at that
// point; one of another version, another host, another log, damaged or
// past the log's end is refused with its reason, beside the control of
// the same checkpoint taken as it was saved.
func TestCheckpoint(t *testing.T) {
	dir := t.TempDir()
	b := sqliteBus(t, dir)
	res := bustest.PublishN(t, b, "kairo.test.x", 10)
	var at *abi.Event
	b.Replay(bustest.Ctx(t), bus.Query{FromSeq: res[6].Seq, ToSeq: res[6].Seq}, func(ev *abi.Event) error {
		c := *ev
		at = &c
		return nil
	})
	if at == nil {
		t.Fatal("event 7 not read back")
	}
	path := filepath.Join(dir, "state", "agent.ckp")
	want := folded{Open: []string{"a", "b"}, Count: map[string]int{"x": 3}}
	if err := checkpoint.Save(path, 1, b.Host(), checkpoint.At(at), want); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the checkpoint file: %v, %v; want mode 0600", fi, err)
	}

	// The control: it loads, at its point.
	var got folded
	p, err := checkpoint.Load(bustest.Ctx(t), b, path, 1, &got)
	if err != nil || p.Seq != at.Seq || p.ID != at.ID || len(got.Open) != 2 || got.Count["x"] != 3 {
		t.Fatalf("Load = %+v %+v, %v; want %+v at %d", p, got, err, want, at.Seq)
	}

	_, err = checkpoint.Load(bustest.Ctx(t), b, path, 2, &folded{})
	refused(t, "another version", err)
	_, err = checkpoint.Load(bustest.Ctx(t), b, filepath.Join(dir, "none.ckp"), 1, &folded{})
	refused(t, "none", err)

	other := sqliteBus(t, t.TempDir())
	bustest.PublishN(t, other, "kairo.test.x", 10)
	_, err = checkpoint.Load(bustest.Ctx(t), other, path, 1, &folded{})
	refused(t, "another log", err)

	short := sqliteBus(t, t.TempDir())
	bustest.PublishN(t, short, "kairo.test.x", 3)
	_, err = checkpoint.Load(bustest.Ctx(t), short, path, 1, &folded{})
	refused(t, "a log shorter than its seq", err)

	if err := checkpoint.Save(path+".h", 1, "elsewhere", checkpoint.At(at), want); err != nil {
		t.Fatal(err)
	}
	_, err = checkpoint.Load(bustest.Ctx(t), b, path+".h", 1, &folded{})
	refused(t, "another host", err)

	raw, _ := os.ReadFile(path)
	raw[len(raw)-2] ^= 0xff
	os.WriteFile(path+".bad", raw, 0o600)
	_, err = checkpoint.Load(bustest.Ctx(t), b, path+".bad", 1, &folded{})
	refused(t, "a flipped byte", err)
	os.WriteFile(path+".cut", raw[:20], 0o600)
	_, err = checkpoint.Load(bustest.Ctx(t), b, path+".cut", 1, &folded{})
	refused(t, "cut short", err)
}

// A checkpoint others may write — its file, its folder or the data folder
// above it — is refused, beside the control of the same checkpoint once
// each is private again.
func TestCheckpointOthersMayWrite(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	b := sqliteBus(t, home)
	res := bustest.PublishN(t, b, "kairo.test.x", 3)
	at := checkpoint.Point{Seq: res[2].Seq}
	b.Replay(bustest.Ctx(t), bus.Query{FromSeq: at.Seq, ToSeq: at.Seq}, func(ev *abi.Event) error {
		at.ID = ev.ID
		return nil
	})
	path := filepath.Join(home, "checkpoints", "x.ckp")
	if err := checkpoint.Save(path, 1, b.Host(), at, folded{Open: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		path string
		open os.FileMode
		mine os.FileMode
	}{
		{"the data folder", home, 0o777, 0o700},
		{"the checkpoints' folder", filepath.Dir(path), 0o770, 0o700},
		{"the file", path, 0o666, 0o600},
	} {
		if err := os.Chmod(c.path, c.open); err != nil {
			t.Fatal(err)
		}
		_, err := checkpoint.Load(bustest.Ctx(t), b, path, 1, &folded{})
		refused(t, c.what+" others may write", err)
		if err := os.Chmod(c.path, c.mine); err != nil {
			t.Fatal(err)
		}
		var got folded
		if p, err := checkpoint.Load(bustest.Ctx(t), b, path, 1, &got); err != nil || p != at || len(got.Open) != 1 {
			t.Fatalf("%s private again: Load = %+v %+v, %v; want it at %+v", c.what, p, got, err, at)
		}
	}
}
