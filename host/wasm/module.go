package wasm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/kairo-os/kairo/manifests"
)

// ManifestSection is the custom section a module may carry its manifest in,
// as the TOML text of NAME.toml, when no NAME.toml lies beside it.
const ManifestSection = "kairo.manifest"

var wasmHeader = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// CustomSection returns the content of the first custom section of the
// module named name, or nil when it has none. It reads only the section
// headers, so it is cheap on a large module.
func CustomSection(wasm []byte, name string) ([]byte, error) {
	if !bytes.HasPrefix(wasm, wasmHeader) {
		return nil, errors.New("not a WebAssembly module (version 1): the first 8 bytes are not \\0asm 1 0 0 0")
	}
	var found []byte
	var bad error
	err := eachSection(wasm, func(id byte, body []byte) bool {
		if id != 0 {
			return true
		}
		nlen, n, err := readULEB32(body)
		if err != nil || uint64(nlen) > uint64(len(body)-n) {
			bad = errors.New("a custom section with a malformed name")
			return false
		}
		if string(body[n:n+int(nlen)]) == name {
			found = body[n+int(nlen):]
			return false
		}
		return true
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return nil, err
	}
	return found, nil
}

// eachSection calls fn with the id and the body of each section of wasm,
// whose header the caller checked, until fn returns false. The error says
// where a section's own header is malformed.
func eachSection(wasm []byte, fn func(id byte, body []byte) bool) error {
	rest := wasm[len(wasmHeader):]
	for len(rest) > 0 {
		id := rest[0]
		size, n, err := readULEB32(rest[1:])
		if err != nil {
			return fmt.Errorf("section at offset %d: %w", len(wasm)-len(rest), err)
		}
		body := rest[1+n:]
		if uint64(size) > uint64(len(body)) {
			return fmt.Errorf("section at offset %d claims %d bytes; %d are left", len(wasm)-len(rest), size, len(body))
		}
		body, rest = body[:size], body[size:]
		if !fn(id, body) {
			return nil
		}
	}
	return nil
}

func readULEB32(b []byte) (uint32, int, error) {
	var v uint32
	for i := 0; i < 5; i++ {
		if i >= len(b) {
			return 0, 0, errors.New("truncated LEB128 number")
		}
		v |= uint32(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			return v, i + 1, nil
		}
	}
	return 0, 0, errors.New("LEB128 number longer than 5 bytes")
}

// ReadPlugin reads the module at path and its manifest: NAME.toml beside
// it, else the module's custom section "kairo.manifest". The manifest must
// name the plugin NAME.
func ReadPlugin(path string) (*manifests.Plugin, []byte, error) {
	wasm, err := readModule(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read plugin: %w", err)
	}
	m, err := PluginManifest(path, wasm)
	return m, wasm, err
}

// PluginManifest finds and validates the manifest of the module wasm read
// from path: NAME.toml beside it, else its custom section.
func PluginManifest(path string, wasm []byte) (*manifests.Plugin, error) {
	name := strings.TrimSuffix(filepath.Base(path), ".wasm")
	beside := strings.TrimSuffix(path, ".wasm") + ".toml"
	if _, err := os.Stat(beside); err == nil {
		return manifests.LoadPlugin(beside)
	}
	text, err := CustomSection(wasm, ManifestSection)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if text == nil {
		return nil, fmt.Errorf("%s has no manifest: put %s beside it, or embed the manifest in a custom section %q", path, filepath.Base(beside), ManifestSection)
	}
	m, err := manifests.ParsePlugin(path+" (section "+ManifestSection+")", text)
	if err != nil {
		return nil, err
	}
	if m.Plugin.Name != name {
		return nil, fmt.Errorf("%s: its embedded manifest names the plugin %q; the file must be %s.wasm", path, m.Plugin.Name, m.Plugin.Name)
	}
	return m, nil
}

// readModule reads a module file of at most MaxModuleBytes: a regular
// file, its size checked on the descriptor before a byte is read, and
// never more than the cap read whatever the file claims.
func readModule(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > MaxModuleBytes {
		return nil, fmt.Errorf("%s is %d bytes, over the module cap of %d (MaxModuleBytes)", path, fi.Size(), MaxModuleBytes)
	}
	// Read into a buffer of the size the file says: io.ReadAll's doubling
	// would leave the host twice the module in garbage.
	buf := bytes.NewBuffer(make([]byte, 0, fi.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxModuleBytes+1)); err != nil {
		return nil, err
	}
	wasm := buf.Bytes()
	if len(wasm) > MaxModuleBytes {
		return nil, fmt.Errorf("%s grew over the module cap of %d bytes (MaxModuleBytes) while it was read", path, MaxModuleBytes)
	}
	return wasm, nil
}
