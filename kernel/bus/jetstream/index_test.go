package jetstream

import (
	"fmt"
	"slices"
	"testing"
)

// The id index finds every ID added, before and after its entries are
// merged into the sorted arrays, forgets what is undone, and keeps an ID
// whose hash another has in clash.
func TestJetStreamIDIndex(t *testing.T) {
	x := newIDIndex()
	const n = 3*idMergeMin + 7
	var undos []idUndo
	for i := range n {
		id := fmt.Sprintf("id-%d", i)
		u := x.add(id, x.sum(id), uint64(i+1))
		if i%10 == 0 {
			undos = append(undos, u)
		}
	}
	if len(x.sums) == 0 || len(x.recent) == 0 {
		t.Fatalf("after %d adds: %d merged, %d recent; want both", n, len(x.sums), len(x.recent))
	}
	for _, u := range undos {
		x.undo(u)
	}
	for i := range n {
		id := fmt.Sprintf("id-%d", i)
		_, got := x.candidates(id, x.sum(id))
		want := uint64(i + 1)
		if i%10 == 0 {
			want = 0
		}
		if got != want {
			t.Fatalf("%s: seq %d, want %d", id, got, want)
		}
	}
	// An undone entry is taken again by its hash.
	x.add("id-0", x.sum("id-0"), 99)
	if _, got := x.candidates("id-0", x.sum("id-0")); got != 99 {
		t.Fatalf("id-0 added again: seq %d, want 99", got)
	}
	// Another ID with a hash already recorded goes to clash, found exactly.
	u := x.add("other", x.sum("id-5"), 100)
	if exact, bySum := x.candidates("other", x.sum("id-5")); exact != 100 || bySum != 6 {
		t.Fatalf("an ID of a recorded hash: candidates %d %d, want 100 and 6", exact, bySum)
	}
	x.undo(u)
	if exact, _ := x.candidates("other", x.sum("id-5")); exact != 0 {
		t.Fatalf("an undone clash entry is still found: %d", exact)
	}
}

// search finds what slices.BinarySearch finds, wherever the hashes fall.
func TestJetStreamIDIndexSearch(t *testing.T) {
	for _, sums := range [][]uint64{
		nil, {5}, {0, 1, 2, 3}, {1 << 63, 1<<63 + 1, ^uint64(0)},
		func() []uint64 { // even, with a crowd near the start
			var s []uint64
			for i := range uint64(5000) {
				s = append(s, i*(^uint64(0)/5000))
			}
			for i := range uint64(3000) {
				s = append(s, i+1)
			}
			slices.Sort(s)
			return slices.Compact(s)
		}(),
	} {
		x := idIndex{sums: sums}
		probe := []uint64{0, 1, 2, 4, 5, 6, 1 << 62, 1 << 63, ^uint64(0), ^uint64(0) - 1}
		probe = append(probe, sums...)
		for _, s := range sums {
			probe = append(probe, s+1, s-1)
		}
		for _, h := range probe {
			gi, gok := x.search(h)
			wi, wok := slices.BinarySearch(sums, h)
			if gi != wi || gok != wok {
				t.Fatalf("search(%d) in %d sums = %d %v, want %d %v", h, len(sums), gi, gok, wi, wok)
			}
		}
	}
}
