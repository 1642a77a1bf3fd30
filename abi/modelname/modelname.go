// Package modelname gives each of the agent's tools the name a model is
// offered it under. OpenAI-compatible endpoints take tool names that match
// ^[a-zA-Z0-9_-]{1,64}$; Kairo's are dotted (mcp.SERVER.TOOL) and an MCP
// server may name its tools as it likes, so a name is rewritten, and two
// tools whose rewritten names would be the same are told apart by a short
// hash of their whole names. The LLM policy offers the tools under these
// names and `kairo tools` shows them: both call Assign on the same list of
// names, which depends only on that list, never on its order.
//
// It imports the standard library only: the wasm policy plugin uses it,
// and it sits beside abi on the leaves' floor.
package modelname

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
)

// MaxLen is the longest tool name OpenAI's protocol accepts.
const MaxLen = 64

// Spawn, the kernel's tool that runs a command line, is offered as
// SpawnOffered. Spawn is abi.MethodProcessSpawn, spelled out so this
// package imports nothing of Kairo (a test holds the two equal).
const (
	Spawn        = "process.spawn"
	SpawnOffered = "process_spawn"
)

// hashLen is how many hex digits of the SHA-256 of a full name tell
// colliding names apart: 32 bits, so an accidental clash needs ~65,000
// tools, and a clash made on purpose still only costs a counter.
const hashLen = 8

// Sanitize is name with every byte OpenAI refuses turned into "_", cut to
// MaxLen bytes; "_" for an empty name. It is what Assign offers a name
// under when no other name of the list comes out the same.
func Sanitize(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !valid(c) {
			b[i] = '_'
		}
	}
	if len(b) > MaxLen {
		b = b[:MaxLen]
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}

func valid(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// Valid reports whether a model may be offered a tool under name.
func Valid(name string) bool {
	if len(name) == 0 || len(name) > MaxLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !valid(name[i]) {
			return false
		}
	}
	return true
}

// Assign maps each of names to the name a model is offered it under, each
// different, each Valid. A name keeps its Sanitize form when that fits
// whole (the name was no longer than MaxLen) and no other name of the list
// has the same one; else it becomes the start of that form, "_" and the
// first hashLen hex digits of the SHA-256 of the full name; should that be
// taken too, "_" and a counter follow. The names are handled in sorted
// order, so the result depends on the set alone. Each loop ends: the
// counter makes a new name each round, and the names taken are finite.
//
// One name is fixed: process.spawn is always process_spawn, which the LLM
// policy offers with a schema of its own and its prompt names.
func Assign(names []string) map[string]string {
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	count := map[string]int{}
	for _, n := range sorted {
		count[Sanitize(n)]++
	}
	out := make(map[string]string, len(sorted))
	taken := make(map[string]bool, len(sorted))
	if slices.Contains(sorted, Spawn) {
		out[Spawn], taken[SpawnOffered] = SpawnOffered, true
	}
	// First the names that keep their form: no later clash can take it.
	for _, n := range sorted {
		if s := Sanitize(n); len(n) <= MaxLen && count[s] == 1 && !taken[s] {
			out[n], taken[s] = s, true
		}
	}
	for _, n := range sorted {
		if _, ok := out[n]; ok {
			continue
		}
		sum := sha256.Sum256([]byte(n))
		suffix := "_" + hex.EncodeToString(sum[:])[:hashLen]
		m := cut(Sanitize(n), MaxLen-len(suffix)) + suffix
		for i := 2; taken[m]; i++ {
			s := suffix + "_" + strconv.Itoa(i)
			m = cut(Sanitize(n), MaxLen-len(s)) + s
		}
		out[n], taken[m] = m, true
	}
	return out
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
