package wasm

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
	// [MaxCustomSectionBytes] their bytes together.
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
	var over error
	// A module malformed past the section headers is the compiler's to
	// refuse: the walk's own error is not this check's.
	eachSection(wasm, func(id byte, body []byte) bool {
		switch id {
		case 0:
			customs++
			customBytes += len(body)
			if customs > MaxCustomSections {
				over = &CapError{What: "the module's custom sections", Got: int64(customs), Max: MaxCustomSections, Unit: "sections", Cap: "host.MaxCustomSections"}
			} else if customBytes > MaxCustomSectionBytes {
				over = &CapError{What: "the module's custom sections", Got: int64(customBytes), Max: MaxCustomSectionBytes, Unit: "bytes", Cap: "host.MaxCustomSectionBytes"}
			}
		case 3, 10: // the function section and the code section: their counts
			if count, _, err := readULEB32(body); err == nil && count > MaxModuleFunctions {
				over = &CapError{What: "the module's functions", Got: int64(count), Max: MaxModuleFunctions, Unit: "functions", Cap: "host.MaxModuleFunctions"}
			}
		}
		return over == nil
	})
	return over
}

// moduleStats are what checkModuleCaps counts, for tests and tools.
func moduleStats(wasm []byte) (functions, customs, customBytes int) {
	if !bytes.HasPrefix(wasm, wasmHeader) {
		return
	}
	eachSection(wasm, func(id byte, body []byte) bool {
		switch id {
		case 0:
			customs++
			customBytes += len(body)
		case 3:
			c, _, _ := readULEB32(body)
			functions = int(c)
		}
		return true
	})
	return
}
