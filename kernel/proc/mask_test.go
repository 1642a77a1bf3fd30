package proc

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/secrets"
)

// testMasker masks the secret deploy, whose value is s3cr3t-0123456789-abcdef.
func testMasker(t *testing.T) *secrets.Masker {
	t.Helper()
	m := secrets.NewMasker()
	if _, err := m.Add("deploy", []byte("s3cr3t-0123456789-abcdef")); err != nil {
		t.Fatal(err)
	}
	return m
}

// A masked stream is read, never spliced, and goes out with its secret
// masked, one split across two writes too, whole and in order, in chunk
// and in line mode.
func TestMaskedStream(t *testing.T) {
	e := newEnv(t, Config{})
	m := testMasker(t)
	const bulk = 4 << 20
	zeros := "head -c " + strconv.Itoa(bulk) + " /dev/zero"
	script := zeros + "; printf s3cr3t-01234; sleep 0.05; printf 56789-abcdef; " + zeros
	want := strings.Repeat("\x00", bulk) + "***deploy***" + strings.Repeat("\x00", bulk)
	for _, mode := range []string{ModeChunk, ModeLine} {
		t.Run(mode, func(t *testing.T) {
			out := &splicer{}
			spec := Spec{Argv: []string{"sh", "-c", script}, Mode: mode, Encoding: EncodingBinary, MaxChunkBytes: 256 << 10, Mask: m}
			if info := wait(t, e.spawn(spec, out)); info.ExitCode == nil || *info.ExitCode != 0 {
				t.Fatalf("sh: %+v", info)
			}
			got := out.stream(t, "stdout", 256<<10)
			if string(got) != want {
				t.Fatalf("got %d bytes (the value in them: %v), want %d with the value masked", len(got), strings.Contains(string(got), "s3cr3t"), len(want))
			}
			if out.spliced.Load() != 0 {
				t.Fatalf("%d chunks spliced: a masked stream must be read", out.spliced.Load())
			}
		})
	}
}

// counter is a Sink that counts chunks and bytes, and takes them at once.
type counter struct{ chunks, bytes atomic.Int64 }

func (c *counter) Chunks(cs []abi.StreamChunk) error {
	for _, ch := range cs {
		c.chunks.Add(1)
		c.bytes.Add(int64(len(ch.Chunk)))
	}
	return nil
}

// Fast masked output to a fast sink goes out in chunks near MaxChunkBytes,
// as spliced output does, not one for each of the writer's 8 KiB writes:
// the pump lingers for the writer before it reads. The bound is loose
// (4 times the fewest), for a loaded machine that starves the writer.
func TestMaskedStreamChunks(t *testing.T) {
	e := newEnv(t, Config{})
	const size, maxChunk = 16 << 20, 256 << 10
	out := &counter{}
	spec := Spec{Argv: []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}, Encoding: EncodingBinary, MaxChunkBytes: maxChunk, Mask: testMasker(t)}
	wait(t, e.spawn(spec, out))
	if got := out.bytes.Load(); got != size {
		t.Fatalf("got %d of %d bytes", got, size)
	}
	if n := out.chunks.Load(); n > 4*size/maxChunk {
		t.Errorf("%d chunks of %d bytes on average; want at most %d", n, size/n, 4*size/maxChunk)
	}
}
