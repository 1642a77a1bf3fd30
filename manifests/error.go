package manifests

import (
	"errors"
	"fmt"
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
	Key  string // dotted key ("store.kind"); "" for a syntax error
	Msg  string
}

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

// decodeFile decodes the TOML text of file into v (a pointer to a struct
// already holding the defaults, which the file overlays) and turns every
// problem into an *Error: syntax, a value of the wrong type, a value its
// type rejects (a bad Size), and keys v has no field for.
func decodeFile(file string, text []byte, v any) error {
	// First the syntax alone, into a plain map the type check walks.
	var raw map[string]any
	md, err := toml.Decode(string(text), &raw)
	if err != nil {
		var pe toml.ParseError
		if !errors.As(err, &pe) {
			return &Error{File: file, Msg: err.Error()}
		}
		msg := "TOML syntax: " + pe.Message
		if u := strings.TrimSpace(pe.Usage); u != "" {
			msg += "\n" + u
		}
		return &Error{File: file, Line: pe.Position.Line, Col: pe.Position.Col, Key: pe.LastKey, Msg: msg}
	}
	root := reflect.TypeOf(v).Elem()
	if e := findTypeError(file, text, md, raw, root); e != nil {
		return e
	}
	md, err = toml.Decode(string(text), v)
	if err != nil {
		// A value its type refused, such as a Size that does not parse.
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return &Error{File: file, Line: pe.Position.Line, Key: pe.LastKey, Msg: pe.Message}
		}
		return &Error{File: file, Msg: err.Error()}
	}
	if und := md.Undecoded(); len(und) > 0 {
		k := und[0]
		return &Error{File: file, Line: keyLine(text, k), Key: k.String(), Msg: unknownKeyMsg(k, root)}
	}
	return nil
}

// unknownKeyMsg says what the keys around an unknown key are.
func unknownKeyMsg(k toml.Key, t reflect.Type) string {
	for _, name := range k[:len(k)-1] {
		f, ok := fieldByTag(t, name)
		if !ok || f.Type.Kind() != reflect.Struct {
			break
		}
		t = f.Type
	}
	what := "unknown key"
	if len(k) == 1 {
		what = "unknown table or key"
	}
	where := "the file"
	if len(k) > 1 {
		where = "[" + toml.Key(k[:len(k)-1]).String() + "]"
	}
	return fmt.Sprintf("%s; check its spelling or remove it (%s takes %s)", what, where, strings.Join(tagNames(t), ", "))
}

// findTypeError walks the file's keys in order and reports the first whose
// TOML type does not fit the field it decodes into.
func findTypeError(file string, text []byte, md toml.MetaData, raw map[string]any, root reflect.Type) *Error {
	for _, k := range md.Keys() {
		t := root
		var val any = raw
		known := true
		for _, name := range k {
			f, ok := fieldByTag(t, name)
			m, isMap := val.(map[string]any)
			if !ok || !isMap {
				known = false
				break
			}
			t, val = f.Type, m[name]
		}
		if !known {
			continue
		}
		if want, ok := fits(t, val); !ok {
			msg := fmt.Sprintf("%s is %s, want %s", tomlValue(val), tomlKind(val), want)
			if s, isStr := val.(string); isStr && want == "an integer" {
				if _, err := strconv.ParseInt(s, 10, 64); err == nil {
					msg += ": write it without quotes"
				}
			}
			return &Error{File: file, Line: keyLine(text, k), Key: k.String(), Msg: msg}
		}
	}
	return nil
}

var sizeType = reflect.TypeOf(Size(0))

// fits reports whether a decoded TOML value can go into a field of type t,
// and if not, what the field wants.
func fits(t reflect.Type, v any) (string, bool) {
	switch {
	case t == sizeType:
		switch v.(type) {
		case string, int64:
			return "", true
		}
		return `a size such as "16MiB"`, false
	case t.Kind() == reflect.Struct:
		_, ok := v.(map[string]any)
		return "a table", ok
	case t.Kind() == reflect.String:
		_, ok := v.(string)
		return "a string (in quotes)", ok
	case t.Kind() == reflect.Bool:
		_, ok := v.(bool)
		return "true or false", ok
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		_, ok := v.(int64)
		return "an integer", ok
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		switch v.(type) {
		case float64, int64:
			return "", true
		}
		return "a number", false
	case t.Kind() == reflect.Slice:
		switch v.(type) {
		case []any, []map[string]any:
			return "", true
		}
		return "an array", false
	}
	return "", true
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
	case map[string]any:
		return "the value"
	case []any:
		return "the value"
	}
	return fmt.Sprintf("%v", v)
}

// fieldByTag finds the field of struct type t that the TOML key name
// decodes into.
func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	if t.Kind() != reflect.Struct || t == sizeType {
		return reflect.StructField{}, false
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("toml"), ","); tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func tagNames(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ","); tag != "" && tag != "-" {
			if t.Field(i).Type.Kind() == reflect.Struct && t.Field(i).Type != sizeType {
				tag = "[" + tag + "]"
			}
			names = append(names, tag)
		}
	}
	return names
}

// keyLine finds the line that defines key k. The TOML decoder keeps key
// positions to itself (MetaData has none to give), so this reads the text
// the simple way: table headers and "key = value" lines, with dotted and
// quoted keys. It returns 0 when it cannot tell.
func keyLine(text []byte, k toml.Key) int {
	var table toml.Key
	for i, line := range strings.Split(string(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		var full toml.Key
		switch {
		case strings.HasPrefix(line, "[["):
			name, _, _ := strings.Cut(line[2:], "]]")
			table = splitKey(name)
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
		if hasPrefix(full, k) {
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

func hasPrefix(full, k toml.Key) bool {
	if len(full) < len(k) {
		return false
	}
	for i := range k {
		if full[i] != k[i] {
			return false
		}
	}
	return true
}
