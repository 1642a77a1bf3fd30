package manifests

import (
	"errors"
	"fmt"
	"io"
	"os"
	"unicode/utf8"
)

// Bounds on a manifest or config file, checked before the TOML parser sees
// a byte of it: the parser recurses on nested values and holds the whole
// text, so an unbounded file could exhaust the daemon's memory or stack.
const (
	// MaxManifestSize bounds a skill.toml, a plugin's NAME.toml and a
	// plugin's embedded manifest section.
	MaxManifestSize = 256 * KiB
	// MaxConfigSize bounds kairo.toml.
	MaxConfigSize = 1 * MiB
	// MaxDepth bounds how deeply tables, arrays and inline tables nest,
	// dotted keys counted: [a.b] and c = [[1]] each nest three deep.
	MaxDepth = 32
)

// The kinds of file the loaders refuse before parsing; an [*Error] for one of
// them wraps its sentinel, for [errors.Is].
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("file too large")
	ErrNotUTF8    = errors.New("not UTF-8")
	ErrTooDeep    = errors.New("nested too deeply")
)

// readFile reads the regular file at path, at most limit bytes. It never
// opens anything but a regular file for reading (see openRegular), so a
// FIFO, a device or a folder is refused at once, without blocking and
// without the side effects opening a device can have. Its errors name the
// path and never quote the file's content.
//
// Symbolic links are followed, in the folders and the last component
// alike: a skill folder or kairo.toml linked in from elsewhere (a dotfiles
// repository, a package manager's store) is legitimate, and refusing the
// link would not stop a caller from naming the target itself. What must
// hold is what the descriptor read from is, and openRegular checks that.
func readFile(path string, limit Size) ([]byte, error) {
	f, size, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size > int64(limit) {
		return nil, tooLarge(path, size, limit)
	}
	// A regular file may grow after the fstat, and files such as those in
	// /proc report a size of 0: read one byte past the cap to tell.
	text, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(text) > int(limit) {
		return nil, tooLarge(path, -1, limit)
	}
	return text, nil
}

// notRegular is the error for a path that names something other than a
// regular file; mode is its type bits.
func notRegular(path string, mode os.FileMode) error {
	what := "not a regular file"
	switch {
	case mode.IsDir():
		what = "a folder"
	case mode&os.ModeNamedPipe != 0:
		what = "a FIFO (named pipe)"
	case mode&os.ModeSocket != 0:
		what = "a socket"
	case mode&os.ModeCharDevice != 0:
		what = "a character device"
	case mode&os.ModeDevice != 0:
		what = "a block device"
	}
	return &Error{File: path, Msg: "is " + what + ", not a regular file; give the path of a TOML file", Err: ErrNotRegular}
}

// tooLarge is the error for a file over limit; size is its size, or -1
// when only reading found it larger.
func tooLarge(file string, size int64, limit Size) error {
	msg := fmt.Sprintf("is larger than %s, the most Kairo reads of such a file", limit)
	if size >= 0 {
		msg = fmt.Sprintf("is %d bytes; Kairo reads at most %s of such a file", size, limit)
	}
	return &Error{File: file, Msg: msg, Err: ErrTooLarge}
}

// checkSize refuses text longer than limit: a manifest handed over as
// bytes (an embedded section) is bounded as a file is.
func checkSize(file string, text []byte, limit Size) error {
	if len(text) > int(limit) {
		return tooLarge(file, int64(len(text)), limit)
	}
	return nil
}

// checkShape refuses text the TOML parser must not see: bytes that are not
// UTF-8, and values nested deeper than MaxDepth. Its errors give the line
// and column, never the text.
func checkShape(file string, text []byte) *Error {
	if !utf8.Valid(text) {
		bad := 0
		for bad < len(text) {
			r, n := utf8.DecodeRune(text[bad:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			bad += n
		}
		line, col := position(text, bad)
		return &Error{File: file, Line: line, Col: col, Msg: "is not UTF-8 text: this byte begins no UTF-8 character; save the file as UTF-8", Err: ErrNotUTF8}
	}
	if at, ok := depthExceeded(text); ok {
		line, col := position(text, at)
		return &Error{File: file, Line: line, Col: col,
			Msg: fmt.Sprintf("tables, arrays and inline tables nest more than %d deep here; Kairo reads at most %d levels", MaxDepth, MaxDepth), Err: ErrTooDeep}
	}
	return nil
}

// maxErrors bounds the problems one file reports. Placing each on its line
// reads the text, so a file of thousands of small mistakes (17,000 unused
// [params.N] fit in MaxManifestSize) would cost the loader minutes of CPU.
const maxErrors = 20

// moreErrors is the note that n problems past maxErrors were not reported,
// or nothing when n is 0.
func moreErrors(file string, n int) []*Error {
	if n == 0 {
		return nil
	}
	return []*Error{{File: file, Msg: fmt.Sprintf("and %d more problems; fix those above first", n)}}
}

// position is the 1-based line and column (in bytes) of offset i in text.
func position(text []byte, i int) (line, col int) {
	line, start := 1, 0
	for j := 0; j < i && j < len(text); j++ {
		if text[j] == '\n' {
			line, start = line+1, j+1
		}
	}
	return line, i - start + 1
}

// depthExceeded scans TOML text the way the parser's lexer does, as far as
// nesting goes, and returns the offset where nesting first passes
// MaxDepth. It counts, at every point, the depth of the value being
// written: a [table] header's dotted parts ([[array]] one more), a key's
// dotted parts, and each array and inline table around the value. It skips
// comments and strings as the lexer does; where the text is not TOML the
// parser stops at that point, having nested no deeper than counted so far.
func depthExceeded(text []byte) (int, bool) {
	type frame struct {
		table bool // an inline table; else an array
		depth int  // depth of the array or table value itself
	}
	var (
		stack     []frame
		base      = 0        // depth of the current [table]
		cur       = base + 1 // depth of the key or value being read
		inKey     = true     // reading a key, not a value
		lineStart = true     // nothing but blanks yet on this top-level line
	)
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch c {
		case ' ', '\t', '\r':
			continue
		case '\n':
			if len(stack) == 0 {
				cur, inKey, lineStart = base+1, true, true
			}
			continue
		case '#':
			for i+1 < len(text) && text[i+1] != '\n' {
				i++
			}
			continue
		case '"', '\'':
			i = skipString(text, i)
			lineStart = false
			continue
		}
		if lineStart && len(stack) == 0 && c == '[' {
			// A [table] or [[array of tables]] header.
			end, parts := skipHeader(text, i)
			base = parts
			if base > MaxDepth {
				return i, true
			}
			i, cur, lineStart = end, base+1, false
			continue
		}
		lineStart = false
		if inKey {
			switch c {
			case '.':
				cur++
			case '=':
				inKey = false
			case '}': // an empty inline table, or a trailing comma
				if n := len(stack); n > 0 && stack[n-1].table {
					cur, stack = stack[n-1].depth, stack[:n-1]
					inKey = false
				}
			}
		} else {
			switch c {
			case '[', '{':
				stack = append(stack, frame{table: c == '{', depth: cur})
				cur++
				inKey = c == '{'
			case ']', '}':
				if n := len(stack); n > 0 {
					cur, stack = stack[n-1].depth, stack[:n-1]
				}
			case ',':
				if n := len(stack); n > 0 {
					cur = stack[n-1].depth + 1
					inKey = stack[n-1].table
				}
			}
		}
		if cur > MaxDepth {
			return i, true
		}
	}
	return 0, false
}

// skipString returns the offset of the last byte of the string that
// starts at text[i] (a quote): basic "..." with backslash escapes, literal
// '...', and their multi-line forms in triples. A single-line string ends
// before a newline, where the lexer stops with an error.
func skipString(text []byte, i int) int {
	q := text[i]
	escapes := q == '"'
	if i+2 < len(text) && text[i+1] == q && text[i+2] == q {
		// Multi-line: ends at the first unescaped triple, which may have
		// up to two more quotes of the string's own before it closes.
		for j := i + 3; j < len(text); j++ {
			switch {
			case escapes && text[j] == '\\':
				j++
			case text[j] == q && j+2 < len(text) && text[j+1] == q && text[j+2] == q:
				j += 2
				for j+1 < len(text) && text[j+1] == q {
					j++
				}
				return j
			}
		}
		return len(text) - 1
	}
	if i+1 < len(text) && text[i+1] == q {
		return i + 1 // an empty string
	}
	for j := i + 1; j < len(text); j++ {
		switch {
		case escapes && text[j] == '\\':
			if j+1 < len(text) && text[j+1] == '\n' {
				return j
			}
			j++
		case text[j] == q:
			return j
		case text[j] == '\n':
			return j - 1
		}
	}
	return len(text) - 1
}

// skipHeader returns the offset of the last byte of the table header that
// starts at text[i] ("[" or "[["), and how deep its table lies: its dotted
// parts, one more for an array of tables. A header cut short by a newline
// ends before it.
func skipHeader(text []byte, i int) (end, depth int) {
	depth = 1
	if i+1 < len(text) && text[i+1] == '[' {
		depth, i = 2, i+1
	}
	for j := i + 1; j < len(text); j++ {
		switch text[j] {
		case '"', '\'':
			j = skipString(text, j)
		case '.':
			depth++
		case ']':
			if j+1 < len(text) && text[j+1] == ']' {
				j++
			}
			return j, depth
		case '\n':
			return j - 1, depth
		}
	}
	return len(text) - 1, depth
}
