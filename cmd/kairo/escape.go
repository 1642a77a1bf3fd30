package main

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/kairo-os/kairo/internal/jsonview"
)

// Text that an outside party wrote — an event's source, a tool server's
// description, a plugin's error, a model's reply, a process's argv — goes
// to the operator's terminal, which obeys what it reads: ESC ] 52 writes
// the clipboard, ESC [ 2 K erases a line, a bidi override reorders what
// follows. So every such string is printed through termLine or termText,
// which show those characters as text instead, the way cat -v and less do:
//
//	C0 controls and DEL   ^[ ^G ^M ^?      (caret notation)
//	C1 controls           <U+009B>
//	bidi controls         <U+202E>         (and the line separators U+2028, U+2029)
//	invalid UTF-8         U+FFFD
//
// Printable text, UTF-8 included ("héllo 世界"), passes unchanged.

// termLine makes s safe to print as one field of a line: newlines and tabs
// are shown too, so a field cannot forge a line or a column of its own.
func termLine(s string) string { return termSafe(s, false) }

// termText makes s safe to print where several lines are expected (a
// reply, a description, an error): newlines and tabs pass.
func termText(s string) string { return termSafe(s, true) }

func termSafe(s string, multiline bool) string {
	i := 0
	for ; i < len(s); i++ {
		if c := s[i]; (c < 0x20 || c >= 0x7f) && !(multiline && (c == '\n' || c == '\t')) {
			break
		}
	}
	if i == len(s) {
		return s // the common case: printable ASCII
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteRune(utf8.RuneError)
		case multiline && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r < 0x20:
			b.WriteByte('^')
			b.WriteByte(byte(r) + '@')
		case r == 0x7f:
			b.WriteString("^?")
		case unsafeRune(r):
			fmt.Fprintf(&b, "<U+%04X>", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// unsafeRune reports whether r, past ASCII, is one a terminal acts on or
// that changes how the text around it reads (jsonview.UnsafeRune).
func unsafeRune(r rune) bool { return jsonview.UnsafeRune(r) }
