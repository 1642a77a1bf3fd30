package memory

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func randomVector(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	normalize(v)
	return v
}

// TestVectorSearch checks both searches against a plain sort of every
// cosine, and the sign pass's recall at the size where search uses it.
func TestVectorSearch(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	const dim = 200 // not a multiple of 64: the last sign word is partial
	v := newVectorIndex()
	n := quantizeFrom + 500
	for i := range n {
		if err := v.add(int64(1000+i), randomVector(r, dim)); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.add(5, make([]float32, dim+1)); err == nil {
		t.Error("a vector of another length was added")
	}
	// Remove some, replace some: the slots must stay consistent.
	for i := 0; i < 300; i++ {
		v.remove(int64(1000 + i*7))
	}
	v.add(1001, randomVector(r, dim))
	if v.len() != n-300 {
		t.Fatalf("%d vectors, want %d", v.len(), n-300)
	}
	found, total := 0, 0
	for range 20 {
		// A query near a stored vector: it must come first.
		target := v.ids[r.IntN(v.len())]
		i := v.slot[target]
		q := slices.Clone(v.vecs[i*dim : (i+1)*dim])
		for j := range q {
			q[j] += float32(r.NormFloat64()) * 0.05
		}
		normalize(q)
		want := make([]hit, v.len())
		for s, id := range v.ids {
			want[s] = hit{id, float64(dot(q, v.vecs[s*dim:(s+1)*dim]))}
		}
		slices.SortFunc(want, func(a, b hit) int {
			if worse(a, b) {
				return 1
			}
			return -1
		})
		exact := v.searchExact(q, 50)
		for j := range exact {
			if exact[j].id != want[j].id {
				t.Fatalf("exact search rank %d: %d, want %d", j, exact[j].id, want[j].id)
			}
		}
		signs := v.search(q, 50)
		if signs[0].id != target {
			t.Errorf("search by signs: %d first, want the vector the query was made from, %d", signs[0].id, target)
		}
		for _, h := range want[:50] {
			total++
			for _, g := range signs {
				if g.id == h.id {
					found++
				}
			}
		}
	}
	recall := float64(found) / float64(total)
	t.Logf("search by signs found %.3f of the exact top 50", recall)
	if recall < 0.8 {
		t.Errorf("search by signs found %.2f of the exact top 50, want at least 0.8", recall)
	}
}

func TestTopK(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 5, 64} {
		top := topK{n: n}
		var all []hit
		for i := range 1000 {
			h := hit{int64(i), float64(r.IntN(200))} // ties, broken by id
			all = append(all, h)
			top.offer(h)
		}
		slices.SortFunc(all, func(a, b hit) int {
			if worse(a, b) {
				return 1
			}
			return -1
		})
		if got := top.sorted(); !slices.Equal(got, all[:n]) {
			t.Errorf("top %d: %v, want %v", n, got, all[:n])
		}
	}
}

func TestVectorEncoding(t *testing.T) {
	v := []float32{0, -1.5, 3.25, 1e-30}
	got, err := decodeVector(nil, encodeVector(v))
	if err != nil || !slices.Equal(got, v) {
		t.Errorf("round trip: %v, %v", got, err)
	}
	if _, err := decodeVector(nil, []byte{1, 2, 3}); err == nil {
		t.Error("3 bytes decoded as a vector")
	}
}
