package meter

import (
	"errors"
	"fmt"
)

// Data segments. The Go linker writes its data as one active segment per
// run of non-zero bytes: tens of thousands of segments for a plugin, which
// the runtime decodes, allocates and keeps one by one (some 6 MiB of the host's
// heap per instance, and milliseconds of every load). Both Rewrite and
// Compact merge segments that follow each other closely, filling the gap
// between them with the zeros the memory holds there anyway.

// maxDataGap is the widest run of zeros merged into a segment; the Go
// linker leaves gaps of about 20 bytes.
const maxDataGap = 64

var zeros [maxDataGap]byte

// maxDataRuns bounds the runs of rising addresses the merge looks through;
// past it, the segments stay as they are.
const maxDataRuns = 16

// Compact returns a copy of wasm with its data segments merged as above and
// nothing else changed. It refuses what it cannot read; the host then keeps
// the module as it is.
func Compact(wasm []byte) ([]byte, error) {
	if len(wasm) < len(header) || string(wasm[:len(header)]) != string(header) {
		return nil, errors.New("meter: not a WebAssembly 1.0 binary (wrong magic or version)")
	}
	out := make([]byte, 0, len(wasm)+len(wasm)/4)
	out = append(out, header...)
	r := reader{b: wasm, off: len(header)}
	dataCount := false
	for r.off < len(wasm) {
		start := r.off
		id := r.byte()
		content := r.bytes(r.u32())
		if r.err != nil {
			return nil, fmt.Errorf("meter: section at byte %#x: %w", start, r.err)
		}
		switch id {
		case secDataCount:
			dataCount = true
		case secData:
			if merged, ok := mergeData(out, content, dataCount); ok {
				out = merged
				continue
			}
		}
		out = appendSection(out, id, content)
	}
	return out, nil
}

// segment is one active data segment of memory 0 at a constant address.
type segment struct {
	at   uint64
	data []byte
}

// mergeData appends to dst the data section whose content is given, with
// close segments merged, or returns false when it holds anything but active
// segments of memory 0 at i32 constants, or a data count section says the
// code may name segments by index (memory.init and data.drop need it).
func mergeData(dst, content []byte, dataCount bool) ([]byte, bool) {
	if dataCount {
		return nil, false
	}
	r := reader{b: content}
	n := r.u32()
	if r.err != nil || uint64(n) > uint64(len(content)) || n < 2 {
		return nil, false
	}
	segs := make([]segment, n)
	for i := range segs {
		if flags := r.u32(); flags != 0 || r.byte() != 0x41 {
			return nil, false
		}
		v, off, err := readS32(r.b, r.off)
		if err != nil {
			return nil, false
		}
		r.off = off
		if r.byte() != 0x0b {
			return nil, false
		}
		segs[i] = segment{at: uint64(uint32(v)), data: r.bytes(r.u32())}
	}
	if r.done() != nil {
		return nil, false
	}

	// The zeros of a merge must not land where an earlier segment wrote;
	// to keep it simple, a gap is filled only where no segment writes. The
	// segments come in a few runs, each at rising, disjoint addresses (two
	// for a Go module): a gap between neighbours of one run is looked up
	// in the others.
	var runs [][]segment
	for i := 0; i < len(segs); {
		j := i + 1
		for j < len(segs) && segs[j].at >= segs[j-1].at+uint64(len(segs[j-1].data)) {
			j++
		}
		if runs = append(runs, segs[i:j]); len(runs) > maxDataRuns {
			return nil, false
		}
		i = j
	}
	written := func(from, to uint64, own int) bool { // does a segment of another run write in [from, to)?
		for k, run := range runs {
			if k == own {
				continue
			}
			// The first segment of the run that ends after from.
			lo, hi := 0, len(run)
			for lo < hi {
				m := int(uint(lo+hi) >> 1)
				if run[m].at+uint64(len(run[m].data)) <= from {
					lo = m + 1
				} else {
					hi = m
				}
			}
			if lo < len(run) && run[lo].at < to {
				return true
			}
		}
		return false
	}

	out := append(dst, secData, 0x80, 0x80, 0x80, 0x80, 0x00) // the size, patched below
	merged := 0
	countAt := len(out)
	out = append(out, 0x80, 0x80, 0x80, 0x80, 0x00) // the count, patched below
	run, runEnd := -1, 0
	for i := 0; i < len(segs); {
		if i == runEnd {
			run++
			runEnd += len(runs[run])
		}
		first, end := segs[i].at, segs[i].at+uint64(len(segs[i].data))
		j := i + 1
		for ; j < runEnd; j++ {
			next := segs[j].at
			if next-end > maxDataGap || (next > end && written(end, next, run)) {
				break
			}
			end = next + uint64(len(segs[j].data))
		}
		out = append(out, 0x00, 0x41)
		out = appendS32(out, int32(uint32(first)))
		out = append(out, 0x0b)
		out = appendU32(out, uint32(end-first))
		for k := i; k < j; k++ {
			if k > i {
				prevEnd := segs[k-1].at + uint64(len(segs[k-1].data))
				out = append(out, zeros[:segs[k].at-prevEnd]...)
			}
			out = append(out, segs[k].data...)
		}
		merged++
		i = j
	}
	putPaddedU32(out[countAt:], uint32(merged))
	if uint64(len(out)-countAt) > 1<<32-1 {
		return nil, false
	}
	putPaddedU32(out[countAt-5:], uint32(len(out)-countAt))
	return out, true
}

// readS32 decodes the signed LEB128 at b[i:], at most 5 bytes.
func readS32(b []byte, i int) (int32, int, error) {
	var v int64
	for k := 0; k < 5; k++ {
		if i >= len(b) {
			return 0, i, errShort
		}
		c := b[i]
		i++
		v |= int64(c&0x7f) << (7 * k)
		if c < 0x80 {
			if shift := 7 * (k + 1); shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			if v < -1<<31 || v > 1<<31-1 {
				return 0, i, errLEB
			}
			return int32(v), i, nil
		}
	}
	return 0, i, errLEB
}

// appendS32 appends v as the shortest signed LEB128.
func appendS32(b []byte, v int32) []byte {
	x := int64(v)
	for {
		c := byte(x & 0x7f)
		x >>= 7
		if (x == 0 && c&0x40 == 0) || (x == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
