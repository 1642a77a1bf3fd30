package manifests

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// Error is a problem in a manifest or config file. It names the file, the
// line when it is known, and the key, and says what to do.
type Error struct {
	File string // "" for a config that did not come from a file
	Line int    // 1-based; 0 when unknown
	Col  int    // 1-based; 0 when unknown
	Key  string // dotted key ("store.kind"); "" when no key is at fault
	Msg  string
	// Err is the sentinel the problem is an instance of (ErrTooLarge,
	// ErrNotRegular, ...), or nil; errors.Is sees it.
	Err error
}

// Unwrap is the sentinel, for [errors.Is].
func (e *Error) Unwrap() error { return e.Err }

// Error is "file:line:col: key: message", each part left out when it is
// not known.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
			if e.Col > 0 {
				fmt.Fprintf(&b, ":%d", e.Col)
			}
		}
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Locate places e, a problem with a key of the config file at path that a
// check after [Load] found (a value the daemon refused as it started, such
// as a policy no plugin provides), in the file: it sets File and the line
// that defines the key, or the closest table that does. An e that names a
// file already, or a path that cannot be read, is left as it is.
func Locate(e *Error, path string) {
	if e.File != "" || path == "" {
		return
	}
	text, err := readFile(path, MaxConfigSize)
	if err != nil {
		return
	}
	e.File, e.Line = path, keyLine(text, splitKey(e.Key))
}

// decodeFile decodes the TOML text of file into v (a pointer to a struct
// already holding the defaults, which the file overlays) and turns every
// problem into an *Error: syntax, a value of the wrong type, a value its
// type rejects (a bad Size), and keys v has no field for.
func decodeFile(file string, text []byte, v any) error {
	_, err := decode(file, text, v)
	return err
}

// decode is decodeFile that also returns the metadata, for a schema that
// must tell a key set to its zero value from a key left out.
func decode(file string, text []byte, v any) (toml.MetaData, error) {
	// Nothing reaches the parser that could crash it (see checkShape).
	if e := checkShape(file, text); e != nil {
		return toml.MetaData{}, e
	}
	root := reflect.TypeOf(v).Elem()
	// First the syntax alone, into a plain map the type check walks.
	var raw map[string]any
	md, err := toml.Decode(string(text), &raw)
	if err != nil {
		var pe toml.ParseError
		if !errors.As(err, &pe) {
			return md, &Error{File: file, Msg: "TOML syntax: the text is not valid TOML"}
		}
		return md, syntaxError(file, pe, root)
	}
	if e := findTypeError(file, text, md, raw, root); e != nil {
		return md, e
	}
	md, err = toml.Decode(string(text), v)
	if err != nil {
		// A value its type refused, such as a Size that does not parse.
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return md, &Error{File: file, Line: pe.Position.Line, Key: pe.LastKey, Msg: pe.Message}
		}
		return md, &Error{File: file, Msg: err.Error()}
	}
	for _, k := range md.Undecoded() {
		if !freeForm(root, k) {
			msg := unknownKeyMsg(k, root)
			if m := renamedKeyMsg(k, root); m != "" {
				msg = m
			}
			return md, &Error{File: file, Line: keyLine(text, k), Key: k.String(), Msg: msg}
		}
	}
	return md, nil
}

// renamedTables are the tables of kairo.toml some keys left: by the old
// table, the table the keys went to and its type, which names them.
var renamedTables = map[string]struct {
	to   string
	keys reflect.Type
}{
	"host": {"plugin_limits", reflect.TypeFor[PluginLimitsConfig]()},
}

// renamedKeyMsg says where a key of an older kairo.toml went, or "" when
// k is not one of those.
func renamedKeyMsg(k toml.Key, root reflect.Type) string {
	if root != reflect.TypeFor[Config]() || len(k) != 2 {
		return ""
	}
	r, ok := renamedTables[k[0]]
	if !ok {
		return ""
	}
	if _, ok := childType(r.keys, k[1]); !ok {
		return ""
	}
	return fmt.Sprintf("[%s] %s was renamed to [%s] %s: move it to that table", k[0], k[1], r.to, k[1])
}

// unknownKeyMsg says what the keys around an unknown key are.
func unknownKeyMsg(k toml.Key, t reflect.Type) string {
	inArray := false
	for _, name := range k[:len(k)-1] {
		next, ok := childType(t, name)
		if !ok {
			break
		}
		tt, arr, ok := tableType(next)
		if !ok {
			break
		}
		t, inArray = tt, arr
	}
	what := "unknown key"
	if len(k) == 1 {
		what = "unknown table or key"
	}
	if t.Kind() != reflect.Struct {
		return what + "; check its spelling or remove it"
	}
	where := "the file"
	if len(k) > 1 {
		where = "[" + toml.Key(k[:len(k)-1]).String() + "]"
		if inArray {
			where = "[" + where + "]"
		}
	}
	return fmt.Sprintf("%s; check its spelling or remove it (%s takes %s)", what, where, strings.Join(tagNames(t), ", "))
}

// findTypeError walks the file's keys in order and reports the first whose
// TOML type does not fit the field it decodes into.
func findTypeError(file string, text []byte, md toml.MetaData, raw map[string]any, root reflect.Type) *Error {
	// md.Keys lists an array of tables' key once per table, in file order:
	// counting them tells which table of the array a key is in.
	opened := map[string]int{}
	for _, k := range md.Keys() {
		if md.Type(k...) == "ArrayHash" {
			opened[k.String()]++
		}
		t, val, at, ok := walk(root, raw, k, opened)
		if !ok {
			continue
		}
		if msg, sub := typeError(t, val); msg != "" {
			at = append(at, sub...)
			return &Error{File: file, Line: keyLine(text, at), Key: keyString(at), Msg: msg}
		}
	}
	return nil
}

// walk follows key k from the schema root and the raw decoded file to the
// type and the value it names. at is k with the index of each table of an
// array of tables it passes through ("progress", "[1]", "pattern"). It
// reports false for a key the schema does not know.
func walk(root reflect.Type, raw map[string]any, k toml.Key, opened map[string]int) (t reflect.Type, val any, at toml.Key, ok bool) {
	t, val = root, raw
	for i, name := range k {
		if items, isArr := val.([]map[string]any); isArr && t.Kind() == reflect.Slice {
			n := opened[k[:i].String()] - 1
			if n < 0 || n >= len(items) {
				return nil, nil, nil, false
			}
			t, val = t.Elem(), items[n]
			at = append(at, index(n))
		}
		m, isMap := val.(map[string]any)
		if !isMap {
			return nil, nil, nil, false
		}
		if freeTable(t) {
			// A free-form table, such as a plugin's config: any value
			// goes, at any depth.
			return nil, nil, nil, false
		}
		next, known := childType(t, name)
		if !known {
			return nil, nil, nil, false
		}
		t, val = next, m[name]
		at = append(at, name)
	}
	return t, val, at, true
}

// freeForm reports whether key k lies inside a free-form table (a map of
// any value, such as a plugin's config), where every key is known.
func freeForm(t reflect.Type, k toml.Key) bool {
	for _, name := range k {
		if t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if freeTable(t) {
			return true
		}
		next, ok := childType(t, name)
		if !ok {
			return false
		}
		t = next
	}
	return false
}

// freeTable reports whether a table decoded into t takes any value: a map
// of any.
func freeTable(t reflect.Type) bool {
	return t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Interface
}

// childType is the type the key name decodes into inside a table decoded
// into t: a struct's field or a map's element.
func childType(t reflect.Type, name string) (reflect.Type, bool) {
	if _, isText := textTypes[t]; isText {
		return nil, false
	}
	switch t.Kind() {
	case reflect.Struct:
		f, ok := fieldByTag(t, name)
		return f.Type, ok
	case reflect.Map:
		return t.Elem(), true
	}
	return nil, false
}

// tableType is the type a TOML table decodes into for a field of type t,
// and whether the field is an array of such tables.
func tableType(t reflect.Type) (reflect.Type, bool, bool) {
	if _, isText := textTypes[t]; isText {
		return nil, false, false
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return t, false, true
	case reflect.Slice:
		if e := t.Elem(); e.Kind() == reflect.Struct || e.Kind() == reflect.Map {
			return e, true, true
		}
	}
	return nil, false, false
}

// textTypes are the types that TOML decodes from text (or an integer)
// through UnmarshalText, with what a value of each looks like.
var textTypes = map[reflect.Type]string{
	reflect.TypeOf(Size(0)): `a size such as "16MiB"`,
	reflect.TypeOf(Rate(0)): `a rate such as "256KiB/s"`,
}

// typeError says why a decoded TOML value cannot go into a field of type t,
// or returns "" when it can. at is where in v the value at fault is: an
// item of an array ("[2]"), or a key inside a table that an array holds
// inline, which the file's key list does not name.
func typeError(t reflect.Type, v any) (msg string, at toml.Key) {
	if want, ok := textTypes[t]; ok {
		switch v.(type) {
		case string, int64:
			return "", nil
		}
		return mismatch(v, want), nil
	}
	switch k := t.Kind(); {
	case k == reflect.Struct || k == reflect.Map:
		if _, ok := v.(map[string]any); !ok {
			return mismatch(v, "a table"), nil
		}
	case k == reflect.String:
		if _, ok := v.(string); !ok {
			return mismatch(v, "a string (in quotes)"), nil
		}
	case k == reflect.Bool:
		if _, ok := v.(bool); !ok {
			return mismatch(v, "true or false"), nil
		}
	case k >= reflect.Int && k <= reflect.Uint64:
		n, ok := v.(int64)
		if !ok {
			msg := mismatch(v, "an integer")
			if s, isStr := v.(string); isStr {
				if _, err := strconv.ParseInt(s, 10, 64); err == nil {
					msg += ": write it without quotes"
				}
			}
			return msg, nil
		}
		if lo, hi := intRange(t); n < lo || n > 0 && uint64(n) > hi {
			return fmt.Sprintf("%d is out of range; want an integer from %d to %d", n, lo, hi), nil
		}
	case k == reflect.Float32 || k == reflect.Float64:
		switch v.(type) {
		case float64, int64:
		default:
			return mismatch(v, "a number"), nil
		}
	case k == reflect.Interface:
		switch v.(type) {
		case string, int64, float64, bool:
		default:
			return mismatch(v, "a string, a number or true or false"), nil
		}
	case k == reflect.Slice:
		switch v := v.(type) {
		case []any:
			for i, item := range v {
				msg, at := typeError(t.Elem(), item)
				if msg == "" {
					msg, at = inlineTableError(t.Elem(), item)
				}
				if msg != "" {
					return msg, append(toml.Key{index(i)}, at...)
				}
			}
		case []map[string]any:
			// An array of [[tables]]: the key list names their keys.
			for i, item := range v {
				if msg, at := typeError(t.Elem(), item); msg != "" {
					return msg, append(toml.Key{index(i)}, at...)
				}
			}
		default:
			return mismatch(v, "an array"), nil
		}
	}
	return "", nil
}

// inlineTableError checks the keys of v, a table written inline in an
// array, which the file's key list leaves out, against t.
func inlineTableError(t reflect.Type, v any) (string, toml.Key) {
	m, ok := v.(map[string]any)
	if !ok {
		return "", nil
	}
	for _, name := range sortedKeys(m) {
		ft, known := childType(t, name)
		if !known {
			continue // left to the check for unknown keys
		}
		msg, at := typeError(ft, m[name])
		if msg == "" {
			msg, at = inlineTableError(ft, m[name])
		}
		if msg != "" {
			return msg, append(toml.Key{name}, at...)
		}
	}
	return "", nil
}

func mismatch(v any, want string) string {
	return fmt.Sprintf("%s is %s, want %s", tomlValue(v), tomlKind(v), want)
}

// intRange is the smallest and largest value of integer type t.
func intRange(t reflect.Type) (int64, uint64) {
	bits := t.Bits()
	if t.Kind() >= reflect.Uint {
		return 0, math.MaxUint64 >> (64 - bits)
	}
	return -1 << (bits - 1), 1<<(bits-1) - 1
}

func tomlKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case map[string]any:
		return "a table"
	case []any, []map[string]any:
		return "an array"
	}
	return "a date or time"
}

func tomlValue(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case map[string]any, []any, []map[string]any:
		return "the value"
	}
	return fmt.Sprintf("%v", v)
}

// fieldByTag finds the field of struct type t that the TOML key name
// decodes into.
func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	if _, isText := textTypes[t]; isText || t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("toml"), ","); tag == name && tag != "-" {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// tagNames lists the keys struct type t takes, tables in brackets.
func tagNames(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		ft := t.Field(i).Type
		if tt, arr, ok := tableType(ft); ok {
			switch {
			case arr:
				tag = "[[" + tag + "]]"
			case tt.Kind() == reflect.Struct:
				tag = "[" + tag + "]"
			case tt.Kind() == reflect.Map:
				// A map of tables ([params.input]) reads as a table; a
				// map of values (set = { HOME = "..." }) as a key.
				if e := tt.Elem(); e.Kind() == reflect.Struct || e.Kind() == reflect.Map {
					tag = "[" + tag + "]"
				}
			}
		}
		names = append(names, tag)
	}
	return names
}

// An index element of a key ("[2]") names an item of an array: the third
// table of an array of tables, or the third value of an array. keyString
// writes it after its array, as in "progress[2].pattern".
func index(n int) string { return "[" + strconv.Itoa(n) + "]" }

func isIndex(s string) bool { return len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' }

// keyString writes a key with its index elements: "fs.read[2]".
func keyString(k toml.Key) string {
	var b strings.Builder
	for i, name := range k {
		if isIndex(name) {
			b.WriteString(name)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(toml.Key{name}.String())
	}
	return b.String()
}

// keyLine finds the line that defines key k, which may hold index elements.
// The TOML decoder keeps key positions to itself (MetaData has none to
// give), so this reads the text the simple way: table headers, arrays of
// tables and "key = value" lines, with dotted and quoted keys. A key the
// text does not define (an item of an array, a key of an inline table, a
// key left out) is placed at the closest enclosing key the text defines.
// It returns 0 when it cannot tell.
func keyLine(text []byte, k toml.Key) int {
	lines := strings.Split(string(text), "\n")
	for n := len(k); n > 0; n-- {
		if line := findKeyLine(lines, k[:n]); line > 0 {
			return line
		}
	}
	return 0
}

func findKeyLine(lines []string, k toml.Key) int {
	var table toml.Key
	tables := map[string]int{} // tables each [[array]] header has opened
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		var full toml.Key
		switch {
		case strings.HasPrefix(line, "[["):
			name, _, _ := strings.Cut(line[2:], "]]")
			table = splitKey(name)
			n := tables[table.String()]
			tables[table.String()]++
			table = append(table, index(n))
			full = table
		case line[0] == '[':
			name, _, _ := strings.Cut(line[1:], "]")
			table = splitKey(name)
			full = table
		default:
			name, _, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			full = append(append(toml.Key{}, table...), splitKey(name)...)
		}
		if keyMatches(full, k) {
			return i + 1
		}
	}
	return 0
}

func splitKey(s string) toml.Key {
	var k toml.Key
	for _, p := range strings.Split(s, ".") {
		k = append(k, strings.Trim(strings.TrimSpace(p), `"'`))
	}
	return k
}

// keyMatches reports whether the key full, read from a line, defines k or a
// key inside k. An index element of full that k leaves out matches any
// table of that array: k "progress.pattern" matches the first.
func keyMatches(full, k toml.Key) bool {
	j := 0
	for _, name := range full {
		if j == len(k) {
			break
		}
		if isIndex(name) && !isIndex(k[j]) {
			continue
		}
		if name != k[j] {
			return false
		}
		j++
	}
	return j == len(k)
}
