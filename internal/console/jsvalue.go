package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// jsValue is a JSON value as the page's script holds it after
// JSON.parse: an object keeps its keys' order, numbers are doubles. The
// first paint's rows are drawn from these, with the script's own
// conversions (jsValue.str, jsValue.concat, jsValue.truthy), so the
// markup the daemon renders is the markup app.js builds.
type jsValue struct {
	kind byte // 0 undefined, 'n' null, 'b' bool, 'f' number, 's' string, 'a' array, 'o' object
	b    bool
	f    float64
	s    string
	arr  []*jsValue
	keys []string
	vals []*jsValue
}

var undefined = &jsValue{}

// parseJS parses one JSON value as JSON.parse does: a repeated key keeps
// its first place and its last value.
func parseJS(j []byte) (*jsValue, error) {
	p := jsParser{j: j}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if p.skip(); p.i != len(p.j) {
		return nil, errors.New("extra bytes after the JSON value")
	}
	return v, nil
}

// jsParser reads JSON a byte at a time: the page's events are many small
// objects, for which encoding/json's token reader costs more than the
// rest of the drawing.
type jsParser struct {
	j []byte
	i int
}

var errJSON = errors.New("not JSON")

func (p *jsParser) skip() {
	for p.i < len(p.j) && (p.j[p.i] == ' ' || p.j[p.i] == '\t' || p.j[p.i] == '\n' || p.j[p.i] == '\r') {
		p.i++
	}
}

func (p *jsParser) value(depth int) (*jsValue, error) {
	if depth > 1000 {
		return nil, errors.New("nested too deep")
	}
	p.skip()
	if p.i >= len(p.j) {
		return nil, io.ErrUnexpectedEOF
	}
	switch c := p.j[p.i]; {
	case c == '{' || c == '[':
		v := &jsValue{kind: 'a'}
		end := byte(']')
		if c == '{' {
			v.kind, end = 'o', '}'
		}
		p.i++
		for first := true; ; first = false {
			p.skip()
			if p.i < len(p.j) && p.j[p.i] == end && first {
				p.i++
				return v, nil
			}
			var key string
			if v.kind == 'o' {
				k, err := p.value(depth + 1)
				if err != nil {
					return nil, err
				}
				if k.kind != 's' {
					return nil, errJSON
				}
				key = k.s
				if p.skip(); p.i >= len(p.j) || p.j[p.i] != ':' {
					return nil, errJSON
				}
				p.i++
			}
			x, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			if v.kind == 'a' {
				v.arr = append(v.arr, x)
			} else if i := slices.Index(v.keys, key); i >= 0 {
				v.vals[i] = x
			} else {
				v.keys, v.vals = append(v.keys, key), append(v.vals, x)
			}
			p.skip()
			if p.i >= len(p.j) {
				return nil, io.ErrUnexpectedEOF
			}
			switch p.j[p.i] {
			case ',':
				p.i++
			case end:
				p.i++
				return v, nil
			default:
				return nil, errJSON
			}
		}
	case c == '"':
		start := p.i
		plain := true
		for p.i++; p.i < len(p.j) && p.j[p.i] != '"'; p.i++ {
			if p.j[p.i] == '\\' {
				plain = false
				p.i++
			}
		}
		if p.i >= len(p.j) {
			return nil, io.ErrUnexpectedEOF
		}
		p.i++
		if plain && utf8.Valid(p.j[start+1:p.i-1]) {
			return &jsValue{kind: 's', s: string(p.j[start+1 : p.i-1])}, nil
		}
		var s string
		if err := json.Unmarshal(p.j[start:p.i], &s); err != nil {
			return nil, err
		}
		return &jsValue{kind: 's', s: s}, nil
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range []struct {
			text string
			v    jsValue
		}{{"true", jsValue{kind: 'b', b: true}}, {"false", jsValue{kind: 'b'}}, {"null", jsValue{kind: 'n'}}} {
			if bytes.HasPrefix(p.j[p.i:], []byte(lit.text)) {
				p.i += len(lit.text)
				v := lit.v
				return &v, nil
			}
		}
		return nil, errJSON
	default:
		start := p.i
		for p.i < len(p.j) && strings.IndexByte("+-0123456789.eE", p.j[p.i]) >= 0 {
			p.i++
		}
		f, err := strconv.ParseFloat(string(p.j[start:p.i]), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, errJSON
		}
		return &jsValue{kind: 'f', f: f}, nil
	}
}

// get is v[k]: undefined when v is no object or has no k.
func (v *jsValue) get(k string) *jsValue {
	if v.kind == 'o' {
		if i := slices.Index(v.keys, k); i >= 0 {
			return v.vals[i]
		}
	}
	return undefined
}

// object is v when it is an object or an array, else an empty object:
// the script's `x && typeof x === "object" ? x : {}`.
func (v *jsValue) object() *jsValue {
	if v.kind == 'o' || v.kind == 'a' {
		return v
	}
	return &jsValue{kind: 'o'}
}

func (v *jsValue) isObject() bool  { return v.kind == 'o' || v.kind == 'a' }
func (v *jsValue) isNullish() bool { return v.kind == 0 || v.kind == 'n' }

// truthy is the value as a JavaScript condition.
func (v *jsValue) truthy() bool {
	switch v.kind {
	case 'b':
		return v.b
	case 'f':
		return v.f != 0 && !math.IsNaN(v.f)
	case 's':
		return v.s != ""
	case 'a', 'o':
		return true
	}
	return false
}

// str is the script's str(): a string as it is, nothing as "", anything
// else as JSON.stringify writes it.
func (v *jsValue) str() string {
	switch v.kind {
	case 's':
		return v.s
	case 0, 'n':
		return ""
	}
	var b strings.Builder
	v.stringify(&b, "", "")
	return b.String()
}

// concat is the value as string concatenation makes it (String(v)).
func (v *jsValue) concat() string {
	switch v.kind {
	case 0:
		return "undefined"
	case 'n':
		return "null"
	case 'b':
		return strconv.FormatBool(v.b)
	case 'f':
		return jsNumber(v.f)
	case 's':
		return v.s
	case 'a':
		parts := make([]string, len(v.arr))
		for i, x := range v.arr {
			if !x.isNullish() {
				parts[i] = x.concat()
			}
		}
		return strings.Join(parts, ",")
	}
	return "[object Object]"
}

// number is Number(v).
func (v *jsValue) number() float64 {
	switch v.kind {
	case 'n':
		return 0
	case 'b':
		if v.b {
			return 1
		}
		return 0
	case 'f':
		return v.f
	case 's', 'a':
		s := strings.TrimSpace(v.concat())
		if s == "" {
			return 0
		}
		switch strings.TrimPrefix(s, "+") {
		case "Infinity":
			return math.Inf(1)
		case "-Infinity":
			return math.Inf(-1)
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || strings.ContainsFunc(s, func(r rune) bool { return r != 'e' && r != 'E' && (r|0x20 >= 'a' && r|0x20 <= 'z' || r == '_') }) {
			return math.NaN()
		}
		return f
	}
	return math.NaN()
}

// entries is Object.entries(v) in its order: the keys that are array
// indices first, ascending, then the others as they came.
func (v *jsValue) entries() (keys []string, vals []*jsValue) {
	if v.kind == 'a' {
		for i, x := range v.arr {
			keys, vals = append(keys, strconv.Itoa(i)), append(vals, x)
		}
		return keys, vals
	}
	type kv struct {
		k string
		v *jsValue
		n uint64
	}
	var idx, rest []kv
	for i, k := range v.keys {
		if n, ok := arrayIndex(k); ok {
			idx = append(idx, kv{k, v.vals[i], n})
		} else {
			rest = append(rest, kv{k, v.vals[i], 0})
		}
	}
	slices.SortStableFunc(idx, func(a, b kv) int {
		switch {
		case a.n < b.n:
			return -1
		case a.n > b.n:
			return 1
		}
		return 0
	})
	for _, x := range append(idx, rest...) {
		keys, vals = append(keys, x.k), append(vals, x.v)
	}
	return keys, vals
}

func arrayIndex(k string) (uint64, bool) {
	n, err := strconv.ParseUint(k, 10, 32)
	return n, err == nil && n < math.MaxUint32 && strconv.FormatUint(n, 10) == k
}

// stringify writes JSON.stringify(v, null, indent): nothing for
// undefined.
func (v *jsValue) stringify(b *strings.Builder, indent, at string) {
	inner := at + indent
	open := func(c byte) {
		b.WriteByte(c)
	}
	sep := func(first bool) {
		if !first {
			b.WriteByte(',')
		}
		if indent != "" {
			b.WriteByte('\n')
			b.WriteString(inner)
		}
	}
	closeWith := func(c byte, empty bool) {
		if indent != "" && !empty {
			b.WriteByte('\n')
			b.WriteString(at)
		}
		b.WriteByte(c)
	}
	switch v.kind {
	case 'n':
		b.WriteString("null")
	case 'b':
		b.WriteString(strconv.FormatBool(v.b))
	case 'f':
		if math.IsNaN(v.f) || math.IsInf(v.f, 0) {
			b.WriteString("null")
		} else {
			b.WriteString(jsNumber(v.f))
		}
	case 's':
		jsQuote(b, v.s)
	case 'a':
		open('[')
		for i, x := range v.arr {
			sep(i == 0)
			if x.kind == 0 {
				b.WriteString("null")
			} else {
				x.stringify(b, indent, inner)
			}
		}
		closeWith(']', len(v.arr) == 0)
	case 'o':
		open('{')
		keys, vals := v.entries()
		n := 0
		for i, k := range keys {
			if vals[i].kind == 0 {
				continue
			}
			sep(n == 0)
			n++
			jsQuote(b, k)
			b.WriteByte(':')
			if indent != "" {
				b.WriteByte(' ')
			}
			vals[i].stringify(b, indent, inner)
		}
		closeWith('}', n == 0)
	}
}

// jsQuote writes s as JSON.stringify quotes a string.
func jsQuote(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte("0123456789abcdef"[r>>4])
				b.WriteByte("0123456789abcdef"[r&15])
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// jsNumber is Number.prototype.toString(): the shortest digits that read
// back as f, in decimal from 1e-7 to 1e21, else with an exponent.
func jsNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	k, n := len(digits), x+1
	switch {
	case k <= n && n <= 21:
		return sign + digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return sign + digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return sign + "0." + strings.Repeat("0", -n) + digits
	}
	es := "+"
	if n-1 < 0 {
		es = "-"
	}
	m := digits[:1]
	if k > 1 {
		m += "." + digits[1:]
	}
	return sign + m + "e" + es + strconv.Itoa(abs(n-1))
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// utf16Len is s's length as JavaScript counts it.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// utf16Prefix is s's first n UTF-16 code units (a pair cut in two is
// left out).
func utf16Prefix(s string, n int) string {
	used := 0
	for i, r := range s {
		w := utf16.RuneLen(r)
		if used+w > n {
			return s[:i]
		}
		used += w
	}
	return s
}

// clip is the script's clip(s, n).
func clip(s string, n int) string {
	if len(s) > n && utf16Len(s) > n {
		return utf16Prefix(s, n) + "…"
	}
	return s
}
