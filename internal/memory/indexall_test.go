package memory

import (
	"context"
	"testing"
)

// TestIndexAll is Index of each run loop in one call: the same segments,
// found the same way, term counts right, and idempotent as Index is.
func TestIndexAll(t *testing.T) {
	one, all := openStore(t, t.TempDir(), Config{}), openStore(t, t.TempDir(), Config{})
	indexAll(t, one)
	for range 2 {
		if err := all.IndexAll(context.Background(), testLoops); err != nil {
			t.Fatal(err)
		}
	}
	q := `SELECT count(*) FROM segments`
	if a, b := count(t, one, q), count(t, all, q); a != b || a == 0 {
		t.Fatalf("IndexAll stored %d segments, Index of each %d", b, a)
	}
	checkTermCounts(t, all)
	chunks, err := all.Retrieve(context.Background(), "docker prune reclaimed", 1)
	if err != nil || len(chunks) != 1 || chunks[0].Anchor.RunLoopID != "rl-disk" {
		t.Fatalf("retrieve after IndexAll: %v, %+v", err, chunks)
	}
	in, err := all.Indexed(context.Background())
	if err != nil || len(in) != len(testLoops) {
		t.Fatalf("Indexed after IndexAll: %v, %v", err, in)
	}
}
