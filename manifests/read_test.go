package manifests

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// The three loaders, each with a good file of its kind, so that every
// hostile path is paired with a control that loads.
var loaders = []struct {
	name  string
	file  string // the base name the loader expects
	good  string
	limit Size
	load  func(path string) error
}{
	{"skill", "skill.toml", transcode, MaxManifestSize, func(p string) error { _, err := LoadSkill(p); return err }},
	{"plugin", "p.toml", "[plugin]\nname = \"p\"\nkinds = [\"tool\"]\n", MaxManifestSize, func(p string) error { _, err := LoadPlugin(p); return err }},
	{"config", "kairo.toml", "[log]\nlevel = \"debug\"\n", MaxConfigSize, func(p string) error { _, err := Load(p); return err }},
}

// loadWithin runs load and fails the test if it does not return within
// half a minute (a loaded machine): a loader that blocks (on a FIFO) is a
// failure, not a hang.
func loadWithin(t *testing.T, load func(string) error, path string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- load(path) }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("loading %s did not return within 30s", path)
		return nil
	}
}

func TestLoadRefusesWhatIsNotARegularFile(t *testing.T) {
	for _, l := range loaders {
		t.Run(l.name, func(t *testing.T) {
			dir := t.TempDir()
			good := filepath.Join(dir, l.file)
			if err := os.WriteFile(good, []byte(l.good), 0o600); err != nil {
				t.Fatal(err)
			}
			fifo := filepath.Join(t.TempDir(), l.file)
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			folder := filepath.Join(t.TempDir(), l.file)
			if err := os.Mkdir(folder, 0o700); err != nil {
				t.Fatal(err)
			}
			// Links are followed: a linked manifest loads; a link to a
			// device is refused as the device is.
			linkDir := t.TempDir()
			goodLink, zeroLink := filepath.Join(linkDir, l.file), filepath.Join(t.TempDir(), l.file)
			if err := os.Symlink(good, goodLink); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/dev/zero", zeroLink); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name, path string
				want       string // "" for a control that loads
			}{
				{"regular file", good, ""},
				{"link to a regular file", goodLink, ""},
				{"/dev/zero", "/dev/zero", "is a character device, not a regular file"},
				{"link to /dev/zero", zeroLink, "is a character device, not a regular file"},
				{"FIFO", fifo, "is a FIFO (named pipe), not a regular file"},
				{"folder", folder, "is a folder, not a regular file"},
			} {
				t.Run(c.name, func(t *testing.T) {
					start := time.Now()
					err := loadWithin(t, l.load, c.path)
					if c.want == "" {
						if err != nil {
							t.Fatalf("load %s: %v", c.path, err)
						}
						return
					}
					if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), c.path+": "+c.want) {
						t.Fatalf("load %s = %v; want ErrNotRegular saying %q", c.path, err, c.want)
					}
					if d := time.Since(start); d > time.Second {
						t.Errorf("refusing took %v", d)
					}
				})
			}
		})
	}
}

func TestLoadRefusesLargeFiles(t *testing.T) {
	for _, l := range loaders {
		t.Run(l.name, func(t *testing.T) {
			dir := t.TempDir()
			// A control at the cap exactly: the good file padded with a
			// comment.
			atCap := filepath.Join(dir, l.file)
			pad := int(l.limit) - len(l.good) - 2
			if err := os.WriteFile(atCap, []byte(l.good+"#"+strings.Repeat("x", pad)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := l.load(atCap); err != nil {
				t.Fatalf("a %d-byte file at the cap: %v", l.limit, err)
			}
			big := filepath.Join(t.TempDir(), l.file)
			if err := os.WriteFile(big, []byte(l.good+strings.Repeat("#"+strings.Repeat("x", 1023)+"\n", 10<<10)), 0o600); err != nil {
				t.Fatal(err)
			}
			err := l.load(big)
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), big+": is 10") || !strings.Contains(err.Error(), " bytes; Kairo reads at most "+l.limit.String()) {
				t.Fatalf("load of a 10MiB file = %v; want ErrTooLarge", err)
			}
			// One byte over.
			over := filepath.Join(t.TempDir(), l.file)
			if err := os.WriteFile(over, []byte(l.good+"#"+strings.Repeat("x", pad+1)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := l.load(over); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("load of a file one byte over the cap = %v; want ErrTooLarge", err)
			}
		})
	}
}

// An embedded manifest section is bounded as a file is.
func TestParsePluginBounds(t *testing.T) {
	good := "[plugin]\nname = \"p\"\nkinds = [\"tool\"]\n[config]\nlist = [[1, 2], [3]]\n"
	if _, err := ParsePlugin("p.wasm (section kairo.manifest)", []byte(good)); err != nil {
		t.Fatalf("control: %v", err)
	}
	big := good + strings.Repeat("#"+strings.Repeat("x", 1023)+"\n", 8<<10)
	if _, err := ParsePlugin("p.wasm (section kairo.manifest)", []byte(big)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("an 8MiB section = %v; want ErrTooLarge", err)
	}
	deep := good + "x = " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "\n"
	if _, err := ParsePlugin("p.toml", []byte(deep)); !errors.Is(err, ErrTooDeep) {
		t.Errorf("100000 nested arrays = %v; want ErrTooDeep", err)
	}
}

func TestLoadRefusesDeepNesting(t *testing.T) {
	n := MaxDepth + 1
	for _, c := range []struct {
		name, text string
		line       int
	}{
		{"arrays", "x = " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000), 3},
		{"arrays over lines", "x = [\n" + strings.Repeat("[\n", n) + strings.Repeat("]\n", n+1), 2 + MaxDepth},
		{"inline tables", "x = " + strings.Repeat("{a = ", n) + "1" + strings.Repeat("}", n), 3},
		{"dotted key", strings.Repeat("a.", n) + "b = 1", 3},
		{"table header", "[" + strings.Repeat("a.", n) + "b]", 3},
		{"array of tables", "[[" + strings.Repeat("a.", MaxDepth-2) + "b]]\nc = 1", 4},
		{"arrays in a table", "[a.b.c]\nx = " + strings.Repeat("[", MaxDepth-3) + strings.Repeat("]", MaxDepth-3), 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeSkill(t, "# a skill\n\n"+c.text+"\n")
			_, err := LoadSkill(path)
			var e *Error
			if !errors.Is(err, ErrTooDeep) || !errors.As(err, &e) || e.Line != c.line {
				t.Fatalf("LoadSkill = %v; want ErrTooDeep at line %d", err, c.line)
			}
			if !strings.Contains(err.Error(), "nest more than 32 deep here") {
				t.Errorf("error %q does not say what is wrong", err)
			}
		})
	}
}

// Nesting up to MaxDepth is read, with strings and comments that hold
// brackets the scan must not count.
func TestDepthLimitIsExact(t *testing.T) {
	arrays := func(n int) string { return "x = " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n" }
	for _, c := range []struct {
		name, text string
		deep       bool
	}{
		{"arrays at the limit", arrays(MaxDepth - 1), false},
		{"arrays over the limit", arrays(MaxDepth), true},
		{"brackets in strings", "a = \"[[[[\"\nb = '{{{{'\nc = \"\"\"\n[[[[\n\"\"\"\nd = '''[[[['''\n" + arrays(MaxDepth-1), false},
		{"brackets in a comment", "# [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n" + arrays(MaxDepth-1), false},
		{"escaped quotes", `a = "\"[[[[" ` + "\n" + arrays(MaxDepth-1), false},
		{"closers in strings do not hide openers", "a = [\"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\", " + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth+1) + "\n", true},
		{"closers in comments do not hide openers", "a = [ # ]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n" + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth+1) + "\n", true},
		{"table header with quoted dots", "[\"a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.a.b.c.d.e.f.g\"]\nx = 1\n", false},
		{"inline tables and arrays mixed", "x = [{a = [{b = 1}, {c = [1, 2]}]}, {d = {}}]\n", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			at, deep := depthExceeded([]byte(c.text))
			if deep != c.deep {
				t.Fatalf("depthExceeded = %d, %v; want %v", at, deep, c.deep)
			}
			if !c.deep {
				var v map[string]any
				if _, err := toml.Decode(c.text, &v); err != nil {
					t.Fatalf("the control is not TOML: %v", err)
				}
			}
		})
	}
}

// shadow reads like /etc/shadow: a root-only file a caller may name as a
// manifest to have the daemon read it.
const shadow = "root:$6$Qm5kZXZ0$hY3gTq8VvJ0pQ1wTq9sK2.:19700:0:99999:7:::\ndaemon:*:19700:0:99999:7:::\n"

// A file that is not TOML is reported by path, line and column, in words,
// with nothing of its content: not the text at fault, not a key it holds.
func TestSyntaxErrorsQuoteNothing(t *testing.T) {
	for _, c := range []struct {
		name, text string
		line, col  int
		secret     []string // what the error must not contain
	}{
		{"shadow", shadow, 1, 5, []string{"root", "$6$", "Qm5k", "hY3g", "19700", "daemon"}},
		{"bare word for a value", "password = SECRET\n", 1, 12, []string{"SECRET", "password"}},
		{"junk after a value", "a = 1 SECRET\n", 1, 0, []string{"SECRET"}},
		{"table header", "[a SECRET]\n", 1, 4, []string{"SECRET"}},
		{"array of tables header", "[[a SECRET]]\n", 1, 5, []string{"SECRET"}},
		{"array", "a = [1 SECRET]\n", 1, 0, []string{"SECRET"}},
		{"inline table", "a = {b = 1 SECRET}\n", 1, 0, []string{"SECRET"}},
		{"duplicate key", "token = \"SECRET\"\ntoken = \"SECRET\"\n", 2, 0, []string{"SECRET", "token"}},
		{"table over a key", "SECRET = 1\n[SECRET]\n", 2, 0, []string{"SECRET"}},
		{"big integer", "a = 123456789012345678901234567890\n", 1, 0, []string{"1234567890"}},
		{"bad float", "a = 1.5eSECRET\n", 1, 0, []string{"SECRET"}},
		{"bad hex", "a = 0x1SECRET\n", 1, 0, []string{"SECRET"}},
		{"bad date", "a = 1979-05-27T99:SECRET\n", 1, 0, []string{"SECRET"}},
		{"bad escape", "a = \"\\qSECRET\"\n", 1, 0, []string{"SECRET", `\q`}},
		{"control character", "a = \"SE\x01CRET\"\n", 1, 0, []string{"SE", "0x01"}},
		{"not UTF-8", "a = \"caf\xe9 SECRET\"\n", 1, 9, []string{"caf", "SECRET"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "skill.toml")
			if err := os.WriteFile(path, []byte(c.text), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, l := range loaders {
				err := l.load(path)
				var e *Error
				if !errors.As(err, &e) || e.Line != c.line || c.col > 0 && e.Col != c.col {
					t.Fatalf("%s: %v; want an *Error at line %d, column %d", l.name, err, c.line, c.col)
				}
				for _, s := range c.secret {
					if strings.Contains(err.Error(), s) {
						t.Errorf("%s: error %q quotes %q", l.name, err, s)
					}
				}
			}
		})
	}
}

// The control: in a file that parses, errors still name the key, and a
// syntax error still names a key of the schema.
func TestSyntaxErrorsKeepSchemaKeys(t *testing.T) {
	_, err := ParseSkill("skill.toml", []byte(skillHead+"[net]\nudp = tru\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "skill.toml:8:7: net.udp: TOML syntax: expected a value") {
		t.Errorf("syntax error = %v", err)
	}
	_, err = ParseSkill("skill.toml", []byte(skillHead+"[limits]\nmemroy = \"1GiB\"\n"))
	if err == nil || !strings.Contains(err.Error(), "skill.toml:8: limits.memroy: unknown key; check its spelling or remove it ([limits] takes cpu_seconds") {
		t.Errorf("unknown key = %v", err)
	}
	_, err = ParseSkill("skill.toml", []byte("[skill]\nname = \"héllo 世界\"\n"))
	if err == nil || !strings.Contains(err.Error(), `"héllo 世界" is not a skill name`) {
		t.Errorf("UTF-8 name = %v", err)
	}
}

// FuzzParseSkill feeds ParseSkill any bytes: it must return, not panic
// nor overflow the stack, and whatever passes the depth scan must decode
// no deeper than MaxDepth.
func FuzzParseSkill(f *testing.F) {
	f.Add([]byte(transcode))
	f.Add([]byte(shadow))
	f.Add([]byte("x = [[1, [2]], {a = [{b = {}}]}]\n[a.b]\n[[c.d]]\ne.f = '''[[['''\n"))
	f.Add([]byte("x = " + strings.Repeat("[", 40) + strings.Repeat("]", 40)))
	f.Fuzz(func(t *testing.T, text []byte) {
		s, err := ParseSkill("skill.toml", text)
		if err == nil && s == nil {
			t.Fatal("ParseSkill returned neither a skill nor an error")
		}
		if len(text) > int(MaxManifestSize) || checkShape("skill.toml", text) != nil {
			return
		}
		var raw map[string]any
		if _, err := toml.Decode(string(text), &raw); err != nil {
			return
		}
		if d := nesting(raw, 0); d > MaxDepth {
			t.Fatalf("the depth scan let through a value nested %d deep", d)
		}
	})
}

// nesting is how deep the most deeply nested value in v lies, v at level.
func nesting(v any, level int) int {
	most := level
	visit := func(child any) { most = max(most, nesting(child, level+1)) }
	switch v := v.(type) {
	case map[string]any:
		for _, c := range v {
			visit(c)
		}
	case []map[string]any:
		for _, c := range v {
			visit(c)
		}
	case []any:
		for _, c := range v {
			visit(c)
		}
	}
	return most
}

// A file of thousands of small mistakes costs the loader little: it
// reports the first maxErrors and counts the rest. (Before the cap, 17,000
// unused params took a minute of CPU to place on their lines.)
func TestManyProblemsAreCapped(t *testing.T) {
	head := "[skill]\nname = \"t\"\ncommand = [\"/bin/true\"]\n[fs]\nexec = [\"/bin/true\"]\n"
	var b strings.Builder
	b.WriteString(head)
	n := 0
	for ; b.Len() < int(MaxManifestSize)-40; n++ {
		b.WriteString("[params.p" + strconv.Itoa(n) + "]\n")
	}
	start := time.Now()
	_, err := ParseSkill("skill.toml", []byte(b.String()))
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("ParseSkill took %v", d)
	}
	if err == nil || strings.Count(err.Error(), "is not used in skill.command") != maxErrors ||
		!strings.Contains(err.Error(), "skill.toml: and "+strconv.Itoa(n-maxErrors)+" more problems; fix those above first") {
		t.Errorf("ParseSkill of %d unused params: %.500s", n, err)
	}
	// The control: a few problems are all reported, with no note.
	_, err = ParseSkill("skill.toml", []byte(head+"[params.a]\n[params.b]\n[params.c]\n"))
	if err == nil || strings.Count(err.Error(), "is not used in skill.command") != 3 || strings.Contains(err.Error(), "more problems") {
		t.Errorf("ParseSkill of 3 unused params: %v", err)
	}
}
