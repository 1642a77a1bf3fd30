package console

import (
	"html/template"
	"regexp"
	"slices"
	"strings"
)

// node is an element of the first paint's markup, built as app.js builds
// its DOM (el, append, prepend; a node appended elsewhere moves), then
// written as HTML. Its tag and attribute names are the renderer's own;
// every value and text is escaped by html/template's escaper.
type node struct {
	tag    string
	attrs  []attr // class first, as el() sets it
	kids   []any  // *node or string (text)
	parent *node
}

type attr struct{ name, value string }

// el is app.js's el(): class names, then children; a string child is
// text, without terminal escapes and control characters.
func el(tag, class string, kids ...any) *node {
	n := &node{tag: tag}
	if class != "" {
		n.attrs = append(n.attrs, attr{"class", class})
	}
	n.append(kids...)
	return n
}

// escStrip is app.js's ESC_RE: a terminal escape, or a control character
// other than a tab and a newline.
var escStrip = regexp.MustCompile(`\x1b\[([0-?]*)[ -/]*([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\|\x1b[ -/]*[0-~]|[\x00-\x08\x0b-\x1f\x7f]`)

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 && r != '\t' && r != '\n' || r == 0x7f })
}

func textOf(s string) string {
	if hasControl(s) {
		return escStrip.ReplaceAllString(s, "")
	}
	return s
}

func (n *node) append(kids ...any) {
	for _, k := range kids {
		switch k := k.(type) {
		case string:
			n.kids = append(n.kids, textOf(k))
		case *node:
			if k == nil {
				continue
			}
			k.detach()
			k.parent = n
			n.kids = append(n.kids, k)
		}
	}
}

func (n *node) prepend(k *node) {
	k.detach()
	k.parent = n
	n.kids = append([]any{k}, n.kids...)
}

func (n *node) detach() {
	if p := n.parent; p != nil {
		if i := slices.IndexFunc(p.kids, func(x any) bool { return x == any(n) }); i >= 0 {
			p.kids = slices.Delete(p.kids, i, i+1)
		}
		n.parent = nil
	}
}

// set sets an attribute, in its place if it is there (as the DOM does).
func (n *node) set(name, value string) {
	for i := range n.attrs {
		if n.attrs[i].name == name {
			n.attrs[i].value = value
			return
		}
	}
	n.attrs = append(n.attrs, attr{name, value})
}

func (n *node) unset(name string) {
	n.attrs = slices.DeleteFunc(n.attrs, func(a attr) bool { return a.name == name })
}

// hidden is the DOM's hidden property.
func (n *node) hidden(h bool) {
	if h {
		n.set("hidden", "")
	} else {
		n.unset("hidden")
	}
}

// text replaces the children with a text, as textContent does (no
// stripping: the script sets textContent raw).
func (n *node) text(s string) {
	for _, k := range n.kids {
		if k, ok := k.(*node); ok {
			k.parent = nil
		}
	}
	n.kids = n.kids[:0]
	if s != "" {
		n.kids = append(n.kids, s)
	}
}

// elements counts the element children.
func (n *node) elements() int {
	c := 0
	for _, k := range n.kids {
		if _, ok := k.(*node); ok {
			c++
		}
	}
	return c
}

// removeFirst removes the first child.
func (n *node) removeFirst() {
	if len(n.kids) == 0 {
		return
	}
	if k, ok := n.kids[0].(*node); ok {
		k.parent = nil
	}
	n.kids = n.kids[1:]
}

// write writes n as HTML.
func (n *node) write(b *strings.Builder) {
	b.WriteByte('<')
	b.WriteString(n.tag)
	for _, a := range n.attrs {
		b.WriteByte(' ')
		b.WriteString(a.name)
		if a.value != "" {
			b.WriteString(`="`)
			b.WriteString(escape(a.value))
			b.WriteByte('"')
		}
	}
	b.WriteByte('>')
	if n.tag == "pre" {
		// The parser drops a newline that starts a pre: one more keeps
		// the text's own.
		b.WriteByte('\n')
	}
	for _, k := range n.kids {
		switch k := k.(type) {
		case string:
			b.WriteString(escape(k))
		case *node:
			k.write(b)
		}
	}
	b.WriteString("</")
	b.WriteString(n.tag)
	b.WriteByte('>')
}

// escape is html/template's escaper, and a carriage return as a
// reference (the parser would read a raw one as a newline).
func escape(s string) string {
	s = template.HTMLEscapeString(s)
	if strings.Contains(s, "\r") {
		s = strings.ReplaceAll(s, "\r", "&#13;")
	}
	return s
}

// children writes n's children, not n.
func (n *node) children() template.HTML {
	var b strings.Builder
	for _, k := range n.kids {
		switch k := k.(type) {
		case string:
			b.WriteString(escape(k))
		case *node:
			k.write(&b)
		}
	}
	return template.HTML(b.String())
}
