package console_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// opener is a $BROWSER that records the command line it was given, and the
// mode and the text of the file it was handed, into rec.
func opener(t *testing.T) (script, rec string) {
	t.Helper()
	dir := t.TempDir()
	rec = filepath.Join(dir, "rec")
	if err := os.Mkdir(rec, 0o700); err != nil {
		t.Fatal(err)
	}
	script = filepath.Join(dir, "open-browser")
	body := `#!/bin/sh
printf '%s\n' "$0" "$@" > "$REC/argv.new"
stat -c %a "$1" > "$REC/mode"
cat "$1" > "$REC/page"
mv "$REC/argv.new" "$REC/argv"
`
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	return script, rec
}

// kairo console hands the browser only the path of a 0600 login page, never
// the token; Chromium, opening that file, lands in the console logged in,
// with the token in no address.
func TestConsoleOpensLoginPage(t *testing.T) {
	t.Parallel()
	home := newHome(t)
	d := startDaemon(t, home)
	tok := token(mustURL(t, d.url()))
	script, rec := opener(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kairoBin, "console")
	cmd.Env = append(childEnv(home), "BROWSER="+script, "REC="+rec)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), tok) || !strings.Contains(string(out), "in a browser") {
		t.Fatalf("kairo console: %v\n%s", err, out)
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
	args := strings.Split(strings.TrimSpace(string(argv)), "\n")
	page := filepath.Join(home, "console.html")
	if strings.Contains(string(argv), tok) || len(args) != 2 || args[0] != script || args[1] != page {
		t.Fatalf("the browser's command line: %q; want %s %s, without the token", args, script, page)
	}
	mode, _ := os.ReadFile(filepath.Join(rec, "mode"))
	text, _ := os.ReadFile(filepath.Join(rec, "page"))
	if strings.TrimSpace(string(mode)) != "600" || !strings.Contains(string(text), tok) {
		t.Fatalf("the page the browser got: mode %s, %d bytes, the token in it: %v", mode, len(text), strings.Contains(string(text), tok))
	}

	b := newBrowser(t)
	b.open("file://" + page)
	href := eval[string](b, `location.href`)
	u := mustURL(t, d.url())
	if href != "http://"+u.Host+"/" {
		t.Errorf("the browser is at %q; want http://%s/, the token in no address", href, u.Host)
	}
	if c := eval[string](b, `document.cookie`); strings.Contains(c, tok) {
		t.Errorf("the page's script reads the token in document.cookie: %q", c)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
