package secrets

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// benchMasker holds 16 secrets of 32 printable bytes, as tokens are.
func benchMasker(b *testing.B) *Masker {
	b.Helper()
	m := NewMasker()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 16 {
		if _, err := m.Add(string(rune('a'+i))+"-token", printable(rng, 32)); err != nil {
			b.Fatal(err)
		}
	}
	return m
}

// printable is n random bytes from ' ' to '~'.
func printable(rng *rand.Rand, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(' ' + rng.IntN(95))
	}
	return p
}

// BenchmarkMask is the cost of masking what holds no secret, which is
// nearly everything a process prints: MB/s over 1 MiB chunks of zeros and
// of random printable text, and over a typical event's data (300 bytes of
// MsgPack), with 16 secrets of 32 bytes masked in all their forms.
func BenchmarkMask(b *testing.B) {
	m := benchMasker(b)
	rng := rand.New(rand.NewPCG(3, 4))
	event, err := msgpack.Marshal(map[string]any{
		"id": "01J8ZK3V9Q2X5T7W0M4N6P8R1S", "type": "kairo.process.exited", "source": "kernel",
		"time": time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), "correlationId": "01J8ZK3V9Q2X5T7W0M4N6P8R1T",
		"data": map[string]any{"processId": "p12", "exitCode": 0, "argv": []string{"/usr/bin/make", "-C", "/srv/build", "test"},
			"reason": "exited with code 0 after 12.4s", "cwd": "/srv/build/work/01J8ZK3V9Q2X5T7W0M4N6P8R1U"},
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
		mask func([]byte) []byte
	}{
		{"zeros-1MiB", make([]byte, 1<<20), m.Mask},
		{"text-1MiB", printable(rng, 1<<20), m.Mask},
		{"msgpack-event", event, m.MaskMsgpack},
	} {
		b.Run(c.name, func(b *testing.B) {
			start := time.Now()
			for b.Loop() {
				if out := c.mask(c.data); &out[0] != &c.data[0] {
					b.Fatal("masked what holds no secret")
				}
			}
			b.ReportMetric(float64(len(c.data))*float64(b.N)/time.Since(start).Seconds()/1e6, "MB/s")
		})
	}
	// A process's stdout, read 4 KiB at a time: a Stream holds back the
	// end of a chunk that could begin a value.
	b.Run("stream-text-4KiB", func(b *testing.B) {
		text := printable(rng, 1<<20)
		s := m.Stream()
		start := time.Now()
		for b.Loop() {
			for i := 0; i < len(text); i += 4 << 10 {
				s.Write(text[i : i+4<<10])
			}
		}
		s.Flush()
		b.ReportMetric(float64(len(text))*float64(b.N)/time.Since(start).Seconds()/1e6, "MB/s")
	})
}
