package meter

// LEB128 integers and sections, read and written.

import (
	"errors"
	"fmt"
)

var (
	errShort = errors.New("unexpected end of data")
	errLEB   = errors.New("malformed LEB128 integer")
)

// readU32 decodes the unsigned LEB128 at b[i:], at most 5 bytes with the
// unused bits of the last one zero, and returns it with the index after it.
func readU32(b []byte, i int) (uint32, int, error) {
	var v uint32
	for k := 0; k < 5; k++ {
		if i >= len(b) {
			return 0, i, errShort
		}
		c := b[i]
		i++
		v |= uint32(c&0x7f) << (7 * k)
		if c < 0x80 {
			if k == 4 && c > 0x0f {
				return 0, i, errLEB
			}
			return v, i, nil
		}
	}
	return 0, i, errLEB
}

// skipLEB returns the index after the LEB128 at b[i:], which may take at most
// max bytes. The value's range is left to the runtime that validates the
// rewritten module.
func skipLEB(b []byte, i, max int) (int, error) {
	for k := 0; k < max; k++ {
		if i >= len(b) {
			return i, errShort
		}
		c := b[i]
		i++
		if c < 0x80 {
			return i, nil
		}
	}
	return i, errLEB
}

// appendU32 appends v as the shortest unsigned LEB128.
func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// putPaddedU32 writes v as a 5-byte LEB128 into b[:5].
func putPaddedU32(b []byte, v uint32) {
	for k := range 4 {
		b[k] = byte(v>>(7*k))&0x7f | 0x80
	}
	b[4] = byte(v >> 28)
}

// reader reads the sections outside the code; the first error sticks, and
// later reads return zero values.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail(errShort)
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) u32() uint32 {
	if r.err != nil {
		return 0
	}
	v, off, err := readU32(r.b, r.off)
	r.off = off
	r.fail(err)
	return v
}

func (r *reader) skip(max int) {
	if r.err != nil {
		return
	}
	off, err := skipLEB(r.b, r.off, max)
	r.off = off
	r.fail(err)
}

func (r *reader) bytes(n uint32) []byte {
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)-r.off) {
		r.fail(errShort)
		return nil
	}
	b := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return b
}

func (r *reader) name() string { return string(r.bytes(r.u32())) }

// valType reads a value type of WebAssembly 2.0.
func (r *reader) valType() {
	switch t := r.byte(); t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
	default:
		r.fail(fmt.Errorf("value type %#x: %w", t, ErrUnsupported))
	}
}

func (r *reader) refType() {
	switch t := r.byte(); t {
	case 0x70, 0x6f:
	default:
		r.fail(fmt.Errorf("reference type %#x: %w", t, ErrUnsupported))
	}
}

func (r *reader) mutability() {
	if m := r.byte(); m > 1 {
		r.fail(fmt.Errorf("global mutability %#x: %w", m, ErrUnsupported))
	}
}

// limits reads the limits of a table or memory; flags 2 and 3 mark a shared
// memory (threads). 64-bit memories are not decoded.
func (r *reader) limits() {
	flags := r.byte()
	if flags > 3 {
		r.fail(fmt.Errorf("limits flags %#x: %w", flags, ErrUnsupported))
		return
	}
	r.u32()
	if flags&1 != 0 {
		r.u32()
	}
}

// done reports the sticky error, or bytes left over.
func (r *reader) done() error {
	if r.err != nil {
		return r.err
	}
	if r.off != len(r.b) {
		return fmt.Errorf("%d bytes after the last entry", len(r.b)-r.off)
	}
	return nil
}

// section appends a section whose content fill writes.
func (w *rewriter) section(id byte, fill func([]byte) []byte) error {
	return w.sectionErr(id, func(out []byte) ([]byte, error) { return fill(out), nil })
}

func (w *rewriter) sectionErr(id byte, fill func([]byte) ([]byte, error)) error {
	out, err := w.sectionErrTo(w.out, id, fill)
	if err != nil {
		return err
	}
	w.out = out
	return nil
}

// sectionErrTo appends to out a section whose size, unknown until fill is
// done, is written as a 5-byte LEB128, which the format allows.
func (w *rewriter) sectionErrTo(out []byte, id byte, fill func([]byte) ([]byte, error)) ([]byte, error) {
	mark := len(out)
	out = append(out, id, 0x80, 0x80, 0x80, 0x80, 0x00)
	out, err := fill(out)
	if err != nil {
		return nil, err
	}
	size := len(out) - mark - 6
	if uint64(size) > 1<<32-1 {
		return nil, fmt.Errorf("section %d grows past 4 GiB", id)
	}
	putPaddedU32(out[mark+1:], uint32(size))
	return out, nil
}

func appendSection(out []byte, id byte, content []byte) []byte {
	out = append(out, id)
	out = appendU32(out, uint32(len(content)))
	return append(out, content...)
}

func appendName(out []byte, s string) []byte {
	out = appendU32(out, uint32(len(s)))
	return append(out, s...)
}
