package secrets

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func newMasker(t testing.TB, pairs ...string) *Masker {
	t.Helper()
	m := NewMasker()
	for i := 0; i < len(pairs); i += 2 {
		if _, err := m.Add(pairs[i], []byte(pairs[i+1])); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// Every form of a value is masked, alone and inside text.
func TestMaskForms(t *testing.T) {
	const v = "s3cr3t+/tok?>" // + and / differ in the two base64 alphabets; > in JSON
	m := newMasker(t, "deploy", v)
	b := []byte(v)
	for _, c := range []struct{ form, text string }{
		{"raw", v},
		{"hex", hex.EncodeToString(b)},
		{"HEX", strings.ToUpper(hex.EncodeToString(b))},
		{"base64 std", base64.StdEncoding.EncodeToString(b)},
		{"base64 std unpadded", base64.RawStdEncoding.EncodeToString(b)},
		{"base64 url", base64.URLEncoding.EncodeToString(b)},
		{"base64 url unpadded", base64.RawURLEncoding.EncodeToString(b)},
		{"json", jsonString(v, true)},
		{"json without html escapes", jsonString(v, false)},
	} {
		for _, around := range [][2]string{{"", ""}, {"token=", "\n"}, {"«", "»"}} {
			text := around[0] + c.text + around[1]
			want := around[0] + "***deploy***" + around[1]
			if got := m.MaskString(text); got != want {
				t.Errorf("%s: MaskString(%q) = %q; want %q", c.form, text, got, want)
			}
		}
	}
}

func jsonString(v string, html bool) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(html)
	e.Encode(v)
	s := strings.TrimSpace(b.String())
	return s[1 : len(s)-1]
}

// A value inside a longer base64 string, at any offset (a password in
// "Authorization: Basic base64(user:password)"), leaves nothing of itself:
// at most the two characters at each end that hold bits of its neighbours.
func TestMaskBase64Inside(t *testing.T) {
	const v = "hunter2-password"
	m := newMasker(t, "pw", v)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for _, prefix := range []string{"", "a", "ab", "alice:", "bob:"} {
			for _, suffix := range []string{"", "x", "@host", ":tail!"} {
				text := enc.EncodeToString([]byte(prefix + v + suffix))
				got := m.MaskString("Basic " + text)
				if !strings.Contains(got, "***pw***") {
					t.Errorf("base64 of %q: %q is not masked", prefix+v+suffix, got)
				}
				// What is left on either side encodes the neighbours, and
				// at most two characters of the value's bits.
				left, right, _ := strings.Cut(strings.TrimPrefix(got, "Basic "), "***pw***")
				if n := len(enc.EncodeToString([]byte(prefix))); len(left) > n+1 {
					t.Errorf("base64 of %q: %q keeps %d characters before the mark", prefix+v+suffix, got, len(left))
				}
				if n := len(enc.EncodeToString([]byte(suffix))); len(right) > n+4 { // 2 of the value's, and padding
					t.Errorf("base64 of %q: %q keeps %d characters after the mark", prefix+v+suffix, got, len(right))
				}
			}
		}
	}
}

func TestMaskNothingToMask(t *testing.T) {
	m := newMasker(t, "deploy", "tok-123456")
	b := []byte("a line that holds nothing secret, tok-12345 included\n")
	if got := m.Mask(b); &got[0] != &b[0] {
		t.Error("Mask copied a slice that holds no secret")
	}
	if n := testing.AllocsPerRun(100, func() { m.Mask(b) }); n != 0 {
		t.Errorf("Mask of a slice without a secret allocates %v times", n)
	}
	s := string(b)
	if n := testing.AllocsPerRun(100, func() { m.MaskString(s) }); n != 0 {
		t.Errorf("MaskString of a string without a secret allocates %v times", n)
	}
	empty := NewMasker()
	if !empty.Empty() || m.Empty() {
		t.Errorf("Empty = %v for a new Masker, %v for one with a secret", empty.Empty(), m.Empty())
	}
	if got := empty.Mask(b); &got[0] != &b[0] {
		t.Error("an empty Masker copied")
	}
	for _, in := range []string{"", "t", "tok", "tok-1"} {
		if got := m.MaskString(in); got != in {
			t.Errorf("MaskString(%q) = %q", in, got)
		}
	}
}

func TestMaskOverlappingAndAdjacent(t *testing.T) {
	m := newMasker(t, "a", "abcdefgh", "b", "efghijkl", "c", "mnopqrst", "long", "abcdefgh-and-more")
	for _, c := range []struct{ in, want string }{
		// Overlapping: the bytes of both go, marked by both.
		{"<abcdefghijkl>", "<***a******b***>"},
		// Adjacent: each is marked.
		{"<abcdefghmnopqrst>", "<***a******c***>"},
		// One contains the other: the longer one's mark.
		{"<abcdefgh-and-more>", "<***long***>"},
		{"abcdefgh abcdefgh", "***a*** ***a***"},
		{"efghijklefghijkl", "***b******b***"},
	} {
		got := m.MaskString(c.in)
		if got != c.want {
			t.Errorf("MaskString(%q) = %q; want %q", c.in, got, c.want)
		}
		for _, v := range []string{"abcdefgh", "efghijkl", "mnopqrst"} {
			if strings.Contains(got, v) {
				t.Errorf("MaskString(%q) = %q leaves %q", c.in, got, v)
			}
		}
	}
	// A value that overlaps itself: one mark for the run.
	m = newMasker(t, "ab", "abababab")
	if got := m.MaskString("<ababababab>"); got != "<***ab***>" {
		t.Errorf("MaskString = %q; want <***ab***>", got)
	}
}

// A rotated secret's old value stays masked beside the new one; adding a
// value twice changes nothing.
func TestMaskRotated(t *testing.T) {
	m := newMasker(t, "deploy", "old-token-1", "deploy", "new-token-2", "deploy", "old-token-1")
	if got := m.MaskString("old-token-1 new-token-2"); got != "***deploy*** ***deploy***" {
		t.Errorf("MaskString = %q; want both values masked", got)
	}
}

// Past MaxMasked values the oldest that a newer value replaced go first,
// then the oldest of all; Add says how many went.
func TestMaskerBound(t *testing.T) {
	m := NewMasker()
	m.Add("keep", []byte("kept-forever"))
	dropped := 0
	for i := range MaxMasked + 10 {
		n, err := m.Add("rotated", []byte(fmt.Sprintf("value-%06d", i)))
		if err != nil {
			t.Fatal(err)
		}
		dropped += n
	}
	if dropped != 11 {
		t.Errorf("Add reported %d values dropped; want 11", dropped)
	}
	if got := m.MaskString("kept-forever"); got != "***keep***" {
		t.Errorf("the other secret's one value was dropped: %q", got)
	}
	if got := m.MaskString("value-000010 value-000011"); got != "value-000010 ***rotated***" {
		t.Errorf("MaskString = %q; want the 11 oldest values of rotated dropped, the rest kept", got)
	}
	// Past the bytes' bound, too.
	m = NewMasker()
	for i := range MaxMaskedBytes/MaxLen + 1 {
		v := bytes.Repeat([]byte{'a'}, MaxLen)
		copy(v, fmt.Sprint(i))
		n, _ := m.Add("big", v)
		dropped = n
	}
	if dropped != 1 {
		t.Errorf("past MaxMaskedBytes, Add reported %d dropped; want 1", dropped)
	}
}

func TestAddRefuses(t *testing.T) {
	m := NewMasker()
	for _, c := range []struct {
		name, value, want string
	}{
		{"deploy", "12345", "6 to"},
		{"Deploy", "tok-123456", "not a secret name"},
		{"a\x1b[2J", "tok-123456", "not a secret name"},
	} {
		_, err := m.Add(c.name, []byte(c.value))
		wantErr(t, err, "Add", c.want)
	}
	if !m.Empty() {
		t.Error("a refused value is masked")
	}
	if _, err := m.Add("deploy", []byte("123456")); err != nil {
		t.Errorf("Add of MinLen bytes: %v", err)
	}
}

// Mask reads while Add writes (run with -race).
func TestMaskConcurrent(t *testing.T) {
	m := newMasker(t, "first", "first-value")
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				if got := m.MaskString("x first-value y"); got != "x ***first*** y" {
					t.Errorf("goroutine %d: MaskString = %q", g, got)
					return
				}
				if g == 0 {
					m.Add("other", []byte(fmt.Sprintf("other-%06d", i)))
				}
			}
		})
	}
	wg.Wait()
}
