package memory

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// Search pages: the pages of a query hold every matching segment once,
// best first across pages, whatever the page size; a cursor of another
// query, or one Search never made, is refused by name.
func TestSearchPages(t *testing.T) {
	s := openStore(t, t.TempDir(), Config{})
	var loops []loopSegments
	matching := 0
	for i := range 600 {
		id := fmt.Sprintf("rl-%05d", i)
		goal := fmt.Sprintf("u: check the disk of host %d", i)
		if i%3 == 0 {
			goal = fmt.Sprintf("u: run the nightly backup of host %d", i)
			matching += 2
		}
		loops = append(loops, loopSegments{id: id, segs: segsOf(id, goal, fmt.Sprintf("s: done with host %d", i))})
	}
	if err := s.index(context.Background(), loops); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, limit := range []int{1000, 150, 37} {
		seen := map[string]bool{}
		cursor, pages, last := "", 0, 0.0
		for {
			p, err := s.Search(ctx, "nightly backup", cursor, limit)
			if err != nil {
				t.Fatalf("limit %d, page %d: %v", limit, pages, err)
			}
			if len(p.Chunks) > limit {
				t.Fatalf("limit %d: a page of %d", limit, len(p.Chunks))
			}
			for _, c := range p.Chunks {
				if seen[c.Anchor.Ref()] {
					t.Fatalf("limit %d: %s on two pages", limit, c.Anchor.Ref())
				}
				if len(seen) > 0 && c.Score > last {
					t.Fatalf("limit %d: %s scores %g after %g", limit, c.Anchor.Ref(), c.Score, last)
				}
				seen[c.Anchor.Ref()], last = true, c.Score
			}
			pages++
			if cursor = p.Next; cursor == "" {
				break
			}
		}
		if len(seen) != matching || pages != (matching+limit-1)/limit {
			t.Errorf("limit %d: %d segments in %d pages; want %d in %d", limit, len(seen), pages, matching, (matching+limit-1)/limit)
		}
	}

	first, err := s.Search(ctx, "nightly backup", "", 10)
	if err != nil || first.Next == "" {
		t.Fatalf("first page: %v, next %q", err, first.Next)
	}
	for _, c := range []struct{ query, cursor string }{
		{"disk", first.Next},
		{"nightly backup", "garbage"},
		{"nightly backup", "0." + queryHash("nightly backup")},
		{"nightly backup", "99999999." + queryHash("nightly backup")},
	} {
		if _, err := s.Search(ctx, c.query, c.cursor, 10); !errors.Is(err, ErrBadCursor) {
			t.Errorf("search %q from %q: %v, want ErrBadCursor", c.query, c.cursor, err)
		}
	}
	if _, err := s.Search(ctx, "nightly backup", "", MaxK+1); err == nil {
		t.Errorf("a page of %d: no error", MaxK+1)
	}
}
