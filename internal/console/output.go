package console

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// output is app.js's Output: one process's lines of spans, SGR codes as
// classes, every other escape dropped, at most pageLines lines kept.
type output struct {
	pre, head, cur *node
	lines, dropped int
	curLen         int
	pending        map[string]string
	st             sgrState
}

type sgrState struct {
	fg, bg          int
	b, d, i, u, inv bool
	cls             string
}

var (
	escRE    = escStrip
	escWhole = regexp.MustCompile(`^(?:\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\|\x1b[ -/]*[0-~])`)
)

func newOutput() *output {
	return &output{pre: el("pre", "out"), head: el("div", "out-head"), pending: map[string]string{}, st: sgrState{fg: -1, bg: -1}}
}

func (o *output) newLine() {
	o.cur = el("div", "ln")
	o.curLen = 0
	o.pre.append(o.cur)
	if o.lines++; o.lines > pageLines {
		o.pre.removeFirst()
		o.lines--
		o.dropped++
		o.head.text(strconv.Itoa(o.dropped) + " earlier lines not kept")
	}
}

func (o *output) text(s, stream string) {
	for j, t := range strings.Split(s, "\n") {
		if j > 0 || o.cur == nil {
			o.newLine()
		}
		for t != "" {
			if o.curLen >= pageLineSize {
				o.newLine()
			}
			piece := utf16Prefix(t, pageLineSize-o.curLen)
			if piece == "" { // a pair that does not fit: the script splits it, this keeps it whole
				_, n := firstRune(t)
				piece = t[:n]
			}
			t = t[len(piece):]
			o.curLen += utf16Len(piece)
			cls := o.st.cls
			if stream == "stderr" {
				cls += " err"
			}
			if cls = strings.TrimSpace(cls); cls != "" {
				o.cur.append(el("span", cls, piece))
			} else {
				o.cur.kids = append(o.cur.kids, piece) // a text node, not stripped
			}
		}
	}
}

func firstRune(s string) (rune, int) {
	return utf8.DecodeRuneInString(s)
}

func (o *output) write(data, stream string) {
	s := o.pending[stream] + data
	o.pending[stream] = ""
	if at := strings.LastIndexByte(s, 0x1b); at >= 0 && !escWhole.MatchString(s[at:]) && utf16Len(s[at:]) < 4096 {
		o.pending[stream] = s[at:]
		s = s[:at]
	}
	last := 0
	for _, m := range escRE.FindAllStringSubmatchIndex(s, -1) {
		if m[0] > last {
			o.text(s[last:m[0]], stream)
		}
		last = m[1]
		if m[4] >= 0 && s[m[4]:m[5]] == "m" {
			o.st.apply(s[m[2]:m[3]])
		}
	}
	if last < len(s) {
		o.text(s[last:], stream)
	}
}

// apply is app.js's sgr().
func (st *sgrState) apply(params string) {
	var p []int
	if params == "" {
		p = []int{0}
	} else {
		for _, f := range strings.Split(strings.ReplaceAll(params, ":", ";"), ";") {
			n := 0
			if f != "" {
				n = parseIntPrefix(f)
			}
			p = append(p, n)
		}
	}
	at := func(i int) (int, bool) {
		if i < len(p) {
			return p[i], true
		}
		return 0, false
	}
	for i := 0; i < len(p); i++ {
		n := p[i]
		switch {
		case n == 0:
			*st = sgrState{fg: -1, bg: -1}
		case n == 1:
			st.b = true
		case n == 2:
			st.d = true
		case n == 3:
			st.i = true
		case n == 4:
			st.u = true
		case n == 7:
			st.inv = true
		case n == 22:
			st.b, st.d = false, false
		case n == 23:
			st.i = false
		case n == 24:
			st.u = false
		case n == 27:
			st.inv = false
		case n >= 30 && n <= 37:
			st.fg = n - 30
		case n >= 90 && n <= 97:
			st.fg = n - 90 + 8
		case n == 39:
			st.fg = -1
		case n >= 40 && n <= 47:
			st.bg = n - 40
		case n >= 100 && n <= 107:
			st.bg = n - 100 + 8
		case n == 49:
			st.bg = -1
		case n == 38 || n == 48:
			c := -1
			if x, _ := at(i + 1); x == 5 && i+1 < len(p) {
				if y, ok := at(i + 2); ok && y != nan && y < 16 {
					c = y
				}
				i += 2
			} else if x == 2 && i+1 < len(p) {
				i += 4
			}
			if n == 38 {
				st.fg = c
			} else {
				st.bg = c
			}
		}
	}
	var cls []string
	if st.fg >= 0 {
		cls = append(cls, "a-fg"+strconv.Itoa(st.fg))
	}
	if st.bg >= 0 {
		cls = append(cls, "a-bg"+strconv.Itoa(st.bg))
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{st.b, "a-b"}, {st.d, "a-d"}, {st.i, "a-i"}, {st.u, "a-u"}, {st.inv, "a-inv"}} {
		if f.on {
			cls = append(cls, f.name)
		}
	}
	st.cls = strings.Join(cls, " ")
}

// nan stands for parseInt's NaN: it matches no code.
const nan = -1 << 31

func parseIntPrefix(s string) int {
	n, i := 0, 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		n = n*10 + int(s[i]-'0')
		i++
	}
	if i == 0 {
		return nan
	}
	return n
}
