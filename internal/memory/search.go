package memory

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/kairo-os/kairo/abi"
)

// Page is a page of a search: [abi.MemorySearchPage].
type Page = abi.MemorySearchPage

// DefaultPage is how many chunks a page of Search holds when limit is 0.
const DefaultPage = 20

// MaxRanked bounds how far Search pages: the best MaxRanked segments for a
// query. Every page ranks them alike, so the pages of one query hold each
// of them once while the store does not change.
const MaxRanked = 5000

// ErrBadCursor is a cursor Search did not make for this query.
var ErrBadCursor = errors.New("memory: bad cursor")

// Search returns a page of the chunks that best answer query, best first:
// limit chunks (DefaultPage when 0, at most MaxK) from cursor ("" for the
// first page), with the cursor of the next page, "" after the last. It
// ranks as [Store.Retrieve] does, the best MaxRanked segments at most, and
// reads the segments of the page only.
func (s *Store) Search(ctx context.Context, query, cursor string, limit int) (Page, error) {
	release, err := s.use()
	if err != nil {
		return Page{}, err
	}
	defer release()
	if strings.TrimSpace(query) == "" {
		return Page{}, ErrEmptyQuery
	}
	switch {
	case limit == 0:
		limit = DefaultPage
	case limit < 0 || limit > MaxK:
		return Page{}, fmt.Errorf("memory: search: limit is %d; ask for 1 to %d chunks a page (0 for %d)", limit, MaxK, DefaultPage)
	}
	from := 0
	if cursor != "" {
		if from, err = parseCursor(cursor, query); err != nil {
			return Page{}, err
		}
	}
	ranked, err := s.rank(ctx, query, MaxRanked)
	if err != nil {
		return Page{}, err
	}
	ranked = ranked[:min(len(ranked), MaxRanked)]
	if from > len(ranked) {
		from = len(ranked) // the store shrank since: an empty last page
	}
	to := min(from+limit, len(ranked))
	chunks, err := s.chunks(ctx, ranked[from:to])
	if err != nil {
		return Page{}, err
	}
	p := Page{Chunks: chunks}
	if to < len(ranked) {
		p.Next = makeCursor(to, query)
	}
	return p, nil
}

// A cursor is the rank the next page starts at and a hash of the query,
// "RANK.HASH": a cursor of another query is refused, not misread.
func makeCursor(rank int, query string) string {
	return strconv.Itoa(rank) + "." + queryHash(query)
}

func parseCursor(cursor, query string) (int, error) {
	r, h, ok := strings.Cut(cursor, ".")
	rank, err := strconv.Atoi(r)
	if !ok || err != nil || rank <= 0 || rank > MaxRanked {
		return 0, fmt.Errorf("%w %q: give the cursor a page of this search printed as its next", ErrBadCursor, clip(cursor, 40))
	}
	if h != queryHash(query) {
		return 0, fmt.Errorf("%w %q: it is a cursor of another query; search again without it", ErrBadCursor, clip(cursor, 40))
	}
	return rank, nil
}

func queryHash(query string) string {
	h := fnv.New32a()
	h.Write([]byte(strings.Join(strings.Fields(query), " ")))
	return strconv.FormatUint(uint64(h.Sum32()), 36)
}
