package secrets

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"
)

// streamed is what a Stream sends for the chunks, Flush included.
func streamed(m *Masker, chunks ...[]byte) []byte {
	s := m.Stream()
	var out []byte
	for _, c := range chunks {
		out = append(out, s.Write(c)...)
	}
	return append(out, s.Flush()...)
}

// streamTexts hold values in several forms, apart, adjacent, at the ends,
// and a value's prefix that never completes.
func streamTexts() (*Masker, []string) {
	m := NewMasker()
	m.Add("deploy", []byte("tok-deploy-123"))
	m.Add("db", []byte("pg-pass-0987"))
	texts := []string{
		"tok-deploy-123",
		"a tok-deploy-123 b",
		"x: " + base64.StdEncoding.EncodeToString([]byte("tok-deploy-123")) + "\n",
		"tok-deploy-123pg-pass-0987",
		hex.EncodeToString([]byte("pg-pass-0987")) + " and tok-deploy-12 (not all of it)",
		"tok-deploy-1tok-deploy-123",
		"ends in a prefix: tok-depl",
		"nothing here at all",
	}
	return m, texts
}

// A value split across two writes, at every offset, is masked as if it
// came whole.
func TestStreamSplitEveryOffset(t *testing.T) {
	m, texts := streamTexts()
	for _, text := range texts {
		want := m.Mask([]byte(text))
		for cut := 0; cut <= len(text); cut++ {
			got := streamed(m, []byte(text[:cut]), []byte(text[cut:]))
			if !bytes.Equal(got, want) {
				t.Errorf("%q cut at %d: streamed %q; want %q", text, cut, got, want)
			}
		}
	}
}

// Random chunkings, down to a byte a write, give what Mask gives.
func TestStreamRandomChunks(t *testing.T) {
	m, texts := streamTexts()
	rng := rand.New(rand.NewPCG(5, 6))
	all := strings.Join(texts, "|")
	want := m.Mask([]byte(all))
	for range 500 {
		var chunks [][]byte
		for rest := all; rest != ""; {
			n := min(len(rest), 1+rng.IntN(20))
			chunks = append(chunks, []byte(rest[:n]))
			rest = rest[n:]
		}
		if got := streamed(m, chunks...); !bytes.Equal(got, want) {
			t.Fatalf("chunks %q: streamed %q; want %q", chunks, got, want)
		}
	}
}

// Overlapping values split anywhere leave no byte of either; the marks
// may be repeated where the split fell.
func TestStreamOverlapping(t *testing.T) {
	m := newMasker(t, "a", "abcdefgh", "b", "efghijkl")
	text := "<abcdefghijkl>"
	for cut := 0; cut <= len(text); cut++ {
		got := string(streamed(m, []byte(text[:cut]), []byte(text[cut:])))
		if !strings.HasPrefix(got, "<***") || !strings.HasSuffix(got, "***>") || strings.ContainsAny(strings.ReplaceAll(strings.ReplaceAll(got, "***a***", ""), "***b***", ""), "cdefghij") {
			t.Errorf("cut at %d: streamed %q", cut, got)
		}
	}
}

// What cannot begin a value is sent at once: a prompt is not held back.
func TestStreamHoldsOnlyWhatCouldMatch(t *testing.T) {
	m := newMasker(t, "deploy", "tok-deploy-123")
	s := m.Stream()
	p := []byte("Password: ")
	if got := s.Write(p); !bytes.Equal(got, p) || &got[0] != &p[0] {
		t.Errorf("Write(%q) = %q; want p itself, sent at once", p, got)
	}
	if got := s.Write([]byte("here tok-dep")); string(got) != "here " {
		t.Errorf("Write = %q; want the part before the value's prefix", got)
	}
	if got := s.Write([]byte("loy-123 and on")); string(got) != "***deploy*** and on" {
		t.Errorf("Write = %q; want the value masked once complete", got)
	}
	if got := s.Write([]byte("tok-de")); len(got) != 0 {
		t.Errorf("Write = %q; want the prefix held", got)
	}
	if got := s.Flush(); string(got) != "tok-de" {
		t.Errorf("Flush = %q; want the held prefix, which never became a value", got)
	}
	if got := s.Flush(); got != nil {
		t.Errorf("a second Flush = %q; want nil", got)
	}
	// The held bytes never exceed the longest form less one.
	s = m.Stream()
	long := []byte(strings.Repeat("tok-deploy-12", 100))
	out := s.Write(long)
	if held := len(long) - len(out); held >= len(hex.EncodeToString([]byte("tok-deploy-123"))) {
		t.Errorf("the Stream holds %d bytes", held)
	}
}

// A value added while a stream runs is masked from the next write.
func TestStreamValueAddedMeanwhile(t *testing.T) {
	m := NewMasker()
	s := m.Stream()
	if got := s.Write([]byte("before ")); string(got) != "before " {
		t.Errorf("Write = %q", got)
	}
	m.Add("late", []byte("late-value"))
	got := append(s.Write([]byte("a late-value")), s.Flush()...)
	if string(got) != "a ***late***" {
		t.Errorf("streamed %q", got)
	}
}

// FuzzStream: text split at two points is streamed without any form of a
// value, and, where no two values overlap, as Mask gives it whole.
func FuzzStream(f *testing.F) {
	m, texts := streamTexts()
	for i, text := range texts {
		f.Add([]byte(text), uint16(i), uint16(3*i))
	}
	var forms [][]byte
	for _, v := range []string{"tok-deploy-123", "pg-pass-0987"} {
		forms = append(forms, []byte(v), []byte(hex.EncodeToString([]byte(v))), []byte(base64.RawStdEncoding.EncodeToString([]byte(v))))
	}
	f.Fuzz(func(t *testing.T, text []byte, a, b uint16) {
		i, j := int(a)%(len(text)+1), int(b)%(len(text)+1)
		i, j = min(i, j), max(i, j)
		got := streamed(m, text[:i], text[i:j], text[j:])
		for _, form := range forms {
			if bytes.Contains(got, form) {
				t.Fatalf("%q split at %d and %d: streamed %q holds %q", text, i, j, got, form)
			}
		}
		if want := m.Mask(text); !bytes.Equal(got, want) && !overlaps(m, text) {
			t.Fatalf("%q split at %d and %d: streamed %q; want %q", text, i, j, got, want)
		}
	})
}

// overlaps reports whether two matches in text overlap, where a stream
// may mark a region twice.
func overlaps(m *Masker, text []byte) bool {
	for _, r := range m.index().regions(text) {
		if len(r.names) > 1 || len(strings.Join(r.names, "")) > 0 && !isOneMatch(m, text[r.start:r.end]) {
			return true
		}
	}
	return false
}

// isOneMatch reports whether b is one form of a value, whole.
func isOneMatch(m *Masker, b []byte) bool {
	for _, p := range m.index().pats {
		if bytes.Equal(p.b, b) {
			return true
		}
	}
	return false
}
