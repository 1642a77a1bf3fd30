// Package meter rewrites a WebAssembly module so that its host can stop it
// at any time, without compiling termination checks into the runtime.
//
// Rewrite adds to the module an imported function, ImportModule.ImportYield
// of type () -> i32, and a mutable i32 global, exported as ExportFuel. At the
// head of every loop, and on entry to every function that makes calls and
// does not reach a loop first, it inserts a check that counts the global
// down and, once it falls below zero, calls the import and stores what it
// returns:
//
//	global.get $fuel
//	i32.const 1
//	i32.sub
//	global.set $fuel
//	global.get $fuel
//	i32.const 0
//	i32.lt_s
//	if
//	  call $yield
//	  global.set $fuel
//	end
//
// Every unbounded run of a guest passes a loop head or a function entry, so
// it passes a check. The host stops a guest by setting the global to zero
// and making the import trap; the import, called at least once per budget it
// hands out, also gives the Go runtime the thread back, which native wasm
// code otherwise never does.
//
// The rewrite also merges the module's data segments where it can (see
// Compact).
//
// The rewriter decodes every instruction of WebAssembly 2.0 (MVP,
// sign-extension, saturating conversions, bulk memory, reference types,
// multi-value, SIMD) and of the threads, tail-call and typed
// function-reference proposals. A module with anything else (exceptions,
// GC, memory64 limits, an unknown opcode) or that is malformed is refused
// with an error, and the host must then not run it unenforced.
//
// Why checks in the guest's code, not in the runtime:
// docs/RATIONALE.md#untrusted-guests-are-stopped-by-checks-in-their-code.
package meter

import (
	"errors"
	"fmt"
)

// The names the rewritten module uses to meet its host. A module that
// already uses them is refused.
const (
	// ImportModule and ImportYield name the imported check, () -> i32: it
	// returns the next budget of checks, or traps when the guest must stop.
	ImportModule = "kairo_meter"
	ImportYield  = "yield"
	// ExportFuel names the i32 global counting the checks left before the
	// next call of the import. The host sets it to 0 to make the guest call
	// the import at its next check.
	ExportFuel = "kairo_meter_fuel"
)

// ErrUnsupported is wrapped by the error of a module that uses a feature the
// rewriter does not decode.
var ErrUnsupported = errors.New("a feature the meter does not decode")

// Section ids, in the order a module must hold them. Tags (13) belong
// between memories and globals, but they come with exception handling,
// which the rewriter does not decode.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
)

// sectionRank orders the known sections; 0 means unknown.
var sectionRank = [...]int{
	secType: 1, secImport: 2, secFunction: 3, secTable: 4, secMemory: 5,
	secGlobal: 6, secExport: 7, secStart: 8, secElement: 9, secDataCount: 10,
	secCode: 11, secData: 12,
}

var header = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}

// rewriter holds what the sections before the code tell about the module's
// index spaces, and the output under construction.
type rewriter struct {
	in  []byte
	out []byte

	numTypes       uint32
	importedFuncs  uint32 // the yield import takes this index
	importedGlobal uint32
	definedGlobals uint32
	definedFuncs   uint32
	dataCount      bool // the module has a data count section

	checkSeq []byte // the check sequence, with the module's indices
	body     []byte // scratch: one function body, rewritten
}

// Rewrite returns a copy of the WebAssembly module wasm with the checks the
// package doc describes. It never changes wasm.
func Rewrite(wasm []byte) ([]byte, error) {
	if len(wasm) < len(header) || string(wasm[:len(header)]) != string(header) {
		return nil, errors.New("meter: not a WebAssembly 1.0 binary (wrong magic or version)")
	}
	// Room for the checks and for the zeros merged data segments take.
	w := &rewriter{in: wasm, out: make([]byte, 0, len(wasm)+len(wasm)/4+256)}
	w.out = append(w.out, header...)
	if err := w.sections(); err != nil {
		return nil, fmt.Errorf("meter: %w", err)
	}
	return w.out, nil
}

// sections copies or rewrites each section, adding the type, import, global
// and export sections the module lacks where they belong.
func (w *rewriter) sections() error {
	r := reader{b: w.in, off: len(header)}
	rank := 0
	added := map[byte]bool{}
	for r.off < len(r.b) {
		start := r.off
		id := r.byte()
		size := r.u32()
		if r.err != nil {
			return fmt.Errorf("section header at byte %#x: %w", start, r.err)
		}
		if uint64(size) > uint64(len(r.b)-r.off) {
			return fmt.Errorf("section %d at byte %#x: size %d runs past the end of the module", id, start, size)
		}
		content := r.b[r.off : r.off+int(size)]
		r.off += int(size)
		if id != secCustom {
			if int(id) >= len(sectionRank) || sectionRank[id] == 0 {
				return fmt.Errorf("section id %d at byte %#x: %w", id, start, ErrUnsupported)
			}
			if sectionRank[id] <= rank {
				return fmt.Errorf("section %d at byte %#x is out of order", id, start)
			}
			rank = sectionRank[id]
			if err := w.addMissing(rank, added); err != nil {
				return err
			}
		}
		var err error
		switch id {
		case secCustom:
			err = w.custom(content)
		case secType:
			err = w.types(content)
		case secImport:
			err = w.imports(content)
		case secFunction:
			err = w.functions(content)
		case secGlobal:
			err = w.globals(content)
		case secExport:
			err = w.exports(content)
		case secStart:
			err = w.start(content)
		case secElement:
			err = w.elements(content)
		case secCode:
			err = w.code(content)
		case secData:
			if out, ok := mergeData(w.out, content, w.dataCount); ok {
				w.out = out
			} else if err = w.check(id, content); err == nil {
				w.out = appendSection(w.out, id, content)
			}
		default: // tables, memories and the data count hold no index to move
			w.dataCount = w.dataCount || id == secDataCount
			if err = w.check(id, content); err == nil {
				w.out = appendSection(w.out, id, content)
			}
		}
		if err != nil {
			return fmt.Errorf("section %d at byte %#x: %w", id, start, err)
		}
		added[id] = true
	}
	if err := w.addMissing(len(sectionRank)+1, added); err != nil {
		return err
	}
	if w.definedFuncs > 0 && !added[secCode] {
		return fmt.Errorf("%d functions declared, but no code section", w.definedFuncs)
	}
	return nil
}

// addMissing emits, before a section of the given rank, the sections the
// rewrite needs that the module has not had by then.
func (w *rewriter) addMissing(rank int, added map[byte]bool) error {
	for _, id := range [...]byte{secType, secImport, secGlobal, secExport} {
		if sectionRank[id] < rank && !added[id] {
			added[id] = true
			var err error
			switch id {
			case secType:
				err = w.types([]byte{0})
			case secImport:
				err = w.imports([]byte{0})
			case secGlobal:
				err = w.globals([]byte{0})
			case secExport:
				err = w.exports([]byte{0})
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// types appends the yield import's type, () -> i32, after the module's own.
func (w *rewriter) types(content []byte) error {
	r := reader{b: content}
	n := r.u32()
	after := r.off
	for i := uint32(0); i < n && r.err == nil; i++ {
		if form := r.byte(); form != 0x60 && r.err == nil {
			return fmt.Errorf("type %d has form %#x, not a function type: %w", i, form, ErrUnsupported)
		}
		for range 2 { // params, results
			for k := r.u32(); k > 0 && r.err == nil; k-- {
				r.valType()
			}
		}
	}
	if err := r.done(); err != nil {
		return err
	}
	w.numTypes = n
	return w.section(secType, func(out []byte) []byte {
		out = appendU32(out, n+1)
		out = append(out, content[after:]...)
		return append(out, 0x60, 0x00, 0x01, 0x7f)
	})
}

// imports counts the imported functions and globals, and appends the yield
// import after them.
func (w *rewriter) imports(content []byte) error {
	r := reader{b: content}
	n := r.u32()
	after := r.off
	for i := uint32(0); i < n && r.err == nil; i++ {
		mod, name := r.name(), r.name()
		if mod == ImportModule {
			return fmt.Errorf("the module imports %s.%s, from a module name the host reserves", mod, name)
		}
		switch kind := r.byte(); kind {
		case 0x00: // function
			if t := r.u32(); t >= w.numTypes && r.err == nil {
				return fmt.Errorf("import %s.%s has type %d; the module has %d types", mod, name, t, w.numTypes)
			}
			w.importedFuncs++
		case 0x01: // table
			r.refType()
			r.limits()
		case 0x02: // memory
			r.limits()
		case 0x03: // global
			r.valType()
			r.mutability()
			w.importedGlobal++
		default:
			if r.err == nil {
				return fmt.Errorf("import %d has kind %#x: %w", i, kind, ErrUnsupported)
			}
		}
	}
	if err := r.done(); err != nil {
		return err
	}
	return w.section(secImport, func(out []byte) []byte {
		out = appendU32(out, n+1)
		out = append(out, content[after:]...)
		out = appendName(out, ImportModule)
		out = appendName(out, ImportYield)
		out = append(out, 0x00)
		return appendU32(out, w.numTypes)
	})
}

func (w *rewriter) functions(content []byte) error {
	r := reader{b: content}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		// wazero v1.12 does not check this before it validates the code,
		// and panics.
		if t := r.u32(); t >= w.numTypes && r.err == nil {
			return fmt.Errorf("function %d has type %d; the module has %d types", w.importedFuncs+i, t, w.numTypes)
		}
	}
	if err := r.done(); err != nil {
		return err
	}
	w.definedFuncs = n
	w.out = appendSection(w.out, secFunction, content)
	return nil
}

// globals rewrites the initializers and appends the fuel global.
func (w *rewriter) globals(content []byte) error {
	r := reader{b: content}
	n := r.u32()
	// The initializers may refer to globals before them only.
	w.definedGlobals = n
	return w.sectionErr(secGlobal, func(out []byte) ([]byte, error) {
		out = appendU32(out, n+1)
		for i := uint32(0); i < n; i++ {
			from := r.off
			r.valType()
			r.mutability()
			out = append(out, content[from:r.off]...)
			var err error
			if out, err = w.constExpr(&r, out); err != nil {
				return nil, fmt.Errorf("global %d: %w", i, err)
			}
		}
		if err := r.done(); err != nil {
			return nil, err
		}
		// (global (mut i32) (i32.const 0)): the first check calls yield,
		// which hands out the first budget.
		return append(out, 0x7f, 0x01, 0x41, 0x00, 0x0b), nil
	})
}

// exports moves function indices and exports the fuel global.
func (w *rewriter) exports(content []byte) error {
	r := reader{b: content}
	n := r.u32()
	return w.sectionErr(secExport, func(out []byte) ([]byte, error) {
		out = appendU32(out, n+1)
		for i := uint32(0); i < n; i++ {
			name := r.name()
			if name == ExportFuel {
				return nil, fmt.Errorf("the module exports %q, a name the host reserves", name)
			}
			kind := r.byte()
			idx := r.u32()
			if r.err != nil {
				return nil, r.err
			}
			out = appendName(out, name)
			out = append(out, kind)
			switch kind {
			case 0x00:
				idx = w.funcIndex(idx)
			case 0x01, 0x02, 0x03:
			default:
				return nil, fmt.Errorf("export %q has kind %#x: %w", name, kind, ErrUnsupported)
			}
			out = appendU32(out, idx)
		}
		if err := r.done(); err != nil {
			return nil, err
		}
		out = appendName(out, ExportFuel)
		out = append(out, 0x03)
		return appendU32(out, w.fuelGlobal()), nil
	})
}

func (w *rewriter) start(content []byte) error {
	r := reader{b: content}
	idx := r.u32()
	if err := r.done(); err != nil {
		return err
	}
	return w.section(secStart, func(out []byte) []byte { return appendU32(out, w.funcIndex(idx)) })
}

// elements moves the function indices of element segments, in both their
// index and their expression forms.
func (w *rewriter) elements(content []byte) error {
	r := reader{b: content}
	n := r.u32()
	return w.sectionErr(secElement, func(out []byte) ([]byte, error) {
		out = appendU32(out, n)
		for i := uint32(0); i < n; i++ {
			flags := r.u32()
			if r.err != nil {
				return nil, r.err
			}
			if flags > 7 {
				return nil, fmt.Errorf("element segment %d has flags %d: %w", i, flags, ErrUnsupported)
			}
			out = appendU32(out, flags)
			var err error
			if flags&0x02 != 0 && flags&0x01 == 0 { // an explicit table
				out = appendU32(out, r.u32())
			}
			if flags&0x01 == 0 { // active: an offset
				if out, err = w.constExpr(&r, out); err != nil {
					return nil, fmt.Errorf("element segment %d offset: %w", i, err)
				}
			}
			exprs := flags&0x04 != 0
			if flags&0x03 != 0 { // an element kind or a reference type
				from := r.off
				if exprs {
					r.refType()
				} else if k := r.byte(); k != 0x00 && r.err == nil {
					return nil, fmt.Errorf("element segment %d has element kind %#x: %w", i, k, ErrUnsupported)
				}
				out = append(out, content[from:r.off]...)
			}
			count := r.u32()
			if r.err != nil {
				return nil, r.err
			}
			if uint64(count) > uint64(len(content)-r.off) { // every item takes a byte at least
				return nil, fmt.Errorf("element segment %d claims %d items: %w", i, count, errShort)
			}
			out = appendU32(out, count)
			for k := uint32(0); k < count && r.err == nil; k++ {
				if exprs {
					if out, err = w.constExpr(&r, out); err != nil {
						return nil, fmt.Errorf("element segment %d item %d: %w", i, k, err)
					}
				} else {
					out = appendU32(out, w.funcIndex(r.u32()))
				}
			}
		}
		if r.err != nil {
			return nil, r.err
		}
		return out, r.done()
	})
}

// check reads a section the rewrite copies as it is, so that what follows is
// not read from garbage.
func (w *rewriter) check(id byte, content []byte) error {
	r := reader{b: content}
	if id == secDataCount {
		r.u32()
		return r.done()
	}
	n := r.u32()
	if uint64(n) > uint64(len(content)) { // every entry takes a byte at least
		return fmt.Errorf("%d entries in %d bytes: %w", n, len(content), errShort)
	}
	for i := uint32(0); i < n && r.err == nil; i++ {
		switch id {
		case secTable:
			r.refType()
			r.limits()
		case secMemory:
			r.limits()
		case secData:
			flags := r.u32()
			if flags > 2 && r.err == nil {
				return fmt.Errorf("data segment %d has flags %d: %w", i, flags, ErrUnsupported)
			}
			if flags == 2 {
				r.u32()
			}
			if flags != 1 && r.err == nil {
				if _, err := w.constExpr(&r, nil); err != nil {
					return fmt.Errorf("data segment %d offset: %w", i, err)
				}
			}
			r.bytes(r.u32())
		}
	}
	return r.done()
}

// code rewrites every function body.
func (w *rewriter) code(content []byte) error {
	r := reader{b: content}
	n := r.u32()
	if r.err != nil {
		return r.err
	}
	if n != w.definedFuncs {
		return fmt.Errorf("%d function bodies for %d declared functions", n, w.definedFuncs)
	}
	w.checkSeq = w.checkSequence()
	return w.sectionErr(secCode, func(out []byte) ([]byte, error) {
		out = appendU32(out, n)
		for i := uint32(0); i < n; i++ {
			size := r.u32()
			if r.err == nil && uint64(size) > uint64(len(content)-r.off) {
				r.err = errShort
			}
			if r.err != nil {
				return nil, fmt.Errorf("function body %d: %w", i, r.err)
			}
			body := content[r.off : r.off+int(size)]
			r.off += int(size)
			var err error
			if out, err = w.function(out, body); err != nil {
				return nil, fmt.Errorf("function %d (body %d at byte %#x of the section): %w", w.importedFuncs+i, i, r.off-int(size), err)
			}
		}
		return out, r.done()
	})
}

// funcIndex moves a function index past the yield import.
func (w *rewriter) funcIndex(idx uint32) uint32 {
	if idx >= w.importedFuncs {
		return idx + 1
	}
	return idx
}

func (w *rewriter) fuelGlobal() uint32 { return w.importedGlobal + w.definedGlobals }

// checkSequence returns the check of the package doc, for this module.
func (w *rewriter) checkSequence() []byte {
	g := appendU32(nil, w.fuelGlobal())
	var b []byte
	b = append(append(b, 0x23), g...) // global.get $fuel
	b = append(b, 0x41, 0x01, 0x6b)   // i32.const 1; i32.sub
	b = append(append(b, 0x24), g...) // global.set $fuel
	b = append(append(b, 0x23), g...) // global.get $fuel
	b = append(b, 0x41, 0x00, 0x48)   // i32.const 0; i32.lt_s
	b = append(b, 0x04, 0x40, 0x10)   // if; call $yield
	b = appendU32(b, w.importedFuncs)
	b = append(append(b, 0x24), g...) // global.set $fuel
	return append(b, 0x0b)            // end
}
