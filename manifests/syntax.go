package manifests

import (
	"reflect"
	"regexp"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
)

// syntaxError turns the parser's error into an *Error that says where the
// text is wrong and what is wrong in words, without a byte of the text: a
// file that does not parse may not be a manifest at all but a file the
// caller could not read (a skill spawned with manifest=/etc/shadow), and
// the parser's messages quote the text ("expected value but found
// \"$6$...\"", "Key 'x' has already been defined"). The key is named only
// when the schema knows it, so it says nothing of the file either.
func syntaxError(file string, pe toml.ParseError, root reflect.Type) *Error {
	msg := "TOML syntax: " + syntaxWords(pe.Message)
	if u := strings.TrimSpace(pe.Usage); u != "" {
		// The parser's usage notes are fixed text about TOML.
		msg += "\n" + u
	}
	e := &Error{File: file, Line: pe.Position.Line, Col: pe.Position.Col, Msg: msg}
	if k := splitKey(pe.LastKey); pe.LastKey != "" && schemaKey(root, k) {
		e.Key = k.String()
	}
	return e
}

// schemaKey reports whether every part of k is a key of the schema's
// structs: a name the schema defines, not one the file chose.
func schemaKey(t reflect.Type, k toml.Key) bool {
	for _, name := range k {
		if t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		f, ok := fieldByTag(t, name)
		if !ok {
			return false
		}
		t = f.Type
	}
	return true
}

// syntaxMessages maps each of the parser's messages that quotes the text
// to words that do not. Messages that quote nothing pass as they are; a
// message that matches neither is replaced by the fallback, so a new
// parser version cannot make an error quote the file.
// The patterns are compiled on the first syntax error, not as every kairo
// process starts (where they were a third of this package's init).
var syntaxMessages = []struct {
	pattern string
	words   string
}{
	{`^expected a top-level item to end with`, "expected the end of the line (or a # comment) after the value"},
	{`^expected end of table array name delimiter`, "expected ]] to end the [[array of tables]] header"},
	{`^expected '\.' or '\]' to end table name`, "expected . or ] in the [table] header; a bare name holds only letters, digits, _ and -"},
	{`^expected '\.' or '=', but got`, "expected = after the key (or . in a dotted key); a bare key holds only letters, digits, _ and -"},
	{`^expected value but found`, "expected a value: a string in quotes, a number, true or false, a date, an [array] or an { inline table }"},
	{`^expected a comma \(','\) or array terminator`, "expected , or ] after a value in the array"},
	{`^expected a comma or an inline table terminator`, "expected , or } after a value in the inline table"},
	{`^expected (two|four|eight) hexadecimal digits after '\\[xuU]'`, "an escape \\x, \\u or \\U lacks its hexadecimal digits"},
	{`^(?i)invalid float`, "this is not a valid float"},
	{`^cannot use sign with non-decimal numbers`, "cannot use a sign with a binary, octal or hexadecimal number"},
	{`^expected a digit but got`, "expected a digit"},
	{`^not a binary number`, "not a binary number"},
	{`^not an octal number`, "not an octal number"},
	{`^not a hexadecimal number`, "not a hexadecimal number"},
	{`^Invalid integer .*: underscores`, "invalid integer: underscores must be surrounded by digits"},
	{`^Invalid integer .*: cannot have leading zeroes`, "invalid integer: it cannot have leading zeroes"},
	{`is out of range for (int64|float64)$`, "this number is out of range"},
	{`is out of the safe .* range$`, "this number is out of the range a float holds exactly"},
	{`^invalid datetime`, "this is not a valid date or time"},
	{`^invalid duration`, "this is not a valid duration"},
	{`is not a table$`, "this key already holds a value, so it cannot be a table"},
	{`^Key '.*' was already created as a hash\.$`, "this key is already a table; define each key once"},
	{`^Key '.*' was already created and cannot be used as an array\.$`, "this key is already defined, so it cannot be an array of tables"},
	{`^Key '.*' has already been defined\.$`, "this key is already defined; define each key once"},
	{`^invalid escape`, "invalid escape in a string; use \\b \\t \\n \\f \\r \\\" \\\\ \\xHH \\uHHHH or \\UHHHHHHHH"},
	{`^Escaped character '\\u.*' is not valid UTF-8\.$`, "an escape \\u or \\U names no Unicode character"},
	{`^TOML files cannot contain control characters`, "a control character (other than a tab) is not allowed here"},
	{`^invalid UTF-8 byte`, "this byte begins no UTF-8 character"},
}

// syntaxFixed are the parser's messages that quote no text of the file,
// only fixed tokens.
const syntaxFixed = `^(` +
	`unexpected EOF(; expected (value|key separator '='|'"'|'"""'|"'"|"'''"))?|` +
	`unexpected end of table name \(table names cannot be empty\)|` +
	`unexpected table separator \(table names cannot be empty\)|` +
	`unexpected '=': key name appears blank|` +
	`unexpected '\.': keys cannot start with a '\.'|` +
	`unexpected '='|unexpected '\.'|unexpected comma|` +
	`unexpected '""""""'|unexpected "''''''"|` +
	`floats must start with a digit, not '\.'|` +
	`strings cannot contain newlines|` +
	`newlines not allowed within inline tables|` +
	`files cannot contain NULL bytes; probably using UTF-16; TOML files must be UTF-8` +
	`)$`

// syntaxREs are syntaxFixed and each of syntaxMessages' patterns,
// compiled.
var syntaxREs = sync.OnceValues(func() (*regexp.Regexp, []*regexp.Regexp) {
	res := make([]*regexp.Regexp, len(syntaxMessages))
	for i, m := range syntaxMessages {
		res[i] = regexp.MustCompile(m.pattern)
	}
	return regexp.MustCompile(syntaxFixed), res
})

// syntaxWords says what a parser message says, in words that quote no
// text of the file.
func syntaxWords(msg string) string {
	fixed, res := syntaxREs()
	if fixed.MatchString(msg) {
		return msg
	}
	for i, re := range res {
		if re.MatchString(msg) {
			return syntaxMessages[i].words
		}
	}
	return "the text is not valid TOML here"
}
