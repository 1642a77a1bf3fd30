package memory

// porter is the stem FTS5's porter tokenizer gives a lower-case word: the
// Porter (1980) algorithm as SQLite implements it (ext/fts5/fts5_tokenize.c),
// byte for byte, so that the store can look a question's terms up in the
// index's vocabulary (segments_vocab) and know how many segments hold each
// before it searches. Words shorter than 3 or longer than 64 bytes pass
// through, as in FTS5. A word with diacritics may stem differently from
// the index's, whose tokenizer removes them first: its frequency is then
// unknown, which costs speed, never a match.
func porter(word string) string {
	if len(word) < 3 || len(word) > 64 {
		return word
	}
	b := []byte(word)
	b = porterStep1A(b)
	if len(b) > 3 && string(b[len(b)-3:]) == "eed" {
		// -eed → -ee, or nothing; either way 1b ends there.
		b, _ = porterApply(b, porterStep1B[:1])
	} else if nb, ok := porterApply(b, porterStep1B[1:]); ok {
		b = nb
		if nb, ok := porterApply(b, porterStep1B2); ok {
			b = nb
		} else if c := b[len(b)-1]; len(b) >= 2 && !isVowel(c, false) && c != 'l' && c != 's' && c != 'z' && c == b[len(b)-2] {
			b = b[:len(b)-1]
		} else if measureIs1(b) && endsCVC(b) {
			b = append(b, 'e')
		}
	}
	if b[len(b)-1] == 'y' && hasVowel(b[:len(b)-1]) {
		b[len(b)-1] = 'i'
	}
	b, _ = porterApply(b, porterStep2)
	b, _ = porterApply(b, porterStep3)
	b, _ = porterApply(b, porterStep4)
	if n := len(b); b[n-1] == 'e' && (measureOver1(b[:n-1]) || (measureIs1(b[:n-1]) && !endsCVC(b[:n-1]))) {
		b = b[:n-1]
	}
	if n := len(b); n > 1 && b[n-1] == 'l' && b[n-2] == 'l' && measureOver1(b[:n-1]) {
		b = b[:n-1]
	}
	return string(b)
}

// porterRule replaces suffix by repl when the stem before it meets cond.
type porterRule struct {
	suffix, repl string
	cond         func(stem []byte) bool
}

// porterApply applies the first rule whose suffix ends b (and is shorter
// than b); a rule whose condition fails ends the step unapplied, as in
// FTS5, where only the first matching suffix is tried. ok reports a rule
// applied.
func porterApply(b []byte, rules []porterRule) ([]byte, bool) {
	for _, r := range rules {
		n := len(b) - len(r.suffix)
		if n <= 0 || string(b[n:]) != r.suffix {
			continue
		}
		if r.cond != nil && !r.cond(b[:n]) {
			return b, false
		}
		return append(b[:n], r.repl...), true
	}
	return b, false
}

func porterStep1A(b []byte) []byte {
	n := len(b)
	switch {
	case b[n-1] != 's':
	case b[n-2] == 'e':
		if (n > 4 && b[n-4] == 's' && b[n-3] == 's') || (n > 3 && b[n-3] == 'i') {
			return b[:n-2]
		}
		return b[:n-1]
	case b[n-2] != 's':
		return b[:n-1]
	}
	return b
}

var (
	porterStep1B = []porterRule{
		{"eed", "ee", measureOver0}, {"ed", "", hasVowel}, {"ing", "", hasVowel},
	}
	porterStep1B2 = []porterRule{
		{"at", "ate", nil}, {"bl", "ble", nil}, {"iz", "ize", nil},
	}
	porterStep2 = []porterRule{
		{"ational", "ate", measureOver0}, {"tional", "tion", measureOver0},
		{"enci", "ence", measureOver0}, {"anci", "ance", measureOver0},
		{"izer", "ize", measureOver0}, {"logi", "log", measureOver0},
		{"bli", "ble", measureOver0}, {"alli", "al", measureOver0}, {"entli", "ent", measureOver0},
		{"eli", "e", measureOver0}, {"ousli", "ous", measureOver0},
		{"ization", "ize", measureOver0}, {"ation", "ate", measureOver0}, {"ator", "ate", measureOver0},
		{"alism", "al", measureOver0}, {"iveness", "ive", measureOver0}, {"fulness", "ful", measureOver0},
		{"ousness", "ous", measureOver0}, {"aliti", "al", measureOver0}, {"iviti", "ive", measureOver0},
		{"biliti", "ble", measureOver0},
	}
	porterStep3 = []porterRule{
		{"ical", "ic", measureOver0}, {"ness", "", measureOver0}, {"icate", "ic", measureOver0},
		{"iciti", "ic", measureOver0}, {"ful", "", measureOver0}, {"ative", "", measureOver0},
		{"alize", "al", measureOver0},
	}
	porterStep4 = []porterRule{
		{"al", "", measureOver1}, {"ance", "", measureOver1}, {"ence", "", measureOver1},
		{"er", "", measureOver1}, {"ic", "", measureOver1}, {"able", "", measureOver1},
		{"ible", "", measureOver1}, {"ant", "", measureOver1}, {"ement", "", measureOver1},
		{"ment", "", measureOver1}, {"ent", "", measureOver1}, {"ion", "", measureOver1SorT},
		{"ou", "", measureOver1}, {"ism", "", measureOver1}, {"ate", "", measureOver1},
		{"iti", "", measureOver1}, {"ous", "", measureOver1}, {"ive", "", measureOver1},
		{"ize", "", measureOver1},
	}
)

// The rule tables above list the suffixes in FTS5's order. FTS5 tries only
// the suffixes that share the word's last-but-one letter, in that order;
// trying all in order is the same wherever two suffixes could both match,
// because each such pair (ement/ment/ent, ization/ation) is listed longest
// first.

// isVowel: a, e, i, o, u, and y after a consonant.
func isVowel(c byte, yIsVowel bool) bool {
	return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u' || (yIsVowel && c == 'y')
}

// gobbleVC skips a run of consonants then vowels then one consonant (a
// VC in Porter's [C](VC)^m[V]); the bytes used, or 0 when there is none.
func gobbleVC(b []byte, prevCons bool) int {
	cons := prevCons
	i := 0
	for ; i < len(b); i++ {
		if cons = !isVowel(b[i], cons); !cons {
			break
		}
	}
	for i++; i < len(b); i++ {
		if cons = !isVowel(b[i], cons); cons {
			return i + 1
		}
	}
	return 0
}

func measureOver0(b []byte) bool { return gobbleVC(b, false) > 0 }

func measureOver1(b []byte) bool {
	n := gobbleVC(b, false)
	return n > 0 && gobbleVC(b[n:], true) > 0
}

func measureIs1(b []byte) bool {
	n := gobbleVC(b, false)
	return n > 0 && gobbleVC(b[n:], true) == 0
}

func measureOver1SorT(b []byte) bool {
	return len(b) > 0 && (b[len(b)-1] == 's' || b[len(b)-1] == 't') && measureOver1(b)
}

// endsCVC: consonant, vowel, consonant other than w, x or y (Porter's *o).
func endsCVC(b []byte) bool {
	if n := len(b); n == 0 || b[n-1] == 'w' || b[n-1] == 'x' || b[n-1] == 'y' {
		return false
	}
	mask, cons := 0, false
	for _, c := range b {
		cons = !isVowel(c, cons)
		mask <<= 1
		if cons {
			mask |= 1
		}
	}
	return mask&7 == 5
}

// hasVowel: the stem holds a vowel (Porter's *v*).
func hasVowel(b []byte) bool {
	for i, c := range b {
		if isVowel(c, i > 0) {
			return true
		}
	}
	return false
}
