package jetstream

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kairo-os/kairo/manifests"
)

// The options of the store: the password file under the data folder,
// the host's name for the user, the timeouts parsed.
func TestJetStreamOptionsOfConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kairo.toml")
	if err := os.WriteFile(path, []byte("[host]\nname = \"b\"\n[store]\nkind = \"jetstream\"\n[store.jetstream]\nurl = \"nats://a:4222\"\npassword_file = \"b.password\"\nopen_timeout = \"90s\"\nmax_bytes = \"1GiB\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := manifests.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	o := ConfigFor(&c, "/home/k", nil)
	if o.PasswordFile != "/home/k/b.password" || o.Host != "b" || o.OpenTimeout.Seconds() != 90 || o.MaxBytes != 1<<30 || o.Replicas != 0 {
		t.Errorf("options: %+v", o)
	}
}
