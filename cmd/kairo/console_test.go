package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kairo console --print prints the running daemon's console address with
// its token, which opens the page; with the console off it says what to
// set.
func TestConsoleCommand(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte("[console]\nlisten = \"127.0.0.1:0\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startUp(t, home)
	r := kairo(t, home, "console", "--print")
	url := strings.TrimSpace(r.stdout)
	tok, err := os.ReadFile(filepath.Join(home, "console.token"))
	if r.code != 0 || err != nil || !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/?token="+strings.TrimSpace(string(tok))) {
		t.Fatalf("kairo console --print: %s (token %q, %v)", r, tok, err)
	}
	c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || !strings.Contains(res.Header.Get("Set-Cookie"), "kairo_console=") {
		t.Errorf("GET %s: %d %v", url, res.StatusCode, res.Header)
	}
	d.stop()

	off := t.TempDir()
	startUp(t, off)
	if r := kairo(t, off, "console", "--print"); r.code != 1 || !strings.Contains(r.stderr, `set [console] listen = "127.0.0.1:8765" in kairo.toml`) {
		t.Errorf("kairo console with the console off: %s", r)
	}
}
