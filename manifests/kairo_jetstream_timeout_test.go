package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// [store.jetstream] timeout and reconnect_wait are durations the daemon
// hands the store; left out, they are 0, the store's defaults. A value
// that is no duration, or not a positive one, is refused naming its key.
func TestJetStreamTimeouts(t *testing.T) {
	load := func(extra string) (Config, error) {
		p := filepath.Join(t.TempDir(), "kairo.toml")
		text := "[store]\nkind = \"jetstream\"\n[store.jetstream]\nurl = \"nats://a:4222\"\n" + extra
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return Load(p)
	}
	c, err := load("timeout = \"1500ms\"\nreconnect_wait = \"250ms\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if j := c.Store.JetStream; j.TimeoutDuration() != 1500*time.Millisecond || j.ReconnectWaitDuration() != 250*time.Millisecond {
		t.Errorf("timeout %v, reconnect_wait %v; want 1.5s and 250ms", j.TimeoutDuration(), j.ReconnectWaitDuration())
	}
	c, err = load("") // the control: the store's defaults
	if err != nil || c.Store.JetStream.TimeoutDuration() != 0 || c.Store.JetStream.ReconnectWaitDuration() != 0 {
		t.Errorf("left out: %v, %v, %v; want 0 and 0", c.Store.JetStream.TimeoutDuration(), c.Store.JetStream.ReconnectWaitDuration(), err)
	}
	for _, bad := range []struct{ text, want string }{
		{"timeout = \"soon\"\n", "store.jetstream.timeout"},
		{"timeout = \"0s\"\n", "store.jetstream.timeout"},
		{"reconnect_wait = \"-1s\"\n", "store.jetstream.reconnect_wait"},
	} {
		if _, err := load(bad.text); err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), "give a duration") {
			t.Errorf("%q: got %v, want an error naming %s", bad.text, err, bad.want)
		}
	}
}
