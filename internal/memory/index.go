package memory

import (
	"github.com/kairo-os/kairo/abi"

	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// loopSegments is one run loop to index.
type loopSegments struct {
	id   string
	segs []Segment
}

// Index stores the segments of run loop runLoopID (from Segments), in place
// of whatever was indexed for it before: indexing a run loop again never
// duplicates it. When it returns nil the segments are durable (see
// Config.Synchronous). With an Embedder, the segments are embedded first;
// if that fails they are stored for full-text search all the same and the
// error, which wraps ErrEmbed, says so — index the run loop again later to
// add its vectors.
func (s *Store) Index(ctx context.Context, runLoopID string, segs []Segment) error {
	return s.index(ctx, []loopSegments{{runLoopID, segs}})
}

// IndexAll is Index for several run loops, each id's segments, in one
// transaction: a long log's run loops cost a commit together, not one
// each.
func (s *Store) IndexAll(ctx context.Context, loops map[string][]Segment) error {
	batch := make([]loopSegments, 0, len(loops))
	for _, id := range slices.Sorted(maps.Keys(loops)) {
		batch = append(batch, loopSegments{id, loops[id]})
	}
	return s.index(ctx, batch)
}

// index stores several run loops in one transaction.
func (s *Store) index(ctx context.Context, loops []loopSegments) error {
	release, err := s.use()
	if err != nil {
		return err
	}
	defer release()
	var texts []string
	for i := range loops {
		l := &loops[i]
		if l.segs, err = s.checkSegments(l.id, l.segs); err != nil {
			return err
		}
		goal := goalOf(l.segs)
		for _, sg := range l.segs {
			texts = append(texts, embedText(goal, sg))
		}
	}
	// Embed before taking the writer: the endpoint may take its time.
	var vecs [][]float32
	var embedErr error
	if s.opts.Embedder != nil && len(texts) > 0 {
		if vecs, embedErr = s.embed(ctx, texts); embedErr != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("memory: index: %w", ctx.Err())
			}
			vecs = nil
		}
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	w, err := s.write(ctx, loops, vecs)
	if err != nil {
		return err
	}
	embedErr = errors.Join(embedErr, s.follow(w))
	if embedErr != nil {
		what := "run loop " + loops[0].id
		if len(loops) > 1 {
			what = fmt.Sprintf("%d run loops (%s...)", len(loops), loops[0].id)
		}
		return fmt.Errorf("%w: %s stored for full-text search only; index again to add the vectors: %w", ErrEmbed, what, embedErr)
	}
	return nil
}

// follow brings the in-memory indexes up to a write, held under wmu; the
// error says which vectors could not be added.
func (s *Store) follow(w written) error {
	s.terms.add(w.counts)
	if s.vec == nil {
		return nil
	}
	var errs error
	s.vmu.Lock()
	defer s.vmu.Unlock()
	for _, id := range w.removed {
		s.vec.remove(id)
	}
	for _, a := range w.added {
		if err := s.vec.add(a.id, a.vec); err != nil {
			errs = errors.Join(errs, fmt.Errorf("segment %d: %w", a.id, err))
		}
	}
	return errs
}

// checkSegments validates one run loop's segments and drops reasoning
// unless it is kept.
func (s *Store) checkSegments(id string, segs []Segment) ([]Segment, error) {
	if strings.TrimSpace(id) == "" {
		return nil, errors.New("memory: index: the run loop id is empty; give the id of the run loop the segments were cut from")
	}
	seen := make(map[[2]int]bool, len(segs))
	out := segs[:0:0]
	for i, sg := range segs {
		if sg.RunLoopID != "" && sg.RunLoopID != id {
			return nil, fmt.Errorf("memory: index run loop %s: segment %d belongs to run loop %s; index each run loop's segments on their own", id, i, sg.RunLoopID)
		}
		if sg.IterationIndex < 0 || sg.SegmentIndex < 0 {
			return nil, fmt.Errorf("memory: index run loop %s: segment %d has a negative anchor (%d.%d)", id, i, sg.IterationIndex, sg.SegmentIndex)
		}
		switch sg.SegmentType {
		case abi.MemorySegmentUserMessage, abi.MemorySegmentToolCall, abi.MemorySegmentToolResult, abi.MemorySegmentResponse:
		case abi.MemorySegmentReasoning:
			if !s.opts.KeepReasoning {
				continue
			}
		default:
			return nil, fmt.Errorf("memory: index run loop %s: segment %d has type %q; want user_message, reasoning, tool_call, tool_result or response", id, i, sg.SegmentType)
		}
		key := [2]int{sg.IterationIndex, sg.SegmentIndex}
		if seen[key] {
			return nil, fmt.Errorf("memory: index run loop %s: two segments are anchored at %d.%d; cut the run loop with Segments", id, key[0], key[1])
		}
		seen[key] = true
		sg.RunLoopID = id
		if sg.Origin == "" {
			sg.Provenance = defaultProvenance(sg.SegmentType)
		}
		out = append(out, sg)
	}
	return out, nil
}

// embed returns the texts' vectors, normalized.
func (s *Store) embed(ctx context.Context, texts []string) ([][]float32, error) {
	vecs, err := s.opts.Embedder.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Errorf("embedder %s returned %d vectors for %d texts", s.opts.Embedder.Model(), len(vecs), len(texts))
	}
	for _, v := range vecs {
		normalize(v)
	}
	return vecs, nil
}

type addedVector struct {
	id  int64
	vec []float32
}

// written is what a write changed, for the in-memory indexes to follow.
type written struct {
	removed []int64       // segments deleted
	added   []addedVector // vectors stored
	counts  countDelta
}

// write replaces the rows of the run loops in one transaction: segments,
// full-text rows, vectors, and the term counts (see terms.go).
func (s *Store) write(ctx context.Context, loops []loopSegments, vecs [][]float32) (w written, err error) {
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return w, fmt.Errorf("memory: index: begin: %w", err)
	}
	defer tx.Rollback()
	fail := func(loop, what string, err error) (written, error) {
		return written{}, fmt.Errorf("memory: index run loop %s: %s: %w", loop, what, err)
	}
	prep := func(q string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var st *sql.Stmt
		st, err = tx.PrepareContext(ctx, q)
		return st
	}
	oldGoal := prep(`SELECT goal FROM loops WHERE id = ?`)
	oldSegs := prep(`SELECT id, text, context FROM segments WHERE loop_id = ?`)
	delFTS := prep(`DELETE FROM segments_fts WHERE rowid = ?`)
	delVec := prep(`DELETE FROM vectors WHERE segment_id = ?`)
	delSeg := prep(`DELETE FROM segments WHERE loop_id = ?`)
	insSeg := prep(`INSERT INTO segments(loop_id, iteration, segment, type, time, event_id, text, context, origin, source, quotes) VALUES (?,?,?,?,?,?,?,?,?,?,?)`)
	insFTS := prep(`INSERT INTO segments_fts(rowid, text, context) VALUES (?,?,?)`)
	insVec := prep(`INSERT INTO vectors(segment_id, model, vec) VALUES (?,?,?)`)
	insLoop := prep(`INSERT INTO loops(id, goal, indexed_at) VALUES (?,?,?) ON CONFLICT(id) DO UPDATE SET goal = excluded.goal, indexed_at = excluded.indexed_at`)
	if err != nil {
		return w, fmt.Errorf("memory: index: prepare: %w", err)
	}
	now := time.Now().UnixNano()
	k := 0 // the next text's vector
	for _, l := range loops {
		var goal string
		if err := oldGoal.QueryRowContext(ctx, l.id).Scan(&goal); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fail(l.id, "read its goal", err)
		}
		old, err := readOld(ctx, oldSegs, l.id)
		if err != nil {
			return fail(l.id, "read its segments", err)
		}
		for _, o := range old {
			w.counts.count(-1, o.text, o.context, goal)
			if _, err := delFTS.ExecContext(ctx, o.id); err != nil {
				return fail(l.id, "delete its full-text rows", err)
			}
			if _, err := delVec.ExecContext(ctx, o.id); err != nil {
				return fail(l.id, "delete its vectors", err)
			}
			w.removed = append(w.removed, o.id)
		}
		if _, err := delSeg.ExecContext(ctx, l.id); err != nil {
			return fail(l.id, "delete its segments", err)
		}
		goal = goalOf(l.segs)
		for _, sg := range l.segs {
			res, err := insSeg.ExecContext(ctx, l.id, sg.IterationIndex, sg.SegmentIndex, string(sg.SegmentType), sg.Timestamp.UnixNano(), sg.EventID, sg.Text, sg.Context,
				string(sg.Origin), sg.Source, sg.Quotes)
			if err != nil {
				return fail(l.id, fmt.Sprintf("store segment %d.%d", sg.IterationIndex, sg.SegmentIndex), err)
			}
			id, _ := res.LastInsertId()
			text, context := ftsColumns(sg.Text, sg.Context, goal)
			if _, err := insFTS.ExecContext(ctx, id, text, context); err != nil {
				return fail(l.id, "index its text", err)
			}
			w.counts.count(+1, sg.Text, sg.Context, goal)
			if vecs != nil {
				v := vecs[k]
				if _, err := insVec.ExecContext(ctx, id, s.opts.Embedder.Model(), encodeVector(v)); err != nil {
					return fail(l.id, "store its vectors", err)
				}
				w.added = append(w.added, addedVector{id, v})
			}
			k++
		}
		if _, err := insLoop.ExecContext(ctx, l.id, goal, now); err != nil {
			return fail(l.id, "record it", err)
		}
	}
	if err := writeTermCounts(ctx, tx, w.counts); err != nil {
		return w, fmt.Errorf("memory: index: count terms: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return w, fmt.Errorf("memory: index: commit: %w", err)
	}
	return w, nil
}

// oldSegment is a stored segment about to be replaced.
type oldSegment struct {
	id            int64
	text, context string
}

func readOld(ctx context.Context, st *sql.Stmt, loop string) ([]oldSegment, error) {
	rows, err := st.QueryContext(ctx, loop)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []oldSegment
	for rows.Next() {
		var o oldSegment
		if err := rows.Scan(&o.id, &o.text, &o.context); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// goalOf is a run loop's goal: its first user message. It is indexed beside
// every segment of the run loop, so a question about the task finds the
// segments that did it even where they do not repeat its words.
func goalOf(segs []Segment) string {
	for _, sg := range segs {
		if sg.SegmentType == abi.MemorySegmentUserMessage {
			return sg.Text
		}
	}
	return ""
}

// embedText is what a segment's vector is made of: its text, after what it
// answers.
func embedText(goal string, sg Segment) string {
	if sg.SegmentType == abi.MemorySegmentUserMessage && sg.Text == goal {
		return goal
	}
	return joinNonEmpty(goal, joinNonEmpty(sg.Context, sg.Text))
}

func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n" + b
}
