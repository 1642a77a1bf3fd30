package memory

import (
	"github.com/kairo-os/kairo/abi"

	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// SegmentRef names a segment so that it is found again when its run loop
// is cut anew from the log: [abi.MemorySegmentRef].
type SegmentRef = abi.MemorySegmentRef

// RefOf is the reference of a segment.
func RefOf(sg *Segment) SegmentRef {
	return SegmentRef{RunLoopID: sg.RunLoopID, EventID: sg.EventID, SegmentType: sg.SegmentType,
		IterationIndex: sg.IterationIndex, SegmentIndex: sg.SegmentIndex}
}

// refMatches reports whether r names sg of run loop loop.
func refMatches(r *SegmentRef, loop string, sg *Segment) bool {
	if r.RunLoopID != loop {
		return false
	}
	if r.EventID != "" {
		return r.EventID == sg.EventID && r.SegmentType == sg.SegmentType
	}
	return r.IterationIndex == sg.IterationIndex && r.SegmentIndex == sg.SegmentIndex
}

// Forgetting is what the operator told memory to forget: whole run loops,
// and single segments. It is kept in the event log, so that indexing a run
// loop again — at its end, at a start, in a rebuild — leaves out what was
// forgotten (Keep).
type Forgetting struct {
	Tasks    []string     `json:"tasks,omitempty" msgpack:"tasks,omitempty"`
	Segments []SegmentRef `json:"segments,omitempty" msgpack:"segments,omitempty"`
}

// Add adds what o forgets.
func (f *Forgetting) Add(o Forgetting) {
	f.Tasks = append(f.Tasks, o.Tasks...)
	f.Segments = append(f.Segments, o.Segments...)
}

// Empty reports whether f forgets nothing.
func (f *Forgetting) Empty() bool { return len(f.Tasks)+len(f.Segments) == 0 }

// Forgets reports whether sg, of run loop loop, is forgotten.
func (f *Forgetting) Forgets(loop string, sg *Segment) bool {
	if slices.Contains(f.Tasks, loop) {
		return true
	}
	for i := range f.Segments {
		if refMatches(&f.Segments[i], loop, sg) {
			return true
		}
	}
	return false
}

// Keep returns the segments of run loop loop that f does not forget.
func (f *Forgetting) Keep(loop string, segs []Segment) []Segment {
	if f.Empty() {
		return segs
	}
	out := segs[:0:0]
	for i := range segs {
		if !f.Forgets(loop, &segs[i]) {
			out = append(out, segs[i])
		}
	}
	return out
}

// loops are the run loops f touches.
func (f *Forgetting) loops() []string {
	out := slices.Clone(f.Tasks)
	for _, r := range f.Segments {
		out = append(out, r.RunLoopID)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// segmentColumns are the columns scanSegment reads.
const segmentColumns = `id, loop_id, iteration, segment, type, time, event_id, text, context, origin, source, quotes`

func scanSegment(rows *sql.Rows) (int64, Segment, error) {
	var id, at int64
	var sg Segment
	var typ, origin string
	err := rows.Scan(&id, &sg.RunLoopID, &sg.IterationIndex, &sg.SegmentIndex, &typ, &at, &sg.EventID, &sg.Text, &sg.Context,
		&origin, &sg.Source, &sg.Quotes)
	sg.SegmentType, sg.Timestamp, sg.Origin = SegmentType(typ), time.Unix(0, at), Origin(origin)
	return id, sg, err
}

// Segment returns the segment at anchor, whole: what a forget by anchor
// records. An anchor that points at nothing is an error wrapping
// ErrNotFound.
func (s *Store) Segment(ctx context.Context, anchor Anchor) (Segment, error) {
	release, err := s.use()
	if err != nil {
		return Segment{}, err
	}
	defer release()
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+segmentColumns+` FROM segments WHERE loop_id = ? AND iteration = ? AND segment = ?`,
		anchor.RunLoopID, anchor.IterationIndex, anchor.SegmentIndex)
	if err != nil {
		return Segment{}, fmt.Errorf("memory: segment %s: %w", anchor, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return Segment{}, fmt.Errorf("memory: segment %s: %w", anchor, err)
		}
		return Segment{}, fmt.Errorf("%w: nothing is remembered at %s; `kairo memory search` shows the anchors", ErrNotFound, anchor)
	}
	_, sg, err := scanSegment(rows)
	if err != nil {
		return Segment{}, fmt.Errorf("memory: segment %s: %w", anchor, err)
	}
	if anchor.SegmentType != "" && anchor.SegmentType != sg.SegmentType {
		return Segment{}, fmt.Errorf("%w: anchor %s is stale: the segment there is a %s now; search again", ErrNotFound, anchor, sg.SegmentType)
	}
	return sg, nil
}

// Find returns every segment whose text holds phrase, ignoring case and
// how white space runs: what a forget by query forgets. Unlike Retrieve it
// ranks nothing and misses nothing; it reads every segment.
func (s *Store) Find(ctx context.Context, phrase string) ([]Segment, error) {
	release, err := s.use()
	if err != nil {
		return nil, err
	}
	defer release()
	want := strings.ToLower(strings.Join(strings.Fields(phrase), " "))
	if want == "" {
		return nil, ErrEmptyQuery
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+segmentColumns+` FROM segments ORDER BY loop_id, iteration, segment`)
	if err != nil {
		return nil, fmt.Errorf("memory: find %q: %w", clip(phrase, 80), err)
	}
	defer rows.Close()
	var out []Segment
	for rows.Next() {
		_, sg, err := scanSegment(rows)
		if err != nil {
			return nil, fmt.Errorf("memory: find %q: %w", clip(phrase, 80), err)
		}
		if strings.Contains(strings.ToLower(strings.Join(strings.Fields(sg.Text), " ")), want) {
			out = append(out, sg)
		}
	}
	return out, rows.Err()
}

// Forget removes from the store what f forgets: the segments it names and
// every segment of the run loops it names, their full-text rows, vectors
// and term counts, in one transaction; the run loops stay indexed with
// what remains (a forgotten run loop with nothing). It returns the
// segments it removed. Forgetting what is not there is no error, so a
// Forgetting can be applied again at every start.
func (s *Store) Forget(ctx context.Context, f Forgetting) ([]SegmentRef, error) {
	release, err := s.use()
	if err != nil {
		return nil, err
	}
	defer release()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	var loops []loopSegments
	var removed []SegmentRef
	var vecs [][]float32
	keepVecs := s.opts.Embedder != nil
	for _, id := range f.loops() {
		segs, ids, err := s.loopSegments(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("memory: forget in run loop %s: %w", id, err)
		}
		kept := segs[:0:0]
		var keptIDs []int64
		for i := range segs {
			if f.Forgets(id, &segs[i]) {
				removed = append(removed, RefOf(&segs[i]))
				continue
			}
			kept, keptIDs = append(kept, segs[i]), append(keptIDs, ids[i])
		}
		if len(kept) == len(segs) {
			continue
		}
		loops = append(loops, loopSegments{id, kept})
		if keepVecs {
			v, ok, err := s.storedVectors(ctx, keptIDs)
			if err != nil {
				return nil, fmt.Errorf("memory: forget in run loop %s: read its vectors: %w", id, err)
			}
			keepVecs = ok
			vecs = append(vecs, v...)
		}
	}
	if len(loops) == 0 {
		return nil, nil
	}
	if !keepVecs {
		vecs = nil // what remains is found by full text until indexed again
	}
	w, err := s.write(ctx, loops, vecs)
	if err != nil {
		return nil, fmt.Errorf("memory: forget: %w", err)
	}
	if err := s.follow(w); err != nil {
		s.log.Warn("memory: forget: vectors of what remains skipped", "err", err)
	}
	return removed, nil
}

// loopSegments reads a run loop's segments and their row ids, in order,
// on the writer (under wmu: nothing changes them meanwhile).
func (s *Store) loopSegments(ctx context.Context, loop string) ([]Segment, []int64, error) {
	rows, err := s.wdb.QueryContext(ctx, `SELECT `+segmentColumns+` FROM segments WHERE loop_id = ? ORDER BY iteration, segment`, loop)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var segs []Segment
	var ids []int64
	for rows.Next() {
		id, sg, err := scanSegment(rows)
		if err != nil {
			return nil, nil, err
		}
		segs, ids = append(segs, sg), append(ids, id)
	}
	return segs, ids, rows.Err()
}

// storedVectors reads the vectors of the embedder's model for segments;
// false when one has none.
func (s *Store) storedVectors(ctx context.Context, ids []int64) ([][]float32, bool, error) {
	out := make([][]float32, 0, len(ids))
	for _, id := range ids {
		var blob []byte
		err := s.wdb.QueryRowContext(ctx, `SELECT vec FROM vectors WHERE segment_id = ? AND model = ?`, id, s.opts.Embedder.Model()).Scan(&blob)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		v, err := decodeVector(nil, blob)
		if err != nil {
			return nil, false, err
		}
		out = append(out, v)
	}
	return out, true, nil
}

// Indexed returns the run loops in the store — of ids, when given — each
// with whether some of its segments were indexed before provenance was
// kept (origin unknown): index those again from the log. A start asks for
// the run loops its state keeps, not for every one memory holds.
func (s *Store) Indexed(ctx context.Context, ids ...string) (map[string]bool, error) {
	release, err := s.use()
	if err != nil {
		return nil, err
	}
	defer release()
	const q = `SELECT id, EXISTS (SELECT 1 FROM segments WHERE loop_id = loops.id AND origin = 'unknown') FROM loops`
	out := map[string]bool{}
	read := func(query string, args ...any) error {
		rows, err := s.rdb.QueryContext(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("memory: list run loops: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var legacy bool
			if err := rows.Scan(&id, &legacy); err != nil {
				return fmt.Errorf("memory: list run loops: %w", err)
			}
			out[id] = legacy
		}
		return rows.Err()
	}
	if len(ids) == 0 {
		return out, read(q)
	}
	for chunk := range slices.Chunk(ids, 500) {
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		if err := read(q+` WHERE id IN (?`+strings.Repeat(`, ?`, len(chunk)-1)+`)`, args...); err != nil {
			return nil, err
		}
	}
	return out, nil
}
