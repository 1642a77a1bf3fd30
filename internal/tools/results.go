package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/kairo-os/kairo/abi"
)

// Large results: stored once, under the SHA-256 of their bytes, so the
// same output stored twice is one file, and a file's name says what it
// holds. A file is written beside its final name and renamed into place,
// so a reader never sees half of one.

const (
	refPrefix = "sha256:"
	// previewBytes is how much of a stored result its reference shows.
	previewBytes = 1024
	// maxReadBytes bounds one read of a stored result.
	maxReadBytes = 4 << 20
)

// resultStore is the folder of the stored results.
type resultStore struct {
	dir  string
	temp bool // made by openResults; removed by close
}

func openResults(dir string) (*resultStore, error) {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "kairo-results-")
		if err != nil {
			return nil, fmt.Errorf("tools: a temporary folder for large results: %w", err)
		}
		return &resultStore{dir: tmp, temp: true}, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tools: the folder of large results (Config.ResultDir): %w", err)
	}
	return &resultStore{dir: dir}, nil
}

func (s *resultStore) close() error {
	if s.temp {
		return os.RemoveAll(s.dir)
	}
	return nil
}

// put stores text, unless it is stored already, and returns its reference.
func (s *resultStore) put(text string) (abi.ToolResultRef, error) {
	sum := sha256.Sum256([]byte(text))
	name := hex.EncodeToString(sum[:])
	ref := abi.ToolResultRef{Ref: refPrefix + name, Size: int64(len(text)), Preview: preview(text, previewBytes)}
	path := filepath.Join(s.dir, name)
	if fi, err := os.Stat(path); err == nil && fi.Size() == ref.Size {
		return ref, nil
	}
	f, err := os.CreateTemp(s.dir, name+".*.tmp")
	if err != nil {
		return ref, err
	}
	_, err = io.WriteString(f, text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return ref, err
	}
	return ref, nil
}

// read reads a window of a stored result.
func (s *resultStore) read(p abi.ToolResultParams) (abi.ToolResultData, error) {
	name, ok := strings.CutPrefix(p.Ref, refPrefix)
	if _, err := hex.DecodeString(name); !ok || err != nil || len(name) != 2*sha256.Size {
		return abi.ToolResultData{}, abi.Errorf(abi.CodeInvalidParams, "ref %q is not a stored result's reference; a large tool result carries one, such as \"sha256:<64 hex digits>\"", p.Ref)
	}
	if p.Offset < 0 {
		return abi.ToolResultData{}, abi.Errorf(abi.CodeInvalidParams, "offset %d is negative; give where to start, 0 for the beginning", p.Offset)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 64 << 10
	}
	limit = min(limit, maxReadBytes)
	f, err := os.Open(filepath.Join(s.dir, strings.ToLower(name)))
	if errors.Is(err, os.ErrNotExist) {
		return abi.ToolResultData{}, abi.Errorf(abi.CodeNotFound, "no stored result %s here; stored results stay in the data folder's results folder", p.Ref)
	}
	if err != nil {
		return abi.ToolResultData{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return abi.ToolResultData{}, err
	}
	out := abi.ToolResultData{Ref: p.Ref, Size: fi.Size(), Offset: min(p.Offset, fi.Size())}
	out.Data = make([]byte, min(int64(limit), fi.Size()-out.Offset))
	n, err := f.ReadAt(out.Data, out.Offset)
	if err != nil && err != io.EOF {
		return abi.ToolResultData{}, err
	}
	out.Data = out.Data[:n]
	out.EOF = out.Offset+int64(n) >= fi.Size()
	return out, nil
}

// preview is the first n bytes of s or fewer, cut where a UTF-8 character
// starts.
func preview(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
