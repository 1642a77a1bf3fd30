package memory

import (
	"github.com/kairo-os/kairo/abi"

	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Chunk is a segment as retrieval returns it: [abi.MemoryChunk].
type Chunk = abi.MemoryChunk

// Expanded is a chunk with the run loop around it, what Expand returns:
// [abi.MemoryExpanded].
type Expanded = abi.MemoryExpanded

// DefaultK is how many chunks Retrieve returns when k is 0.
const DefaultK = 5

// MaxK bounds k: memory feeds a prompt, not a report.
const MaxK = 1000

// rrfK is reciprocal rank fusion's constant: a chunk ranked r-th in a list
// scores 1/(rrfK + r) from it. 60 is the value of the paper that
// introduced the method (Cormack, Clarke and Büttcher, SIGIR 2009) and
// works without tuning.
const rrfK = 60

// Retrieve returns the k chunks (DefaultK when k is 0) that best answer
// query, best first.
//
// The ranking is always full text: the query's words and names (stop words
// dropped, stemmed by FTS5's porter tokenizer), ORed, ranked by BM25 over
// the segment's text and, at half the weight, its context — its run loop's
// goal and, for a result, the call it answers. At scale the commonest
// terms only rescore the candidates the rarer ones found (see
// fulltext.go): that keeps a query to milliseconds at 100,000 segments.
//
// With an Embedder, the query's vector also ranks the segments by cosine
// similarity (exactly, or past 20,000 vectors by sign bits then exactly;
// see vector.go), beside the full-text search, and the two rankings are
// fused by reciprocal rank fusion: each chunk scores Σ 1/(60 + rank) over
// the rankings that hold it. RRF needs no calibration between BM25's
// unbounded scores and cosines, and a chunk near the top of both beats one
// at the top of only one. Score is then the fused score; without an
// Embedder it is BM25 (negated bm25(): higher is better). Either way
// scores compare only within one answer.
//
// Any query is safe: its words are quoted before FTS5 sees them, so
// quotes, operators and a 10 KB paste never make a syntax error; a query
// with no word in it finds nothing. A query of only white space is
// ErrEmptyQuery. If the embedder fails or takes longer than
// Config.QueryEmbedTimeout, Retrieve answers by full text alone and
// reports the failure to Config.OnEmbedError (else the log): memory that
// is less good beats no memory.
func (s *Store) Retrieve(ctx context.Context, query string, k int) ([]Chunk, error) {
	release, err := s.use()
	if err != nil {
		return nil, err
	}
	defer release()
	if strings.TrimSpace(query) == "" {
		return nil, ErrEmptyQuery
	}
	switch {
	case k == 0:
		k = DefaultK
	case k < 0 || k > MaxK:
		return nil, fmt.Errorf("memory: retrieve: k is %d; ask for 1 to %d chunks (0 for %d)", k, MaxK, DefaultK)
	}
	ranked, err := s.rank(ctx, query, max(4*k, 50))
	if err != nil {
		return nil, err
	}
	if len(ranked) > k {
		ranked = ranked[:k]
	}
	return s.chunks(ctx, ranked)
}

// rank ranks the segments for query, best first, depth candidates from
// each ranking (full text, and vectors with an Embedder).
func (s *Store) rank(ctx context.Context, query string, depth int) ([]hit, error) {
	// The vector ranking (an HTTP round trip, then a scan) runs beside the
	// full-text one; rank waits for it whatever happens.
	var near []hit
	done := make(chan struct{})
	go func() {
		defer close(done)
		near = s.nearest(ctx, query, depth)
	}()
	text, err := s.fullText(ctx, query, depth)
	<-done
	if err != nil {
		return nil, err
	}
	if near != nil {
		return fuse(text, near), nil
	}
	return text, nil
}

// nearest ranks segments by the cosine of their vector and the query's,
// best first; nil without an Embedder, without vectors, or when embedding
// the query failed (reported).
func (s *Store) nearest(ctx context.Context, query string, n int) []hit {
	if s.vec == nil {
		return nil
	}
	s.vmu.RLock()
	empty := s.vec.len() == 0
	s.vmu.RUnlock()
	if empty {
		return nil
	}
	ectx, cancel := context.WithTimeout(ctx, s.opts.QueryEmbedTimeout)
	defer cancel()
	vecs, err := s.embed(ectx, []string{clip(query, DefaultMaxTextBytes)})
	if err != nil {
		if ctx.Err() == nil { // the caller's own cancel is no embedder failure
			s.embedFailed(fmt.Errorf("memory: retrieve %q by full text only: embedding the query: %w", clip(query, 80), err))
		}
		return nil
	}
	s.vmu.RLock()
	defer s.vmu.RUnlock()
	return s.vec.search(vecs[0], n)
}

func (s *Store) embedFailed(err error) {
	if s.opts.OnEmbedError != nil {
		s.opts.OnEmbedError(err)
		return
	}
	s.log.Warn("memory: embedder failed", "err", err)
}

// fuse merges rankings by reciprocal rank fusion, best first.
func fuse(rankings ...[]hit) []hit {
	score := map[int64]float64{}
	var order []int64
	for _, r := range rankings {
		for i, h := range r {
			if _, ok := score[h.id]; !ok {
				order = append(order, h.id)
			}
			score[h.id] += 1 / float64(rrfK+i+1)
		}
	}
	out := make([]hit, len(order))
	for i, id := range order {
		out[i] = hit{id: id, score: score[id]}
	}
	sortByScore(out) // ties keep the order of the first ranking that holds them
	return out
}

// sortByScore sorts hits best first, stably.
func sortByScore(hits []hit) {
	slices.SortStableFunc(hits, func(a, b hit) int { return cmp.Compare(b.score, a.score) })
}

// chunks loads the segments of hits, in the hits' order. A segment gone
// since it was ranked (its run loop indexed again meanwhile) is left out.
func (s *Store) chunks(ctx context.Context, hits []hit) ([]Chunk, error) {
	if len(hits) == 0 {
		return []Chunk{}, nil
	}
	args := make([]any, len(hits))
	for i, h := range hits {
		args[i] = h.id
	}
	q := `SELECT ` + chunkColumns + ` FROM segments WHERE id IN (?` +
		strings.Repeat(",?", len(hits)-1) + `)`
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("memory: retrieve: read segments: %w", err)
	}
	defer rows.Close()
	byID := make(map[int64]Chunk, len(hits))
	for rows.Next() {
		id, c, err := scanChunk(rows)
		if err != nil {
			return nil, fmt.Errorf("memory: retrieve: read segments: %w", err)
		}
		byID[id] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory: retrieve: read segments: %w", err)
	}
	out := make([]Chunk, 0, len(hits))
	for _, h := range hits {
		if c, ok := byID[h.id]; ok {
			c.Score = h.score
			out = append(out, c)
		}
	}
	return out, nil
}

// chunkColumns are the columns scanChunk reads.
const chunkColumns = `id, loop_id, iteration, segment, type, time, text, origin, source, quotes`

func scanChunk(rows *sql.Rows) (int64, Chunk, error) {
	var id, at int64
	var c Chunk
	var typ, origin string
	err := rows.Scan(&id, &c.Anchor.RunLoopID, &c.Anchor.IterationIndex, &c.Anchor.SegmentIndex, &typ, &at, &c.Text,
		&origin, &c.Source, &c.Quotes)
	c.Anchor.SegmentType = SegmentType(typ)
	c.Anchor.Timestamp = time.Unix(0, at)
	c.Origin = Origin(origin)
	return id, c, err
}

// Expand returns the chunk at anchor with up to window chunks of its run
// loop before it and window after it, in run loop order (iteration, then
// segment). The anchor is found by run loop, iteration and segment index;
// its type, when set, must match, else the anchor is stale (the run loop
// was indexed again differently) and Expand says so. An anchor that points
// at nothing is an error wrapping ErrNotFound that says what is there.
func (s *Store) Expand(ctx context.Context, anchor Anchor, window int) (Expanded, error) {
	release, err := s.use()
	if err != nil {
		return Expanded{}, err
	}
	defer release()
	if window < 0 {
		return Expanded{}, fmt.Errorf("memory: expand %s: window is %d; give how many chunks to return on each side, 0 or more", anchor, window)
	}
	if anchor.RunLoopID == "" {
		return Expanded{}, fmt.Errorf("%w: the anchor names no run loop; pass an anchor from Retrieve", ErrNotFound)
	}
	// A read transaction: the loop and its segments from one snapshot,
	// even while Index replaces them.
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Expanded{}, fmt.Errorf("memory: expand %s: %w", anchor, err)
	}
	defer tx.Rollback()
	var goal string
	switch err := tx.QueryRowContext(ctx, `SELECT goal FROM loops WHERE id = ?`, anchor.RunLoopID).Scan(&goal); {
	case errors.Is(err, sql.ErrNoRows):
		return Expanded{}, fmt.Errorf("%w: run loop %q is not in memory (it never ended, or was never indexed)", ErrNotFound, anchor.RunLoopID)
	case err != nil:
		return Expanded{}, fmt.Errorf("memory: expand %s: %w", anchor, err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+chunkColumns+` FROM segments
		WHERE loop_id = ? ORDER BY iteration, segment`, anchor.RunLoopID)
	if err != nil {
		return Expanded{}, fmt.Errorf("memory: expand %s: %w", anchor, err)
	}
	defer rows.Close()
	var all []Chunk
	focus := -1
	for rows.Next() {
		_, c, err := scanChunk(rows)
		if err != nil {
			return Expanded{}, fmt.Errorf("memory: expand %s: %w", anchor, err)
		}
		if c.Anchor.IterationIndex == anchor.IterationIndex && c.Anchor.SegmentIndex == anchor.SegmentIndex {
			focus = len(all)
		}
		all = append(all, c)
	}
	if err := rows.Err(); err != nil {
		return Expanded{}, fmt.Errorf("memory: expand %s: %w", anchor, err)
	}
	if focus < 0 {
		last := 0
		if len(all) > 0 {
			last = all[len(all)-1].Anchor.IterationIndex
		}
		return Expanded{}, fmt.Errorf("%w: run loop %q has no segment %d in iteration %d (it has %d segments in iterations 0 to %d)",
			ErrNotFound, anchor.RunLoopID, anchor.SegmentIndex, anchor.IterationIndex, len(all), last)
	}
	if got := all[focus].Anchor.SegmentType; anchor.SegmentType != "" && anchor.SegmentType != got {
		return Expanded{}, fmt.Errorf("%w: anchor %s is stale: the segment there is a %s now (the run loop was indexed again); retrieve again",
			ErrNotFound, anchor, got)
	}
	return Expanded{
		RunLoopID: anchor.RunLoopID,
		Goal:      goal,
		Focus:     all[focus],
		Before:    all[max(0, focus-window):focus],
		After:     all[focus+1 : min(len(all), focus+1+window)],
		Segments:  len(all),
	}, nil
}
