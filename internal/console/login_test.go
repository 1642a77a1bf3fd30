package console_test

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/internal/console"
)

// private is a new folder of mode 0700.
func private(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// formOf reads the action and the token out of a login page.
func formOf(t *testing.T, page string) (action, tok string) {
	t.Helper()
	a := regexp.MustCompile(`<form method="post" action="([^"]+)">`).FindStringSubmatch(page)
	v := regexp.MustCompile(`name="token" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if a == nil || v == nil {
		t.Fatalf("the login page holds no form with a token:\n%s", page)
	}
	return a[1], v[1]
}

// The login page is a 0600 file in a private folder whose form posts the
// token to /login, which answers with the cookie; the page it moves on to
// opens with that cookie. A wrong token, another method or another body
// is refused.
func TestServerLoginPage(t *testing.T) {
	_, u, _ := upConsole(t, nil)
	dir := private(t)
	path, err := console.WriteLoginPage(dir, u.String())
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 || filepath.Dir(path) != dir || strings.Contains(path, token(u)) {
		t.Fatalf("the login page %s: %v %v; want mode 0600 in %s, the token not in its name", path, fi.Mode(), err, dir)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".console-*")); len(left) != 0 {
		t.Errorf("writing the page left %v behind", left)
	}
	b, _ := os.ReadFile(path)
	action, tok := formOf(t, string(b))
	if action != "http://"+u.Host+console.LoginPath || tok != token(u) {
		t.Fatalf("the page posts %q to %q; want the token to http://%s%s", tok, action, u.Host, console.LoginPath)
	}

	// What the browser does: post the form from a file (Origin: null).
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(form url.Values, ctype string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", action, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Origin", "null")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	res, body := post(url.Values{"token": {tok}}, "application/x-www-form-urlencoded")
	var cookie *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == console.CookieName {
			cookie = ck
		}
	}
	if res.StatusCode != http.StatusOK || cookie == nil || cookie.Value != tok || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode ||
		!strings.Contains(body, `http-equiv="refresh" content="0; url=/"`) || strings.Contains(body, tok) {
		t.Fatalf("POST %s with the token: %d %v %q", console.LoginPath, res.StatusCode, res.Header, body)
	}
	if res, _ := do(t, u, "GET", "/", "", map[string]string{"Cookie": console.CookieName + "=" + cookie.Value}); res.StatusCode != http.StatusOK {
		t.Errorf("GET / with the cookie the login gave: %d", res.StatusCode)
	}

	for _, bad := range []struct {
		what  string
		form  url.Values
		ctype string
		code  int
	}{
		{"a wrong token", url.Values{"token": {strings.Repeat("0", 64)}}, "application/x-www-form-urlencoded", http.StatusUnauthorized},
		{"no token", url.Values{}, "application/x-www-form-urlencoded", http.StatusUnauthorized},
		{"JSON", url.Values{"token": {tok}}, "application/json", http.StatusUnsupportedMediaType},
	} {
		res, body := post(bad.form, bad.ctype)
		if res.StatusCode != bad.code || len(res.Cookies()) != 0 || !strings.Contains(body, `"error"`) {
			t.Errorf("POST %s with %s: %d %v %s; want %d, no cookie", console.LoginPath, bad.what, res.StatusCode, res.Cookies(), body, bad.code)
		}
	}
	if res, body := do(t, u, "GET", console.LoginPath+"?token="+tok, "", nil); res.StatusCode != http.StatusMethodNotAllowed || len(res.Cookies()) != 0 {
		t.Errorf("GET %s: %d %s; want 405", console.LoginPath, res.StatusCode, body)
	}
}

// The page is written only into a folder of this user's that no one else
// may write in, and says why not.
func TestWriteLoginPageFolder(t *testing.T) {
	const addr = "http://127.0.0.1:8765/?token=" + "ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12"
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o775)
	if _, err := console.WriteLoginPage(open, addr); err == nil || !strings.Contains(err.Error(), "chmod go-w "+open) {
		t.Errorf("a login page in a folder of mode 0775: %v; want a refusal that says chmod go-w", err)
	}
	if _, err := console.WriteLoginPage(filepath.Join(t.TempDir(), "none"), addr); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a login page in no folder: %v", err)
	}
	if _, err := console.WriteLoginPage(private(t), "http://127.0.0.1:8765/"); err == nil || !strings.Contains(err.Error(), "no token") {
		t.Errorf("a login page of an address without a token: %v", err)
	}
	if entries, _ := os.ReadDir(open); len(entries) != 0 {
		t.Errorf("a refused folder holds %v", entries)
	}
	if _, err := console.WriteLoginPage(private(t), addr); err != nil {
		t.Errorf("a login page in a folder of mode 0700: %v", err)
	}
	// The control: a folder only its owner may write in takes it, the
	// file private all the same.
	os.Chmod(open, 0o755)
	if p, err := console.WriteLoginPage(open, addr); err != nil {
		t.Errorf("a login page in a folder of mode 0755: %v", err)
	} else if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the login page %s: %v %v; want mode 0600", p, fi.Mode(), err)
	}
}
