package manifests

import (
	"strings"
	"testing"
)

// Who may log in to a JetStream store: an embedded server that listens
// names its peers, on loopback unless allow_remote says otherwise; a host
// that joins gives a user and its password file, one way to log in. Each
// refusal names its key and what to write; each beside a control that
// loads.
func TestJetStreamAccess(t *testing.T) {
	for _, tc := range []struct {
		toml      string
		key, want string // "" for valid
	}{
		{"embedded = true\nlisten = \"127.0.0.1:4222\"\npeers = [\"build-2\", \"b.lab\"]", "", ""},
		{"embedded = true\nlisten = \"127.0.0.1:4222\"", "listen", `peers = ["build-2"]`},
		{"embedded = true\npeers = [\"b\"]", "peers", "listen = \"127.0.0.1:4222\""},
		{"embedded = true\nlisten = \"0.0.0.0:4222\"\npeers = [\"b\"]", "listen", "allow_remote = true"},
		{"embedded = true\nlisten = \"192.168.1.5:4222\"\npeers = [\"b\"]", "listen", `"127.0.0.1:4222"`},
		{"embedded = true\nlisten = \"0.0.0.0:4222\"\npeers = [\"b\"]\nallow_remote = true", "", ""},
		{"embedded = true\nlisten = \"[::1]:4222\"\npeers = [\"b\"]", "", ""},
		{"embedded = true\nallow_remote = true", "allow_remote", "leave it out"},
		{"embedded = true\nlisten = \"127.0.0.1:4222\"\npeers = [\"b/c\"]", "peers", "not a host name"},
		{"embedded = true\nlisten = \"127.0.0.1:4222\"\npeers = [\"b*\"]", "peers", "not a host name"},
		{"embedded = true\nlisten = \"127.0.0.1:4222\"\npeers = [\".b\"]", "peers", "not a host name"},
		{"embedded = true\nlisten = \"127.0.0.1:4222\"\npeers = [\"b\", \"b\"]", "peers", "named twice"},
		{"url = \"nats://a:4222\"\npassword_file = \"b.password\"", "", ""},
		{"url = \"nats://a:4222\"\nuser = \"b\"\npassword_file = \"b.password\"", "", ""},
		{"url = \"nats://a:4222\"\nuser = \"b\"", "user", "password_file"},
		{"embedded = true\npassword_file = \"b.password\"", "password_file", "url"},
		{"url = \"nats://a:4222\"\npassword_file = \"p\"\ncreds = \"c\"", "password_file", "one way to log in"},
		{"url = \"nats://u:pw@a:4222\"\npassword_file = \"p\"", "password_file", "one way to log in"},
		{"url = \"nats://a:4222\"\nopen_timeout = \"2m\"", "", ""},
		{"url = \"nats://a:4222\"\nopen_timeout = \"soon\"", "open_timeout", `"60s"`},
		{"url = \"nats://a:4222\"\nopen_timeout = \"-1s\"", "open_timeout", `"60s"`},
	} {
		_, err := Load(writeConfig(t, "[store]\nkind = \"jetstream\"\n[store.jetstream]\n"+tc.toml+"\n"))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.toml, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "store.jetstream."+tc.key)):
			t.Errorf("%s: %v; want an error on store.jetstream.%s saying %s", tc.toml, err, tc.key, tc.want)
		}
	}
}

// A URL's password never shows in a configuration error.
func TestJetStreamURLErrorRedacted(t *testing.T) {
	for _, url := range []string{"http://u:hunter2@a:4222", "nats://u:hunter2@a:4222,", "nats://u:hunter2@a:4222"} {
		extra := ""
		if strings.HasSuffix(url, "4222") {
			extra = "\nembedded = true" // url and embedded: refused, naming the url
		}
		_, err := Load(writeConfig(t, "[store]\nkind = \"jetstream\"\n[store.jetstream]\nurl = \""+url+"\""+extra+"\n"))
		if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "xxxxx") {
			t.Errorf("url %s: %v; want an error without the password", url, err)
		}
	}
}
