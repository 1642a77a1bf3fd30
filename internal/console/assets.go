package console

import (
	"embed"
	"io/fs"
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
