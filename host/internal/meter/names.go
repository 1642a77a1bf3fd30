package meter

// Custom sections: kept, but for the function indices of the name section
// and DWARF.

import "strings"

// custom copies custom sections, but moves the function indices of the
// name section and drops DWARF, whose code offsets no longer hold.
func (w *rewriter) custom(content []byte) error {
	r := reader{b: content}
	name := r.name()
	if r.err != nil {
		return r.err
	}
	switch {
	case strings.HasPrefix(name, ".debug_"):
		return nil
	case name == "name":
		if out, ok := w.nameSection(content, r.off); ok {
			w.out = out
		}
		// A name section the rewriter cannot read only names things: drop it.
		return nil
	}
	w.out = appendSection(w.out, secCustom, content)
	return nil
}

// nameSection appends the name section with function indices moved. The
// subsections of function names, local names and label names are keyed by
// function index; the others are copied.
func (w *rewriter) nameSection(content []byte, from int) ([]byte, bool) {
	r := reader{b: content, off: from}
	out, err := w.sectionErrTo(w.out, secCustom, func(out []byte) ([]byte, error) {
		out = append(out, content[:from]...)
		for r.off < len(content) && r.err == nil {
			id := r.byte()
			size := r.u32()
			if r.err != nil || uint64(size) > uint64(len(content)-r.off) {
				return nil, errShort
			}
			sub := reader{b: content[r.off : r.off+int(size)]}
			r.off += int(size)
			if id < 1 || id > 3 {
				out = append(out, id)
				out = appendU32(out, size)
				out = append(out, sub.b...)
				continue
			}
			mark := len(out)
			out = append(out, id, 0x80, 0x80, 0x80, 0x80, 0x00)
			n := sub.u32()
			out = appendU32(out, n)
			for k := uint32(0); k < n && sub.err == nil; k++ {
				out = appendU32(out, w.funcIndex(sub.u32()))
				from := sub.off
				if id == 1 {
					sub.name()
				} else {
					for m := sub.u32(); m > 0 && sub.err == nil; m-- {
						sub.u32()
						sub.name()
					}
				}
				out = append(out, sub.b[from:sub.off]...)
			}
			if err := sub.done(); err != nil {
				return nil, err
			}
			putPaddedU32(out[mark+1:], uint32(len(out)-mark-6))
		}
		return out, r.err
	})
	return out, err == nil
}
