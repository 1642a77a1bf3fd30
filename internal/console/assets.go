package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// embedded holds the page: index.html and the files it loads, served as
// they are, with no build step and nothing fetched from elsewhere.
//
//go:embed assets
var embedded embed.FS

// assets is the page's folder, its files at its root.
var assets = func() fs.FS {
	sub, err := fs.Sub(embedded, "assets")
	if err != nil {
		panic("console: the embedded assets: " + err.Error())
	}
	return sub
}()

// asset is one of the page's files as the server answers it.
type asset struct {
	name string // its file's name, for its Content-Type
	body []byte
	tag  string // its ETag: a hash of body
}

// pageFiles are the page's files by their path in assets, each under its
// own name, and pinned: each of the files index.html loads also under a
// name that holds a hash of its content (app.1f2e….js), which index.html
// names instead. The page, index.html, names the files of the binary that
// serves it, so a pinned name's content never changes: the browser keeps
// it without asking again (Cache-Control: immutable), where a file under
// its own name is revalidated at each navigation, a round trip each, one
// after the other (the stylesheet's, then the script's), before the
// script could run.
var pageFiles, pinnedFiles = func() (files, pinned map[string]asset) {
	files, pinned = map[string]asset{}, map[string]asset{}
	err := fs.WalkDir(assets, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(assets, p)
		if err != nil {
			return err
		}
		files[p] = asset{name: p, body: b, tag: etag(b)}
		return nil
	})
	if err != nil {
		panic("console: the embedded assets: " + err.Error())
	}
	page, ok := files["index.html"]
	if !ok {
		panic("console: the embedded assets hold no index.html")
	}
	for p, f := range files {
		if p == "index.html" || !bytes.Contains(page.body, []byte(`"`+p+`"`)) {
			continue
		}
		ext := path.Ext(p)
		pin := strings.TrimSuffix(p, ext) + "." + strings.Trim(f.tag, `"`) + ext
		pinned[pin] = f
		page.body = bytes.ReplaceAll(page.body, []byte(`"`+p+`"`), []byte(`"`+pin+`"`))
	}
	page.tag = etag(page.body)
	files["index.html"] = page
	return files, pinned
}()

func etag(b []byte) string {
	sum := sha256.Sum256(b)
	return `"` + hex.EncodeToString(sum[:12]) + `"`
}

// serveFile answers a GET or HEAD of the page's file name ("" is
// index.html), and reports false if there is none of that name.
func serveFile(w http.ResponseWriter, r *http.Request, name string) bool {
	if name == "" {
		name = "index.html"
	}
	h := w.Header()
	f, ok := pinnedFiles[name]
	if ok {
		// private: a shared cache has no business keeping what answered
		// the token, though nothing of it is secret.
		h.Set("Cache-Control", "private, max-age=31536000, immutable")
	} else if f, ok = pageFiles[name]; ok {
		// Asked again at each navigation, answered 304 while the binary
		// is the same.
		h.Set("Cache-Control", "no-cache")
	} else {
		return false
	}
	h.Set("ETag", f.tag)
	http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(f.body))
	return true
}
