package memory

import (
	"context"
	"database/sql"
	"strings"
	"sync"
)

// The full-text index keeps, beside FTS5's own tables, how many segments
// hold each term — the stem FTS5's porter tokenizer gives a word — in the
// table terms. FTS5 itself knows it only by walking the
// term's whole posting list, which is the cost pruneTerms is there to
// avoid; counted here at Index, it costs a lookup of the table's primary
// key per query term at Retrieve, and nothing in the heap.

// termCounts are the totals BM25 needs, in memory: rows (segments) and
// the tokens they hold. How many segments hold each term stays in the
// terms table, read per query (termCosts): the vocabulary of a long
// history does not live in the heap.
type termCounts struct {
	mu           sync.RWMutex
	rows, tokens int
}

// countDelta is what an Index changes in the counts.
type countDelta struct {
	docs         map[string]int
	rows, tokens int
}

// add applies the totals of an Index (its terms are in the table).
func (t *termCounts) add(delta countDelta) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rows += delta.rows
	t.tokens += delta.tokens
}

// termCosts is how many segments hold each of terms, from the terms
// table: one query for them all, by its primary key.
func (s *Store) termCosts(ctx context.Context, terms []string) ([]termCost, error) {
	out := make([]termCost, len(terms))
	args := make([]any, len(terms))
	at := make(map[string][]int, len(terms))
	for i, term := range terms {
		stem := porter(term)
		out[i].term, args[i] = term, stem
		at[stem] = append(at[stem], i)
	}
	if len(terms) == 0 {
		return out, nil
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT term, docs FROM terms WHERE term IN (?`+strings.Repeat(`, ?`, len(terms)-1)+`)`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var stem string
		var n int
		if err := rows.Scan(&stem, &n); err != nil {
			return nil, err
		}
		for _, i := range at[stem] {
			out[i].docs = n
		}
	}
	return out, rows.Err()
}

// ftsColumns are the two columns of a segment's full-text row: its text,
// and its context — the run loop's goal and what the segment answers —
// each followed by its names. (count and addCommon read them through
// eachToken, which sees the same tokens without building the strings.)
func ftsColumns(text, context, goal string) (string, string) {
	return withNames(text), withNames(joinNonEmpty(goal, context))
}

// count adds sign (+1 or -1) times a segment's full-text row to the
// counts: each of its terms once, its tokens, itself.
func (d *countDelta) count(sign int, text, context, goal string) {
	if d.docs == nil {
		d.docs = map[string]int{}
	}
	seen := map[string]bool{}
	count := func(t string, _ bool) {
		d.tokens += sign
		if st := porter(t); !seen[st] {
			seen[st] = true
			d.docs[st] += sign
		}
	}
	eachToken(text, count)
	eachToken(joinNonEmpty(goal, context), count)
	d.rows += sign
}

// writeTermCounts applies delta to the terms table and the totals in
// meta, in the transaction of the Index that caused it.
func writeTermCounts(ctx context.Context, tx *sql.Tx, delta countDelta) error {
	for key, d := range map[string]int{"fts_rows": delta.rows, "fts_tokens": delta.tokens} {
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES (?, ?)
			ON CONFLICT(key) DO UPDATE SET value = value + excluded.value`, key, d); err != nil {
			return err
		}
	}
	up, err := tx.PrepareContext(ctx, `INSERT INTO terms(term, docs) VALUES (?, ?)
		ON CONFLICT(term) DO UPDATE SET docs = docs + excluded.docs`)
	if err != nil {
		return err
	}
	defer up.Close()
	del, err := tx.PrepareContext(ctx, `DELETE FROM terms WHERE term = ? AND docs <= 0`)
	if err != nil {
		return err
	}
	defer del.Close()
	for term, d := range delta.docs {
		if d == 0 {
			continue
		}
		if _, err := up.ExecContext(ctx, term, d); err != nil {
			return err
		}
		if d < 0 {
			if _, err := del.ExecContext(ctx, term); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadTerms reads the totals into memory. A store whose terms table is
// empty while it holds segments has them counted afresh: the table is
// derived data.
func (s *Store) loadTerms() error {
	s.terms = &termCounts{}
	for key, v := range map[string]*int{"fts_rows": &s.terms.rows, "fts_tokens": &s.terms.tokens} {
		if err := s.wdb.QueryRow(`SELECT coalesce((SELECT value FROM meta WHERE key = ?), 0)`, key).Scan(v); err != nil {
			return err
		}
	}
	var counted bool
	if err := s.wdb.QueryRow(`SELECT EXISTS (SELECT 1 FROM terms)`).Scan(&counted); err != nil || counted {
		return err
	}
	return s.recountTerms()
}

// recountTerms counts the terms of every stored segment.
func (s *Store) recountTerms() error {
	tx, err := s.wdb.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	rows, err := tx.Query(`SELECT s.text, s.context, l.goal FROM segments s JOIN loops l ON l.id = s.loop_id`)
	if err != nil {
		return err
	}
	var d countDelta
	for rows.Next() {
		var text, context, goal string
		if err := rows.Scan(&text, &context, &goal); err != nil {
			rows.Close()
			return err
		}
		d.count(+1, text, context, goal)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if d.rows == 0 {
		return nil
	}
	// The totals are counted afresh too.
	if _, err := tx.Exec(`DELETE FROM meta WHERE key IN ('fts_rows', 'fts_tokens')`); err != nil {
		return err
	}
	s.terms.rows, s.terms.tokens = 0, 0
	if err := writeTermCounts(context.Background(), tx, d); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.terms.add(d)
	return nil
}
