package manifests

import (
	"os"
	"strings"
	"testing"
)

// [host] name: 1 to 64 of [A-Za-z0-9._-], or left out; anything else is
// refused on host.name with what is allowed.
func TestHostNameValidation(t *testing.T) {
	if c := Default(); c.Host.Name != "" {
		t.Fatalf("the default [host] name = %q; want none", c.Host.Name)
	}
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"build-2", true},
		{"a", true},
		{"Laptop.home_1", true},
		{strings.Repeat("x", MaxHostName), true},
		{strings.Repeat("x", MaxHostName+1), false},
		{"build 2", false},
		{"p3@b", false},
		{"héte", false},
		{"a/b", false},
		{"a>b", false},
	} {
		_, err := Load(writeConfig(t, "[host]\nname = \""+tc.name+"\"\n"))
		switch {
		case tc.ok && err != nil:
			t.Errorf("name %q: %v", tc.name, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "host.name") || !strings.Contains(err.Error(), `"_", "-"`)):
			t.Errorf("name %q: %v; want an error on host.name saying what a name may hold", tc.name, err)
		}
	}
}

// The effective name: the configured one; else the machine's on a store
// other hosts reach (JetStream at a url, or embedded with listen); else
// none.
func TestConfigHostName(t *testing.T) {
	machine, err := os.Hostname()
	if err != nil {
		t.Skipf("os.Hostname: %v", err)
	}
	machine = sanitizeHostName(machine)
	for _, tc := range []struct {
		what, toml, want string
	}{
		{"sqlite, no name", "", ""},
		{"sqlite, named", "[host]\nname = \"a\"\n", "a"},
		{"embedded jetstream alone", "[store]\nkind = \"jetstream\"\n[store.jetstream]\nembedded = true\n", ""},
		{"embedded jetstream listening", "[store]\nkind = \"jetstream\"\n[store.jetstream]\nembedded = true\nlisten = \"127.0.0.1:4222\"\npeers = [\"b\"]\n", machine},
		{"a cluster", "[store]\nkind = \"jetstream\"\n[store.jetstream]\nurl = \"nats://n1:4222\"\n", machine},
		{"a cluster, named", "[host]\nname = \"build-2\"\n[store]\nkind = \"jetstream\"\n[store.jetstream]\nurl = \"nats://n1:4222\"\n", "build-2"},
	} {
		c, err := Load(writeConfig(t, tc.toml))
		if err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		if got := c.HostName(); got != tc.want {
			t.Errorf("%s: HostName() = %q, want %q", tc.what, got, tc.want)
		}
	}
}

func TestSanitizeHostName(t *testing.T) {
	for in, want := range map[string]string{
		"laptop":                   "laptop",
		"my host!":                 "my-host-",
		strings.Repeat("h", 70):    strings.Repeat("h", MaxHostName),
		"build-2.example.internal": "build-2.example.internal",
	} {
		if got := sanitizeHostName(in); got != want || !validHostName(got) {
			t.Errorf("sanitizeHostName(%q) = %q, want %q", in, got, want)
		}
	}
}

// [store.jetstream] listen: an address, for the embedded server only.
func TestJetStreamListen(t *testing.T) {
	for _, tc := range []struct {
		toml string
		want string // "" for valid
	}{
		{"embedded = true\nlisten = \"127.0.0.1:4222\"\npeers = [\"b\"]", ""},
		{"embedded = true\nlisten = \"127.0.0.1:0\"\npeers = [\"b\"]", ""},
		{"embedded = true\nlisten = \"127.0.0.1\"", "HOST:PORT"},
		{"embedded = true\nlisten = \":4222\"", "HOST:PORT"},
		{"embedded = true\nlisten = \"127.0.0.1:nats\"", "0 to 65535"},
		{"url = \"nats://n1:4222\"\nlisten = \"127.0.0.1:4222\"", "embedded server"},
	} {
		_, err := Load(writeConfig(t, "[store]\nkind = \"jetstream\"\n[store.jetstream]\n"+tc.toml+"\n"))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.toml, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "store.jetstream.listen")):
			t.Errorf("%s: %v; want an error on store.jetstream.listen saying %q", tc.toml, err, tc.want)
		}
	}
}
