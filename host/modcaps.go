package host

import (
	"bytes"
)

// Caps on a module, checked on its bytes before wazero compiles it: the
// compiler's time and memory grow with the module, so a module that could
// only be hostile (a 1 GiB file, a million functions, thousands of custom
// sections) is refused before it costs them. Real plugins sit far below:
// a Go plugin built with the SDK is a few MiB, some thousands of
// functions and a handful of custom sections.
const (
	// MaxModuleBytes caps a module file.
	MaxModuleBytes = 64 << 20
	// MaxModuleFunctions caps the functions a module defines.
	MaxModuleFunctions = 100_000
	// MaxCustomSections caps a module's custom sections, and
	// MaxCustomSectionBytes their bytes together.
	MaxCustomSections     = 64
	MaxCustomSectionBytes = 16 << 20
)

// checkModuleCaps refuses a module over one of the caps, with an error that
// names it. It reads only section headers and two counts; a module that is
// malformed past them is left for the compiler to refuse.
func checkModuleCaps(wasm []byte) error {
	if len(wasm) > MaxModuleBytes {
		return &CapError{What: "the module", Got: int64(len(wasm)), Max: MaxModuleBytes, Unit: "bytes", Cap: "host.MaxModuleBytes"}
	}
	if !bytes.HasPrefix(wasm, wasmHeader) {
		return nil
	}
	var customs, customBytes int
	rest := wasm[len(wasmHeader):]
	for len(rest) > 0 {
		id := rest[0]
		size, n, err := readULEB32(rest[1:])
		if err != nil || uint64(size) > uint64(len(rest)-1-n) {
			return nil
		}
		body := rest[1+n : 1+n+int(size)]
		rest = rest[1+n+int(size):]
		switch id {
		case 0:
			customs++
			customBytes += len(body)
			if customs > MaxCustomSections {
				return &CapError{What: "the module's custom sections", Got: int64(customs), Max: MaxCustomSections, Unit: "sections", Cap: "host.MaxCustomSections"}
			}
			if customBytes > MaxCustomSectionBytes {
				return &CapError{What: "the module's custom sections", Got: int64(customBytes), Max: MaxCustomSectionBytes, Unit: "bytes", Cap: "host.MaxCustomSectionBytes"}
			}
		case 3, 10: // the function section and the code section: their counts
			count, _, err := readULEB32(body)
			if err == nil && count > MaxModuleFunctions {
				return &CapError{What: "the module's functions", Got: int64(count), Max: MaxModuleFunctions, Unit: "functions", Cap: "host.MaxModuleFunctions"}
			}
		}
	}
	return nil
}

// moduleStats are what checkModuleCaps counts, for tests and tools.
func moduleStats(wasm []byte) (functions, customs, customBytes int) {
	rest := wasm[min(len(wasm), len(wasmHeader)):]
	for len(rest) > 0 {
		id := rest[0]
		size, n, err := readULEB32(rest[1:])
		if err != nil || uint64(size) > uint64(len(rest)-1-n) {
			return
		}
		body := rest[1+n : 1+n+int(size)]
		rest = rest[1+n+int(size):]
		switch id {
		case 0:
			customs++
			customBytes += len(body)
		case 3:
			c, _, _ := readULEB32(body)
			functions = int(c)
		}
	}
	return
}
