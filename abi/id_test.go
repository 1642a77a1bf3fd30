package abi

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"strings"
	"sync"
	"testing"
	"time"
)

// checkV7 fails unless id is a canonical, lower-case UUID of version 7 and
// variant 10, and returns its millisecond timestamp.
func checkV7(t *testing.T, id string) int64 {
	t.Helper()
	if len(id) != 36 {
		t.Fatalf("id %q is %d bytes, want 36", id, len(id))
	}
	for i, c := range []byte(id) {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				t.Fatalf("id %q: byte %d is %q, want '-'", id, i, c)
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				t.Fatalf("id %q: byte %d is %q, want a lower-case hex digit", id, i, c)
			}
		}
	}
	var u [16]byte
	if !ParseUUID(id, &u) {
		t.Fatalf("ParseUUID(%q) failed", id)
	}
	if v := u[6] >> 4; v != 7 {
		t.Fatalf("id %q has version %d, want 7", id, v)
	}
	if v := u[8] >> 6; v != 0b10 {
		t.Fatalf("id %q has variant %02b, want 10", id, v)
	}
	return int64(binary.BigEndian.Uint64(u[0:8]) >> 16)
}

func TestNewIDFormat(t *testing.T) {
	before := time.Now().UnixMilli()
	var ids []string
	for range 1000 {
		ids = append(ids, NewID())
	}
	after := time.Now().UnixMilli()
	for _, id := range ids {
		ms := checkV7(t, id)
		if ms < before || ms > after {
			t.Fatalf("id %q carries time %d ms, want within [%d, %d]", id, ms, before, after)
		}
	}
}

func TestNewIDStrictlyIncreasing(t *testing.T) {
	prev := NewID()
	for i := range 100_000 {
		id := NewID()
		if id <= prev {
			t.Fatalf("call %d: %q does not sort after %q", i, id, prev)
		}
		prev = id
	}
}

func TestNewIDConcurrentUnique(t *testing.T) {
	const goroutines, each = 8, 10_000
	out := make([][]string, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]string, each)
			for i := range ids {
				ids[i] = NewID()
			}
			out[g] = ids
		}()
	}
	wg.Wait()
	uniqueAndSorted(t, out)
}

// TestIDBlockUnique: blocks used by their own goroutines, beside NewID,
// give IDs of the clock reading they were given, each block's strictly
// increasing, none twice; a clock that goes back keeps them increasing.
func TestIDBlockUnique(t *testing.T) {
	const goroutines, each = 6, 20_000
	out := make([][]string, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var k IDBlock
			ids := make([]string, each)
			for i := range ids {
				if g%2 == 0 {
					ids[i] = NewID()
					continue
				}
				now := time.Now()
				if i%1000 == 999 {
					now = now.Add(-time.Second) // the clock stepped back
				}
				ids[i] = k.NewAt(now)
				if i%1000 != 999 {
					if ms := checkV7(t, ids[i]); ms < now.UnixMilli() {
						t.Errorf("id %q carries %d ms, before its clock reading %d", ids[i], ms, now.UnixMilli())
					}
				}
			}
			out[g] = ids
		}()
	}
	wg.Wait()
	uniqueAndSorted(t, out)
}

func TestUUIDRoundTrip(t *testing.T) {
	fixed := [][16]byte{{}, {0: 0xff, 15: 0xff}, {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10}}
	for range 1000 {
		var u [16]byte
		_, _ = rand.Read(u[:])
		fixed = append(fixed, u)
	}
	for _, u := range fixed {
		s := FormatUUID(u)
		if s != strings.ToLower(s) || len(s) != 36 {
			t.Fatalf("FormatUUID(% x) = %q, want 36 lower-case characters", u, s)
		}
		var back [16]byte
		if !ParseUUID(s, &back) {
			t.Fatalf("ParseUUID(%q) rejected FormatUUID's output", s)
		}
		if !bytes.Equal(back[:], u[:]) {
			t.Fatalf("round trip of % x gave % x", u, back)
		}
	}
	if got := FormatUUID([16]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10}); got != "01234567-89ab-cdef-fedc-ba9876543210" {
		t.Errorf("FormatUUID = %q", got)
	}
}

func TestParseCanonicalUUIDRejects(t *testing.T) {
	const good = "0192d6c4-7a2e-7b3c-8d4e-5f6a7b8c9d0e"
	var u [16]byte
	if !ParseUUID(good, &u) {
		t.Fatalf("ParseUUID(%q) = false", good)
	}
	bad := []string{
		"",
		strings.ToUpper(good),
		"0192D6C4-7a2e-7b3c-8d4e-5f6a7b8c9d0e", // one upper-case group
		good[:35],
		good + "0",
		"{" + good + "}",
		"urn:uuid:" + good,
		strings.ReplaceAll(good, "-", ""),
		"0192d6c47a2e-7b3c-8d4e-5f6a7b8c9d0e-",
		"0192d6c4-7a2e-7b3c-8d4e_5f6a7b8c9d0e",
		"0192d6c-47a2e-7b3c-8d4e-5f6a7b8c9d0e",
		"0192d6g4-7a2e-7b3c-8d4e-5f6a7b8c9d0e",
		"0192d6c4-7a2e-7b3c-8d4e-5f6a7b8c9d0 ",
		"0192d6c4-7a2e-7b3c-8d4e-5f6a7b8c9d0\x00",
		"order-42",
	}
	for _, s := range bad {
		if ParseUUID(s, &u) {
			t.Errorf("ParseUUID(%q) = true, want false", s)
		}
	}
}

// uniqueAndSorted fails unless no id of out is there twice and each
// goroutine's ids sort in the order they were made.
func uniqueAndSorted(t *testing.T, out [][]string) {
	t.Helper()
	seen := make(map[string]bool)
	for g, ids := range out {
		for i, id := range ids {
			if seen[id] {
				t.Fatalf("id %q returned twice", id)
			}
			seen[id] = true
			if i > 0 && id <= ids[i-1] {
				t.Fatalf("goroutine %d: %q does not sort after %q", g, id, ids[i-1])
			}
		}
	}
}
