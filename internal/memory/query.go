package memory

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxQueryTerms bounds the terms of a question that reach the full-text
// index: a question (or a 10 KB paste) rarely needs more to find its chunk.
const maxQueryTerms = 32

// maxTermBytes drops "words" longer than this (hashes, base64): they match
// nothing a user would look for.
const maxTermBytes = 64

// words splits text into lower-case words: runs of letters and digits, as
// FTS5's unicode61 tokenizer sees them.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !isWordRune(r) })
}

// names are the compound names of a text — web-01, api.acme.io,
// feature/dark-mode, db-snapshots — each as one token of its words joined
// (web01, apiacmeio). The index holds them beside the text and questions
// search them beside their words: a name is as rare as what it names, so
// the run loop about web-01 outranks those that mention web and 01 apart,
// at the cost of one rare term rather than of a phrase over two common
// ones.
func names(text string) []string {
	var out []string
	eachToken(text, func(t string, name bool) {
		if name {
			out = append(out, t)
		}
	})
	return out
}

// eachToken calls fn with each token FTS5 sees in withNames(text): each
// word, then each name (name true) once. A name is a field — a run of
// text between spaces and brackets, quotes and such — of two to four
// words.
func eachToken(text string, fn func(token string, name bool)) {
	lower := strings.ToLower(text)
	var found []string
	var parts [4]string
	n := 0 // words in the current field
	endField := func() {
		if n >= 2 && n <= len(parts) {
			name := strings.Join(parts[:n], "")
			if len(name) <= maxTermBytes/2 && !slices.Contains(found, name) {
				found = append(found, name)
			}
		}
		n = 0
	}
	for i := 0; i < len(lower); {
		r, size := utf8.DecodeRuneInString(lower[i:])
		switch {
		case isWordRune(r):
			j := i + size
			for j < len(lower) {
				r, size := utf8.DecodeRuneInString(lower[j:])
				if !isWordRune(r) {
					break
				}
				j += size
			}
			fn(lower[i:j], false)
			if n < len(parts) {
				parts[n] = lower[i:j]
			}
			n++
			i = j
			continue
		case unicode.IsSpace(r) || strings.ContainsRune(`,;:=!?()[]{}<>"'`+"`", r):
			endField()
		}
		i += size
	}
	endField()
	for _, name := range found {
		fn(name, true)
	}
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }

// withNames is text as the index holds it: the text, then its names.
func withNames(text string) string {
	n := names(text)
	if len(n) == 0 {
		return text
	}
	return text + "\n" + strings.Join(n, " ")
}

// queryTerms are the terms a question is searched by: its words, stop
// words dropped unless nothing else is left, then its names; without
// duplicates, at most maxQueryTerms. None when the question holds no word.
func queryTerms(question string) []string {
	var terms, stops []string
	seen := map[string]bool{}
	for _, w := range words(question) {
		if len(w) > maxTermBytes || seen[w] {
			continue
		}
		seen[w] = true
		if stopWords[w] {
			stops = append(stops, w)
		} else {
			terms = append(terms, w)
		}
	}
	if len(terms) == 0 {
		terms = stops
	}
	for _, n := range names(question) {
		if !seen[n] {
			seen[n] = true
			terms = append(terms, n)
		}
	}
	if len(terms) > maxQueryTerms {
		terms = terms[:maxQueryTerms]
	}
	return terms
}

// ftsMatch is the FTS5 query for terms, which cannot be a syntax error:
// every term is a quoted string (FTS5's own syntax — AND, OR, NEAR(, *, ^,
// column filters — never reaches its parser as such), and the terms are
// ORed, so BM25 ranks chunks by how many of them they hold and how rare
// those are.
func ftsMatch(terms []string) string {
	quoted := make([]string, len(terms))
	for i, t := range terms {
		// Terms hold no quote, but keep the quoting rule whole: FTS5
		// reads "" inside a string as one ".
		quoted[i] = `"` + strings.ReplaceAll(t, `"`, `""`) + `"`
	}
	return strings.Join(quoted, " OR ")
}

// stopWords are the English words a question is made of that say nothing
// of what it asks about. Left in, they match most chunks and cost time
// without changing the ranking.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above after again all also am an and any are as at be
		been before being below between both but by can could did do does doing done down during each
		few for from further had has have having he her here hers him his how i if in into is it its
		itself just last me more most my no nor not now of off on once only or other our ours out over
		own same she should so some such than that the their them then there these they this those
		through to too under until up very was we were what when where which while who whom why will
		with would you your yours yesterday today earlier ago didn doesn wasn weren isn t s tell remind
		know us please thing things`) {
		m[w] = true
	}
	return m
}()
