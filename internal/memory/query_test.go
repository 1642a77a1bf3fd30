package memory

import (
	"slices"
	"strings"
	"testing"
)

func TestQueryTerms(t *testing.T) {
	for _, c := range []struct {
		q    string
		want []string
	}{
		{"what was filling up the disk on web-01?", []string{"filling", "disk", "web", "01", "web01"}},
		{"what was it?", []string{"what", "was", "it"}}, // only stop words: keep them
		{`"NEAR(" AND OR *`, []string{"near"}},
		{"feature/dark-mode", []string{"feature", "dark", "mode", "featuredarkmode"}},
		{"!!!", nil},
	} {
		if got := queryTerms(c.q); !slices.Equal(got, c.want) {
			t.Errorf("queryTerms(%q) = %q, want %q", c.q, got, c.want)
		}
	}
	if got := queryTerms(strings.Repeat("alpha beta gamma delta ", 1000) + strings.Repeat("x", 200)); len(got) > maxQueryTerms {
		t.Errorf("%d terms from a long paste, bound %d", len(got), maxQueryTerms)
	}
	if got := ftsMatch([]string{"a", `b"c`}); got != `"a" OR "b""c"` {
		t.Errorf("ftsMatch = %s", got)
	}
}

// TestEachToken checks eachToken against the strings FTS5 indexes: the
// term counts rest on the two giving the same tokens.
func TestEachToken(t *testing.T) {
	texts := []string{
		"connect() failed (111: Connection refused) while connecting to upstream 127.0.0.1:8081",
		`call run_skill {"command":"git checkout --theirs web/src/App.tsx && git push origin feature/dark-mode"}`,
		"Ünïcödé web-01 ⇒ db-02,api.acme.io;x-y-z-w-v a-b a-b",
	}
	for _, l := range loadRecallSet(t).Loops {
		texts = append(texts, l.Goal)
		for _, s := range l.Steps {
			texts = append(texts, s.Text, strings.Join(s.Lines, "\n"))
		}
	}
	for _, text := range texts {
		var got []string
		eachToken(text, func(tok string, _ bool) { got = append(got, tok) })
		if want := words(withNames(text)); !slices.Equal(got, want) {
			t.Fatalf("eachToken(%q)\n= %q\nwant %q", text, got, want)
		}
	}
}

func TestPruneTerms(t *testing.T) {
	costs := []termCost{{"disk", 5000}, {"web01", 40}, {"filling", 0}, {"used", 2500}, {"root", 900}}
	kept, dropped := pruneTerms(costs, 1000)
	if termList(kept) != "web01 filling root" || termList(dropped) != "disk used" {
		t.Errorf("kept %v, dropped %v", kept, dropped)
	}
	// The rarest term is kept even past the budget.
	kept, _ = pruneTerms([]termCost{{"a", 9000}, {"b", 7000}}, 1000)
	if termList(kept) != "b" {
		t.Errorf("kept %v, want the rarest, b", kept)
	}
}

func termList(cs []termCost) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.term)
	}
	return strings.Join(out, " ")
}
