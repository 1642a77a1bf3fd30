package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// [console] listen: off by default; loopback accepted; any other address
// refused unless allow_remote says so, with what to set; garbage named.
func TestConsoleListen(t *testing.T) {
	if c := Default(); c.Console.Listen != "" || c.Console.AllowRemote {
		t.Fatalf("the default console = %+v; want off", c.Console)
	}
	for _, tc := range []struct {
		toml string
		want string // "" for valid
	}{
		{`listen = "127.0.0.1:8765"`, ""},
		{`listen = "127.0.0.2:0"`, ""},
		{`listen = "[::1]:8765"`, ""},
		{`listen = "localhost:8765"`, ""},
		{`listen = "0.0.0.0:8765"`, "allow_remote = true"},
		{`listen = ":8765"`, "names no host"},
		{`listen = "192.168.1.5:8765"`, "not a loopback address"},
		{"listen = \"0.0.0.0:8765\"\nallow_remote = true", ""},
		{"listen = \"192.168.1.5:8765\"\nallow_remote = true", ""},
		{`listen = "127.0.0.1"`, "HOST:PORT"},
		{`listen = "127.0.0.1:99999"`, "0 to 65535"},
		{`listen = "127.0.0.1:http"`, "0 to 65535"},
		{`listen = "example.com:8765"`, "not an IP address"},
	} {
		path := filepath.Join(t.TempDir(), "kairo.toml")
		if err := os.WriteFile(path, []byte("[console]\n"+tc.toml+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.toml, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "console.listen")):
			t.Errorf("%s: %v; want an error on console.listen saying %q", tc.toml, err, tc.want)
		}
	}
}
