package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
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

// assetTags is the ETag of each of the page's files, by its path in
// assets: a hash of its content, which changes with the binary's files.
var assetTags = func() map[string]string {
	tags := map[string]string{}
	err := fs.WalkDir(assets, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(assets, path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		tags[path] = `"` + hex.EncodeToString(sum[:12]) + `"`
		return nil
	})
	if err != nil {
		panic("console: the embedded assets: " + err.Error())
	}
	return tags
}()
