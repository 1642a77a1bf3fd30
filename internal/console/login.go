package console

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
)

// The two ways into the page. The URL `kairo console --print` prints
// carries the token in its query (GET /?token=), for the operator to
// paste. `kairo console` itself opens the login page: a file only the
// operator may read whose form posts the token to LoginPath, so the token
// is never on a command line (which any user reads in /proc/PID/cmdline)
// nor in a URL the browser keeps.
const (
	// LoginPath takes the token from a form, as the login page posts it.
	LoginPath = "/login"
	// LoginPageFile is the login page's file name in the folder it is
	// written to (WriteLoginPage).
	LoginPageFile = "console.html"
	maxLoginBody  = 4 << 10
)

// login takes the token from the URL `kairo console --print` printed,
// keeps it in a cookie only this origin's requests carry, and sends the
// browser on to the page without it, so the token leaves the address bar.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !s.tokenOK(r.URL.Query().Get("token")) {
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusUnauthorized, "the token in the address is not this console's; run `kairo console --print` for the current address")
		return
	}
	trustConn(r.Context())
	s.setCookie(w)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// loginForm takes the token the login page posts. It asks no Origin: the
// page is a file (its origin is "null"), and the form is worth nothing
// without the token, which is all the authority there is.
//
// It answers with a page that moves on to "/" itself rather than with a
// redirect: the post came from the file, another site to the browser, and
// a redirect that follows it would not carry a SameSite=Strict cookie; a
// navigation from the console's own page does.
func (s *Server) loginForm(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusMethodNotAllowed, "the login page posts its form to "+LoginPath+"; run `kairo console`")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/x-www-form-urlencoded" {
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusUnsupportedMediaType, "post the token as a form (application/x-www-form-urlencoded), as the page `kairo console` opens does")
		return
	}
	if err := r.ParseForm(); err != nil || !s.tokenOK(r.PostForm.Get("token")) {
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusUnauthorized, "the token posted is not this console's; run `kairo console` again")
		return
	}
	trustConn(r.Context())
	s.setCookie(w)
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(loggedIn))
}

// loggedIn moves on to the page; the link is for a browser that does not
// follow a refresh.
const loggedIn = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0; url=/"><title>Kairo console</title></head>
<body><p><a href="/">Open the console</a></p></body></html>
`

func (s *Server) setCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.Header().Set("Cache-Control", "no-store")
}

// loginPage posts the token to the console as soon as it loads; the button
// is for a browser that runs no script in a file.
var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer"><title>Kairo console</title></head>
<body>
<form method="post" action="{{.Action}}">
<input type="hidden" name="token" value="{{.Token}}">
<p>Opening the Kairo console at {{.Origin}}… <button type="submit">Open the console</button></p>
</form>
<script>document.forms[0].submit()</script>
</body></html>
`))

// LoginPage is the login page for the console at consoleURL, the address
// with the token that console.url answers.
func LoginPage(consoleURL string) ([]byte, error) {
	u, err := url.Parse(consoleURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the console's address %q is not an http URL", redact(consoleURL))
	}
	tok := u.Query().Get("token")
	if tok == "" {
		return nil, fmt.Errorf("the console's address %q holds no token", consoleURL)
	}
	origin := u.Scheme + "://" + u.Host
	var b bytes.Buffer
	err = loginPage.Execute(&b, struct{ Action, Origin, Token string }{origin + LoginPath, origin, tok})
	return b.Bytes(), err
}

// redact is consoleURL without its query, for an error message.
func redact(consoleURL string) string {
	if u, err := url.Parse(consoleURL); err == nil {
		u.RawQuery = ""
		return u.String()
	}
	return "(unparsable)"
}

// WriteLoginPage writes the login page for consoleURL into dir as
// LoginPageFile and returns its path. The page holds the token, so the
// file is made mode 0600 under a new name and renamed into place, and dir
// must be a folder of this user's that no one else may write in (where
// another user could put a page of theirs in its place).
func WriteLoginPage(dir, consoleURL string) (string, error) {
	if err := privateDir(dir); err != nil {
		return "", err
	}
	page, err := LoginPage(consoleURL)
	if err != nil {
		return "", err
	}
	// CreateTemp makes the file with O_EXCL and mode 0600: it is never
	// readable by others, not even for a moment.
	f, err := os.CreateTemp(dir, ".console-*.html")
	if err != nil {
		return "", fmt.Errorf("write the console's login page: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(page)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	path := filepath.Join(dir, LoginPageFile)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("write the console's login page: %w", err)
	}
	return path, nil
}

// privateDir says why dir may not hold the token, or nil: it must be a
// folder owned by this user that no one else may write in. Others may list
// it, as they may the data folder beside console.token: the file's own
// mode keeps what it holds.
func privateDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("the folder %s does not exist", dir)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is not a folder", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("the folder %s belongs to uid %d, not to this user (%d)", dir, st.Uid, os.Getuid())
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("the folder %s has mode %04o: other users may write in it; run chmod go-w %s", dir, perm, dir)
	}
	return nil
}
