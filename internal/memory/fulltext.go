package memory

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Full-text ranking at scale. FTS5's bm25() costs about a microsecond for
// each segment that holds any of the query's terms (it looks up the
// segment's length in a B-tree), and a word as common as "disk" or "build"
// is held by thousands of segments in a memory of 100,000. So the terms a
// question is searched by are split: the rarest, up to a budget of
// segments (termBudget), go to FTS5, which finds and ranks the candidates
// by BM25; the common ones, which BM25 weighs little anyway, are then
// scored on those candidates only, in Go, with BM25's own formula and the
// index's statistics, and added to FTS5's score. A segment that holds only
// common words of the question is not found — the price of answering in
// milliseconds — while its ranking among the candidates is what BM25 over
// every term would give.

// termCost is a term and how many segments hold it.
type termCost struct {
	term string
	docs int
}

// pruneTerms keeps the rarest terms whose segments add up to budget at
// most — always the rarest one, and the terms no segment holds — and
// drops the others. Both keep the question's order.
func pruneTerms(costs []termCost, budget int) (kept, dropped []termCost) {
	order := make([]int, len(costs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return costs[a].docs - costs[b].docs })
	keep := make([]bool, len(costs))
	spent, first := 0, true
	for _, i := range order {
		switch c := costs[i].docs; {
		case c <= 0:
			keep[i] = true
		case first || spent+c <= budget:
			keep[i], first = true, false
			spent += c
		}
	}
	for i, c := range costs {
		if keep[i] {
			kept = append(kept, c)
		} else {
			dropped = append(dropped, c)
		}
	}
	return kept, dropped
}

// The BM25 parameters and column weights, as the FTS5 query uses them:
// bm25()'s own k1 and b, and the context column (goal, and what the segment
// answers) weighing half of the segment's own text.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

var columnWeights = [2]float64{1.0, 0.5}

// fullText ranks segments by BM25 for the query, best first, at most n.
func (s *Store) fullText(ctx context.Context, query string, n int) ([]hit, error) {
	terms := queryTerms(query)
	if len(terms) == 0 {
		return nil, nil
	}
	fail := func(err error) ([]hit, error) {
		return nil, fmt.Errorf("memory: retrieve: full-text search for %q: %w", clip(query, 80), err)
	}
	costs, err := s.termCosts(ctx, terms)
	if err != nil {
		return fail(err)
	}
	kept, dropped := pruneTerms(costs, s.termBudget)
	names := make([]string, len(kept))
	for i, c := range kept {
		names[i] = c.term
	}
	limit := n
	if len(dropped) > 0 {
		limit = n + n/2 // room for the common terms to reorder
	}
	rows, err := s.query(ctx, fmt.Sprintf(
		`SELECT rowid, bm25(segments_fts, %g, %g) AS r FROM segments_fts WHERE segments_fts MATCH ? ORDER BY r, rowid LIMIT ?`,
		columnWeights[0], columnWeights[1]), ftsMatch(names), limit)
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	var hits []hit
	for rows.Next() {
		var h hit
		if err := rows.Scan(&h.id, &h.score); err != nil {
			return fail(err)
		}
		h.score = -h.score // bm25() is lower for better matches
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	if len(dropped) > 0 && len(hits) > 0 {
		if err := s.addCommon(ctx, hits, dropped); err != nil {
			return fail(err)
		}
		sortByScore(hits)
	}
	return hits[:min(n, len(hits))], nil
}

// addCommon adds to each hit's score the BM25 terms of the common terms
// (dropped by pruneTerms), computed on the segment's full-text row as FTS5
// computes them: IDF from the term counts, the term's frequency weighted
// by column, the row's length against the average.
func (s *Store) addCommon(ctx context.Context, hits []hit, common []termCost) error {
	cands, err := s.candidates(ctx, hits)
	if err != nil {
		return err
	}
	s.terms.mu.RLock()
	total, avgLen := float64(s.terms.rows), float64(s.terms.tokens)/float64(max(s.terms.rows, 1))
	s.terms.mu.RUnlock()
	tc := termCounter{stems: make([]string, len(common))}
	idf := make([]float64, len(common))
	for i, c := range common {
		tc.stems[i] = porter(c.term)
		// FTS5's IDF, floored as FTS5 floors it.
		idf[i] = max(math.Log((total-float64(c.docs)+0.5)/(float64(c.docs)+0.5)), 1e-6)
	}
	// A run loop's goal is in the context of each of its segments:
	// counted once a run loop.
	type goalCount struct {
		freq   []float64
		length int
		names  map[string]bool
	}
	goals := map[string]*goalCount{}
	extra := make(map[int64]float64, len(cands))
	freq := make([]float64, len(common))
	for _, c := range cands {
		g := goals[c.loop]
		if g == nil {
			g = &goalCount{freq: make([]float64, len(common)), names: map[string]bool{}}
			g.length = tc.count(c.goal, columnWeights[1], g.freq, nil, g.names)
			goals[c.loop] = g
		}
		copy(freq, g.freq)
		length := g.length + tc.count(c.text, columnWeights[0], freq, nil, nil) + tc.count(c.context, columnWeights[1], freq, g.names, nil)
		score := 0.0
		for i, f := range freq {
			if f > 0 {
				score += idf[i] * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*float64(length)/avgLen))
			}
		}
		extra[c.id] = score
	}
	for i := range hits {
		hits[i].score += extra[hits[i].id]
	}
	return nil
}

// candidate is a segment to rescore, with what its full-text row holds.
type candidate struct {
	id                        int64
	loop, text, context, goal string
}

// candidates reads the segments of hits and their run loops' goals.
func (s *Store) candidates(ctx context.Context, hits []hit) ([]candidate, error) {
	args := make([]any, len(hits))
	for i, h := range hits {
		args[i] = h.id
	}
	rows, err := s.query(ctx, `SELECT id, loop_id, text, context FROM segments WHERE id IN (?`+strings.Repeat(",?", len(hits)-1)+`)`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []candidate
	loops := map[string]int{} // → index in args
	args = args[:0]
	for rows.Next() {
		var c candidate
		if err := rows.Scan(&c.id, &c.loop, &c.text, &c.context); err != nil {
			return nil, err
		}
		if _, ok := loops[c.loop]; !ok {
			loops[c.loop] = len(args)
			args = append(args, c.loop)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil || len(out) == 0 {
		return out, err
	}
	rows, err = s.query(ctx, `SELECT id, goal FROM loops WHERE id IN (?`+strings.Repeat(",?", len(args)-1)+`)`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	goals := make(map[string]string, len(args))
	for rows.Next() {
		var id, goal string
		if err := rows.Scan(&id, &goal); err != nil {
			return nil, err
		}
		goals[id] = goal
	}
	for i := range out {
		out[i].goal = goals[out[i].loop]
	}
	return out, rows.Err()
}

// termCounter counts, in a column's text, the tokens and the occurrences
// of the terms whose stems it holds.
type termCounter struct{ stems []string }

// count adds weight to freq[i] for each token of text that stems to
// stems[i], and returns how many tokens text has. Names in skip are not
// tokens here (the column holds them once, from the goal); the names text
// holds are added to names when it is not nil.
func (tc termCounter) count(text string, weight float64, freq []float64, skip, names map[string]bool) int {
	n := 0
	eachToken(text, func(w string, name bool) {
		if name {
			if skip[w] {
				return
			}
			if names != nil {
				names[w] = true
			}
		}
		n++
		for i, st := range tc.stems {
			// A stem is a prefix of its word but for its last letter or
			// so (y→i, e added): a cheap test first.
			if w[0] == st[0] && strings.HasPrefix(w, st[:len(st)-min(len(st)-1, 1)]) && porter(w) == st {
				freq[i] += weight
			}
		}
	})
	return n
}
