// Package manifests holds Kairo's TOML schemas — kairo.toml, binary skill
// manifests (skill.toml; see examples/) and Wasm plugin manifests (NAME.toml
// beside NAME.wasm; see [Plugin]) — and reads them with errors a person can
// act on: each names the file, the line and the key, and says what to do.
//
// A schema is a Go struct whose fields carry toml tags. Loading ([Load],
// [LoadSkill], [LoadPlugin]) starts from embedded defaults (documented in
// defaults/), overlays the operator's file, refuses keys the struct does
// not know and values of the wrong type, and validates once, naming the
// field that is wrong:
//
//	cfg, err := manifests.Load(filepath.Join(home, "kairo.toml"))
//	if err != nil {
//		// .kairo/kairo.toml:7: store.kind: "postgres" is not a store kind; want "sqlite" or "memory"
//	}
//
// Every file is bounded before the TOML parser sees it: only a regular file
// is opened for reading (a FIFO, a device or a folder is refused at once),
// of at most [MaxManifestSize] (a skill or plugin manifest) or [MaxConfigSize]
// (kairo.toml) bytes, UTF-8, nested at most [MaxDepth] deep. A file that does
// not parse is reported by line, column and what is wrong in words, never
// by quoting it: it may be a file the caller could not read.
//
// Sizes ("16MiB", "512KiB", "1GB", plain bytes) are read by [ParseSize] and
// the [Size] type, which TOML decodes from a string or an integer.
package manifests
