package proc

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"golang.org/x/sys/unix"
)

// splicer is a SpliceSink that takes "spliced" output by reading exactly
// the n bytes it is given from the pipe, and counts which way each chunk
// came.
type splicer struct {
	collect
	cannot  bool // CanSplice says no
	fail    bool // SpliceChunk fails once it has taken the bytes
	spliced atomic.Int64
	copied  atomic.Int64
}

func (k *splicer) CanSplice() bool { return !k.cannot }

func (k *splicer) Chunks(cs []abi.StreamChunk) error {
	k.copied.Add(int64(len(cs)))
	return k.collect.Chunks(cs)
}

func (k *splicer) SpliceChunk(c *abi.StreamChunk, from syscall.RawConn, n int) error {
	k.spliced.Add(1)
	if len(c.Chunk) != 0 || n <= 0 {
		return errors.New("splice of a chunk that carries bytes, or of none")
	}
	b := make([]byte, n)
	got := 0
	var err error
	cerr := from.Control(func(fd uintptr) {
		for got < n && err == nil {
			var m int
			// The pipe holds n bytes: a read that would wait breaks
			// the contract and fails with EAGAIN.
			m, err = unix.Read(int(fd), b[got:])
			if m == 0 && err == nil {
				err = io.ErrUnexpectedEOF
			}
			got += max(m, 0)
		}
	})
	if err = errors.Join(cerr, err); err != nil {
		return err
	}
	if k.fail {
		return errors.New("sink broke")
	}
	c.Chunk = b
	return k.collect.Chunks([]abi.StreamChunk{*c})
}

// stream is what k received of one stream, checked: seq goes up by one
// from the first chunk, every chunk is labelled binary and no longer than
// maxChunk.
func (k *splicer) stream(t *testing.T, name string, maxChunk int) []byte {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	var b []byte
	var last uint64
	for _, ch := range k.chunks {
		if ch.Stream != name {
			continue
		}
		if last != 0 && ch.Seq != last+1 {
			t.Fatalf("%s: chunk seq %d after %d", name, ch.Seq, last)
		}
		if ch.Encoding != "binary" || len(ch.Chunk) > maxChunk || len(ch.Chunk) == 0 {
			t.Fatalf("%s: chunk %d is %q with %d bytes", name, ch.Seq, ch.Encoding, len(ch.Chunk))
		}
		last = ch.Seq
		b = append(b, ch.Chunk...)
	}
	return b
}

func (k *splicer) waitBytes(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(k.text("stdout")) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("sink has %d bytes of stdout, want %d", len(k.text("stdout")), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// randomFile writes size pseudo-random bytes (the same for a seed) to a
// file and returns its path and the bytes.
func randomFile(t testing.TB, size int, seed uint64) (string, []byte) {
	t.Helper()
	data := make([]byte, size)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	r.Read(data)
	path := filepath.Join(t.TempDir(), "data-"+strconv.FormatUint(seed, 10))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// A lone sink that can splice gets every chunk spliced, whole and in order.
func TestSpliceLoneSink(t *testing.T) {
	e := newEnv(t, Config{})
	path, data := randomFile(t, 16<<20, 1)
	out := &splicer{}
	s := e.spawn(Spec{Argv: []string{"cat", path}, Encoding: EncodingBinary, MaxChunkBytes: 256 << 10}, out)
	if info := wait(t, s); info.ExitCode == nil || *info.ExitCode != 0 {
		t.Fatalf("cat: %+v", info)
	}
	if got := out.stream(t, "stdout", 256<<10); !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes, want the %d the file holds (equal: %v)", len(got), len(data), bytes.Equal(got, data))
	}
	if out.spliced.Load() == 0 || out.copied.Load() != 0 {
		t.Fatalf("%d chunks spliced, %d copied: want all spliced", out.spliced.Load(), out.copied.Load())
	}
}

// Output is spliced only when nothing needs to see or count it, and only
// to a lone sink that can take it.
func TestSpliceOnlyWhenNothingLooks(t *testing.T) {
	e := newEnv(t, Config{})
	const size = 256 << 10
	argv := []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}
	binary := func(f func(*Spec)) Spec {
		s := Spec{Argv: argv, Encoding: EncodingBinary}
		if f != nil {
			f(&s)
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		spec   Spec
		sinks  []*splicer
		splice bool
	}{
		{"binary, lone sink", binary(nil), []*splicer{{}}, true},
		{"auto encoding", Spec{Argv: argv}, []*splicer{{}}, false},
		{"line mode", binary(func(s *Spec) { s.Mode = ModeLine }), []*splicer{{}}, false},
		{"rate limit", binary(func(s *Spec) { s.MaxBytesPerSecond = 1 << 40 }), []*splicer{{}}, false},
		{"output limit", binary(func(s *Spec) { s.OutputLimit = 1 << 40 }), []*splicer{{}}, false},
		{"progress rule", binary(func(s *Spec) { s.Progress = []*regexp.Regexp{regexp.MustCompile(`(?P<x>x)`)} }), []*splicer{{}}, false},
		{"sink that cannot splice", binary(nil), []*splicer{{cannot: true}}, false},
		{"two sinks", binary(nil), []*splicer{{}, {}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sinks := make([]Sink, len(tc.sinks))
			for i, k := range tc.sinks {
				sinks[i] = k
			}
			wait(t, e.spawn(tc.spec, sinks...))
			for i, k := range tc.sinks {
				if n := len(k.text("stdout")); n != size {
					t.Fatalf("sink %d got %d of %d bytes", i, n, size)
				}
				if spliced := k.spliced.Load() > 0; spliced != tc.splice {
					t.Fatalf("sink %d: %d chunks spliced, %d copied; want spliced: %v", i, k.spliced.Load(), k.copied.Load(), tc.splice)
				}
			}
		})
	}
	// A PTY's output never is.
	out := &splicer{}
	wait(t, e.spawn(Spec{Argv: []string{"echo", "hi"}, PTY: true, Encoding: EncodingBinary}, out))
	if out.spliced.Load() != 0 || out.copied.Load() == 0 {
		t.Fatalf("pty: %d chunks spliced, %d copied", out.spliced.Load(), out.copied.Load())
	}
}

// A second sink that comes midway turns splicing off while it is there and
// back on once it goes; both sinks see consistent streams: seq up by one,
// no byte lost or doubled.
func TestSpliceSinkComesAndGoes(t *testing.T) {
	e := newEnv(t, Config{})
	const phase = 1 << 20
	_, data := randomFile(t, 3*phase, 2)
	first, second := &splicer{}, &splicer{}
	s := e.spawn(Spec{Argv: []string{"cat"}, Encoding: EncodingBinary, MaxChunkBytes: 64 << 10}, first)

	if err := s.WriteStdin(data[:phase]); err != nil {
		t.Fatal(err)
	}
	first.waitBytes(t, phase)
	if first.spliced.Load() == 0 || first.copied.Load() != 0 {
		t.Fatalf("alone: %d chunks spliced, %d copied", first.spliced.Load(), first.copied.Load())
	}
	spliced := first.spliced.Load()

	s.Attach(second)
	if err := s.WriteStdin(data[phase : 2*phase]); err != nil {
		t.Fatal(err)
	}
	first.waitBytes(t, 2*phase)
	second.waitBytes(t, phase)
	if first.spliced.Load() != spliced || first.copied.Load() == 0 || second.spliced.Load() != 0 {
		t.Fatalf("with two sinks: first %d spliced (%d before), %d copied; second %d spliced",
			first.spliced.Load(), spliced, first.copied.Load(), second.spliced.Load())
	}
	spliced = first.spliced.Load()

	s.Detach(second)
	if err := s.WriteStdin(data[2*phase:]); err != nil {
		t.Fatal(err)
	}
	s.CloseStdin()
	wait(t, s)
	if got := first.stream(t, "stdout", 64<<10); !bytes.Equal(got, data) {
		t.Fatalf("first sink: %d bytes, want %d (equal: %v)", len(got), len(data), bytes.Equal(got, data))
	}
	if got := second.stream(t, "stdout", 64<<10); !bytes.Equal(got, data[phase:2*phase]) {
		t.Fatalf("second sink: %d bytes, want the %d of its time", len(got), phase)
	}
	if first.spliced.Load() == spliced {
		t.Fatal("alone again, the first sink got no spliced chunk")
	}
}

// A sink whose splice fails is detached; the output is drained all the
// same, so the child finishes.
func TestSpliceFailureDetaches(t *testing.T) {
	e := newEnv(t, Config{})
	out := &splicer{fail: true}
	s := e.spawn(Spec{Argv: []string{"head", "-c", strconv.Itoa(8 << 20), "/dev/zero"}, Encoding: EncodingBinary}, out)
	if info := wait(t, s); info.ExitCode == nil || *info.ExitCode != 0 {
		t.Fatalf("head: %+v", info)
	}
	if n := out.spliced.Load(); n != 1 || out.copied.Load() != 0 {
		t.Fatalf("a failed sink was handed %d splices and %d copies, want 1 and 0", n, out.copied.Load())
	}
}

// A slow sink slows the child on the splice path too.
func TestSpliceSlowSinkSlowsChild(t *testing.T) {
	e := newEnv(t, Config{})
	out := &splicer{collect: collect{slow: 20 * time.Millisecond}}
	const size = 4 << 20
	s := e.spawn(Spec{Argv: []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}, Encoding: EncodingBinary, MaxChunkBytes: 64 << 10}, out)
	time.Sleep(300 * time.Millisecond)
	if st := s.Info().Status; st != abi.ProcessRunning {
		t.Fatalf("the child finished (%s) while its sink was slow", st)
	}
	wait(t, s)
	if got := len(out.stream(t, "stdout", 64<<10)); got != size || out.spliced.Load() == 0 {
		t.Fatalf("got %d of %d bytes in %d splices", got, size, out.spliced.Load())
	}
}
