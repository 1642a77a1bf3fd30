package telemetry

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Other is the label value of every name the daemon does not know, and of
// every label set past a metric's bound: a model or a plugin writes the
// tool and model names an event carries, and each new value would be a
// new series in the operator's Prometheus
// (docs/RATIONALE.md#a-label-names-only-what-the-daemon-knows).
const Other = "other"

// DefaultMaxSeries is [MetricsConfig.MaxSeries] when it is zero.
const DefaultMaxSeries = 256

// bound keeps one metric's label sets under max: a set seen before
// passes, a new one while fewer than max were seen, and past that it is
// folded into the set of Other alone, which is counted. Used by the
// subscription's handler alone, so it needs no lock.
type bound struct {
	max    int
	seen   map[string]struct{}
	folded prometheus.Counter
}

func newBound(max int, folded prometheus.Counter) *bound {
	return &bound{max: max, seen: map[string]struct{}{}, folded: folded}
}

// values returns vals, or as many Others when vals is a new set past the
// bound.
func (b *bound) values(vals ...string) []string {
	key := strings.Join(vals, "\x00")
	if _, ok := b.seen[key]; ok {
		return vals
	}
	if len(b.seen) < b.max {
		b.seen[key] = struct{}{}
		return vals
	}
	b.folded.Inc()
	for i := range vals {
		vals[i] = Other
	}
	return vals
}

// known returns v if it is one of names, else Other, the fold counted.
func (b *bound) known(names *names, v string) string {
	if names.has(v) {
		return v
	}
	b.folded.Inc()
	return Other
}

// oneOf returns v if it is one of vals, else Other, the fold counted.
func (b *bound) oneOf(v string, vals ...string) string {
	for _, w := range vals {
		if v == w {
			return v
		}
	}
	b.folded.Inc()
	return Other
}

// names are the names of one kind the daemon knows (its tools, its
// plugins), listed again when a name it does not hold comes, at most once
// per refresh: a flood of invented names costs one listing a second.
type names struct {
	list    func() []string
	set     map[string]bool
	at      time.Time
	refresh time.Duration
}

func newNames(list func() []string) *names {
	return &names{list: list, refresh: time.Second}
}

func fixedNames(vals ...string) *names {
	n := &names{set: map[string]bool{}}
	for _, v := range vals {
		if v != "" {
			n.set[v] = true
		}
	}
	return n
}

func (n *names) has(v string) bool {
	if v == "" || v == Other {
		return false
	}
	if n.set[v] {
		return true
	}
	if n.list == nil || (!n.at.IsZero() && time.Since(n.at) < n.refresh) {
		return false
	}
	n.at = time.Now()
	set := map[string]bool{}
	for _, w := range n.list() {
		set[w] = true
	}
	n.set = set
	return set[v]
}
