package memory

import (
	"context"
	"math"
	"testing"
)

// TestPrunedScoresAreBM25 checks the rescoring of common terms against
// FTS5: a segment found by the rare terms and rescored with the common
// ones in Go must score what FTS5's bm25() gives it over every term.
func TestPrunedScoresAreBM25(t *testing.T) {
	t.Parallel()
	c := newRecallCorpus(t)
	s := c.open(t, t.TempDir(), Config{})
	s.termBudget = 40 // about a thirtieth of the corpus, as 2,000 is of 100,000
	ctx := context.Background()
	checked, pruned := 0, 0
	for _, q := range c.set.Questions[:60] {
		terms := queryTerms(q.Q)
		costs, err := s.termCosts(ctx, terms)
		if err != nil {
			t.Fatal(err)
		}
		if _, dropped := pruneTerms(costs, s.termBudget); len(dropped) > 0 {
			pruned++
		}
		hits, err := s.fullText(ctx, q.Q, 20)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hits {
			var want float64
			err := s.rdb.QueryRow(`SELECT bm25(segments_fts, 1.0, 0.5) FROM segments_fts WHERE segments_fts MATCH ? AND rowid = ?`,
				ftsMatch(terms), h.id).Scan(&want)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(h.score-(-want)) > 1e-9*math.Abs(want)+1e-9 {
				t.Errorf("%q, segment %d: scored %.9f, FTS5 over all terms %.9f", q.Q, h.id, h.score, -want)
			}
			checked++
		}
	}
	if pruned < 20 || checked < 500 {
		t.Fatalf("only %d of 60 questions had terms pruned, %d scores checked: the test checks too little", pruned, checked)
	}
	// And the answers stay good: recall@5 with pruning, over all questions.
	r, _ := c.recall(t, s)
	t.Logf("recall@5 with a budget of %d segments a query: %.3f", s.termBudget, r)
	if r < 0.85 {
		t.Errorf("recall@5 %.3f with pruning, want at least 0.85", r)
	}
}
