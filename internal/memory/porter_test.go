package memory

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
)

// TestPorterMatchesFTS5 checks porter against FTS5's porter tokenizer
// itself, word by word, over the words of the recall set and words picked
// for each rule of the algorithm: the store finds term frequencies by the
// stems porter computes, so the two must agree.
func TestPorterMatchesFTS5(t *testing.T) {
	seen := map[string]bool{}
	var list []string
	add := func(text string) {
		for _, w := range words(text) {
			if !seen[w] {
				seen[w] = true
				list = append(list, w)
			}
		}
	}
	add(`caresses ponies ties caress cats feed agreed plastered bled motoring sing conflated troubled
		sized hopping tanned falling hissing fizzed failing filing happy sky relational conditional
		rational valenci hesitanci digitizer conformabli radicalli differentli vileli analogousli
		vietnamization predication operator feudalism decisiveness hopefulness callousness formaliti
		sensitiviti sensibiliti triplicate formative formalize electriciti electrical hopeful goodness
		revival allowance inference airliner gyroscopic adjustable defensible irritant replacement
		adjustment dependent adoption homologou communism activate angulariti homologous effective
		bowdlerize probate rate cease controll roll generalization oscillators rename renaming renamed
		eed need bleed queries query directories running web01 arm64 db03 x y ab abc`)
	set := loadRecallSet(t)
	for _, l := range set.Loops {
		add(l.Goal)
		for _, s := range l.Steps {
			add(s.Text + " " + strings.Join(s.Lines, " "))
		}
	}
	for _, q := range set.Questions {
		add(q.Q)
	}
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "porter.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE VIRTUAL TABLE f USING fts5(w, tokenize='porter unicode61 remove_diacritics 2');
		CREATE VIRTUAL TABLE v USING fts5vocab(f, 'instance');`); err != nil {
		t.Fatal(err)
	}
	tx, _ := db.Begin()
	for i, w := range list {
		if _, err := tx.Exec(`INSERT INTO f(rowid, w) VALUES (?, ?)`, i+1, w); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT doc, term FROM v`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var doc int
		var term string
		if err := rows.Scan(&doc, &term); err != nil {
			t.Fatal(err)
		}
		n++
		if w := list[doc-1]; porter(w) != term {
			t.Errorf("porter(%q) = %q, FTS5 stems it %q", w, porter(w), term)
		}
	}
	if n != len(list) {
		t.Fatalf("FTS5 gave %d terms for %d words", n, len(list))
	}
	t.Logf("%d words stem as FTS5 stems them", n)
}
