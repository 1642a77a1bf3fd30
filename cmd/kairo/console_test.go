package main

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// kairo console --print prints the running daemon's console address with
// its token, which opens the page; with the console off it says what to
// set.
func TestConsoleCommand(t *testing.T) {
	t.Parallel()
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

// kairo console writes the login page, mode 0600, and hands the browser its
// path alone: the token is in neither the browser's command line nor what
// kairo prints. The page's form logs in. Without a browser, the address is
// printed for the operator to paste.
func TestConsoleOpensLoginPage(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte("[console]\nlisten = \"127.0.0.1:0\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	startUp(t, home)
	tokb, err := os.ReadFile(filepath.Join(home, "console.token"))
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(tokb))

	rec := t.TempDir()
	script := filepath.Join(t.TempDir(), "open-browser")
	if err := os.WriteFile(script, []byte(`#!/bin/sh
printf '%s\n' "$@" > "$REC/argv.new"
stat -c %a "$2" > "$REC/mode"
cat "$2" > "$REC/page"
mv "$REC/argv.new" "$REC/argv"
`), 0o700); err != nil {
		t.Fatal(err)
	}
	env := append(childEnv(home), "BROWSER="+script+" --new-window %s", "REC="+rec, "DISPLAY=", "WAYLAND_DISPLAY=")
	r := kairoRun(t, "", env, nil, "console")
	if r.code != 0 || strings.Contains(r.stdout+r.stderr, tok) || !strings.Contains(r.stdout, "http://127.0.0.1:") {
		t.Fatalf("kairo console: %s", r)
	}
	var argv []byte
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if argv, err = os.ReadFile(filepath.Join(rec, "argv")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the browser command was not run within 30s: %v", err)
		}
	}
	page := filepath.Join(home, "console.html")
	if got := strings.Split(strings.TrimSpace(string(argv)), "\n"); strings.Contains(string(argv), tok) || len(got) != 2 || got[0] != "--new-window" || got[1] != page {
		t.Fatalf("the browser's arguments: %q; want --new-window %s, without the token", got, page)
	}
	mode, _ := os.ReadFile(filepath.Join(rec, "mode"))
	text, _ := os.ReadFile(filepath.Join(rec, "page"))
	if strings.TrimSpace(string(mode)) != "600" {
		t.Errorf("the login page has mode %s; want 600", mode)
	}
	m := regexp.MustCompile(`action="(http://127\.0\.0\.1:\d+/login)"[^<]*<input type="hidden" name="token" value="([0-9a-f]+)"`).FindStringSubmatch(string(text))
	if m == nil || m[2] != tok {
		t.Fatalf("the login page holds no form with the token:\n%s", text)
	}
	res, err := http.PostForm(m[1], url.Values{"token": {m[2]}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(res.Header.Get("Set-Cookie"), "kairo_console="+tok) {
		t.Errorf("posting the page's form: %d %v", res.StatusCode, res.Header)
	}

	// No browser: the address with the token, on the operator's stdout.
	env = append(childEnv(home), "BROWSER=", "DISPLAY=", "WAYLAND_DISPLAY=")
	if r := kairoRun(t, "", env, nil, "console"); r.code != 0 || !strings.HasSuffix(strings.TrimSpace(r.stdout), "/?token="+tok) {
		t.Errorf("kairo console without a browser: %s", r)
	}
}
