package memory

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// The embeddings endpoint of the tests: a real HTTP server that speaks
// OpenAI's embeddings protocol (POST /v1/embeddings, JSON in and out), at
// the edge of the machine where the project allows a stand-in. Its vectors
// are deterministic and capture meaning a little better than exact words:
// each word is stemmed (porter) and mapped through a small table of synonyms of the
// trade (log in ~ authentication, disk ~ space, shrink ~ smaller...) to a
// concept, and each concept and each character trigram of the word is
// hashed, with a sign, into one of fakeDim dimensions. Paraphrases that
// share no word then still share concepts or trigrams.

const (
	fakeModel = "kairo-test-embed"
	fakeDim   = 256
)

// synonymGroups are the concepts: each word of a group stands for the first.
var synonymGroups = [][]string{
	{"fail", "failure", "error", "broke", "broken", "crash", "abort", "died", "die", "wrong", "problem", "fault", "trouble", "offline", "down"},
	{"auth", "login", "signin", "signing", "authenticate", "authentication", "password", "credential", "passwd"},
	{"disk", "storage", "space", "drive", "room", "filesystem", "partition", "volume", "du", "df"},
	{"full", "usage", "fill", "filling", "hog", "hogging", "occupy"},
	{"cert", "certificate", "tls", "ssl", "https"},
	{"expire", "expiry", "expiration", "valid", "lapse", "until"},
	{"big", "large", "biggest", "largest", "size", "huge", "weigh", "heavy", "gb", "mb", "gigabyte", "megabyte"},
	{"small", "tiny", "shrink", "slim", "slimming", "smaller", "reduce"},
	{"slow", "latency", "sluggish", "lag", "drag", "dragging", "tail", "p99", "worst"},
	{"throughput", "rps", "req", "requests", "quick", "fast"},
	{"database", "db", "postgres", "postgresql", "psql", "sql", "mysql"},
	{"backup", "dump", "snapshot", "archive"},
	{"delete", "remove", "prune", "purge", "cleanup", "clean", "reclaim", "free", "freed", "vacuum", "clear", "clearing", "back"},
	{"kill", "oom", "terminate"},
	{"deploy", "deployment", "rollout", "rolled", "ship", "shipping", "live"},
	{"test", "suite", "spec", "green", "pass", "passed"},
	{"flaky", "intermittent", "unstable", "flake", "sometimes", "timed", "timeout", "often", "repeated", "rerun"},
	{"memory", "ram", "rss", "heap", "resident", "alloc", "allocate", "allocation", "eat", "eating"},
	{"network", "connectivity", "reach", "reachable", "unreachable", "route", "hop", "traceroute", "packet", "ping", "answer"},
	{"block", "deny", "denied", "drop", "dropped", "refuse", "reject", "forbidden", "firewall", "iptables", "ban", "banned"},
	{"conflict", "merge", "stuck"},
	{"upgrade", "update", "bump", "bumping", "patch", "upgraded", "latest", "release"},
	{"schedule", "cron", "crontab", "nightly", "daily", "night", "every", "scheduled"},
	{"attack", "brute", "attacker", "guess", "hammer", "hammering", "forcing"},
	{"address", "ip", "addr", "source"},
	{"path", "location", "directory", "folder", "where", "saved", "written", "wrote", "land", "landing", "put"},
	{"gpu", "cuda", "vram"},
	{"image", "container", "docker"},
	{"site", "website", "page"},
	{"gateway", "502", "upstream", "proxy", "nginx"},
	{"port", "listen", "listening", "tcp"},
	{"log", "journal", "journalctl", "logged", "logging", "journald"},
	{"key", "fingerprint", "ed25519", "rsa", "ecdsa", "authorized"},
	{"group", "sudo", "admin", "wheel", "member", "rights"},
	{"dns", "record", "resolve", "point", "pointing", "propagate", "propagation", "ttl", "caches"},
	{"version", "v"},
	{"service", "daemon", "unit", "systemctl", "restart", "restarted", "needrestart"},
	{"train", "training", "fine", "tune", "epoch", "converge"},
	{"loss", "accuracy"},
	{"checkpoint", "weights"},
	{"row", "rows", "lines", "entries", "copy"},
	{"csv", "spreadsheet", "export", "extract"},
	{"upload", "sync", "copied", "bucket", "s3"},
	{"health", "healthy", "healthz", "ok", "unhealthy", "readiness", "liveness"},
	{"fix", "fixed", "solution", "prevent", "suggest", "resolved", "change", "rename", "edit", "adapt", "replace"},
	{"compile", "build", "built", "make", "compiling"},
	{"symbol", "identifier", "undefined", "missing"},
	{"binary", "artifact", "executable", "dist"},
	{"push", "pushed", "remote", "origin", "forced"},
	{"replica", "pod", "instance"},
	{"uid", "id", "assigned"},
	{"count", "number", "many", "total"},
	{"ssl", "openssl", "libssl"},
}

var (
	synonymsOnce sync.Once
	synonyms     map[string]string
)

func concept(stem string) string {
	synonymsOnce.Do(func() {
		synonyms = map[string]string{}
		for _, g := range synonymGroups {
			for _, w := range g {
				synonyms[porter(w)] = g[0]
			}
		}
	})
	if c, ok := synonyms[stem]; ok {
		return c
	}
	return stem
}

// boilerplate are the words of Kairo's own rendering of calls and
// results, which say little of what a segment is about: a model gives
// such frequent words little weight, and so does the test endpoint.
var boilerplate = map[string]bool{"call": true, "run": true, "skill": true, "command": true, "done": true,
	"process": true, "exited": true, "exit": true, "code": true, "last": true, "lines": true}

var (
	sizeLike = regexp.MustCompile(`^(?i)[0-9]+(\.[0-9]+)?([kmgt]i?b?)$`)
	ipLike   = regexp.MustCompile(`^[0-9]{1,3}(\.[0-9]{1,3}){3}(/[0-9]+)?$`)
)

// fakeEmbedding is the test endpoint's vector for text.
func fakeEmbedding(text string) []float32 {
	v := make([]float32, fakeDim)
	add := func(feature string, weight float32) {
		h := fnv.New64a()
		h.Write([]byte(feature))
		x := h.Sum64()
		if x>>63 == 1 {
			weight = -weight
		}
		v[x%fakeDim] += weight
	}
	// A compound name (web-01, db-snapshots, api.acme.io) is a feature of
	// its own, as a model sees a name it knows as one thing.
	// So is what a field of text is: a path, a size, an address.
	for _, field := range strings.Fields(text) {
		if ws := words(field); len(ws) >= 2 && len(ws) <= 8 {
			add("n:"+strings.Join(ws, " "), 1)
		}
		field = strings.Trim(field, `"',;:()[]`)
		switch {
		case strings.HasPrefix(field, "/") && len(field) > 1, strings.HasPrefix(field, "~/"):
			add("c:path", 1)
		case sizeLike.MatchString(field):
			add("c:big", 1)
		case ipLike.MatchString(field):
			add("c:address", 1)
		}
	}
	for _, w := range words(text) {
		if stopWords[w] {
			continue
		}
		weight := float32(1)
		if boilerplate[w] {
			weight = 0.2
		}
		st := porter(w)
		add("c:"+concept(st), weight)
		if len(st) >= 4 {
			padded := "^" + st + "$"
			for i := 0; i+3 <= len(padded); i++ {
				add("t:"+padded[i:i+3], weight/4)
			}
		}
	}
	return v
}

// fakeEmbedServer is the test endpoint.
type fakeEmbedServer struct {
	*httptest.Server
	requests atomic.Int64 // POSTs answered
	inputs   atomic.Int64 // texts embedded
	failing  atomic.Bool  // answer 500
}

// newFakeEmbedServer starts the endpoint; it stops when the test ends.
func newFakeEmbedServer(tb testing.TB) *fakeEmbedServer {
	f := &fakeEmbedServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	tb.Cleanup(f.Close)
	return f
}

// embedder is an OpenAIEmbedder pointed at the endpoint.
func (f *fakeEmbedServer) embedder(tb testing.TB, batch int) *OpenAIEmbedder {
	e, err := NewOpenAIEmbedder(OpenAIConfig{BaseURL: f.URL + "/v1", Model: fakeModel, APIKey: "test-key", BatchSize: batch})
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

func (f *fakeEmbedServer) serve(w http.ResponseWriter, r *http.Request) {
	apiError := func(code int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		apiError(http.StatusNotFound, "no route "+r.Method+" "+r.URL.Path)
		return
	}
	if r.Header.Get("Authorization") != "Bearer test-key" {
		apiError(http.StatusUnauthorized, "missing or wrong API key")
		return
	}
	var req struct {
		Input          json.RawMessage `json:"input"`
		Model          string          `json:"model"`
		EncodingFormat string          `json:"encoding_format"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		apiError(http.StatusBadRequest, "body is not JSON: "+err.Error())
		return
	}
	var inputs []string
	if json.Unmarshal(req.Input, &inputs) != nil {
		var one string
		if err := json.Unmarshal(req.Input, &one); err != nil {
			apiError(http.StatusBadRequest, "input must be a string or an array of strings")
			return
		}
		inputs = []string{one}
	}
	if req.Model != fakeModel {
		apiError(http.StatusNotFound, "model "+req.Model+" does not exist")
		return
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" {
		apiError(http.StatusBadRequest, "this server answers encoding_format float only")
		return
	}
	if f.failing.Load() {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}`))
		return
	}
	type item struct {
		Object    string    `json:"object"`
		Embedding []float32 `json:"embedding"`
		Index     int       `json:"index"`
	}
	data := make([]item, len(inputs))
	tokens := 0
	for i, in := range inputs {
		if in == "" {
			apiError(http.StatusBadRequest, "input["+strconv.Itoa(i)+"] is empty")
			return
		}
		data[i] = item{Object: "embedding", Embedding: fakeEmbedding(in), Index: i}
		tokens += len(strings.Fields(in))
	}
	f.requests.Add(1)
	f.inputs.Add(int64(len(inputs)))
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"object": "list", "data": data, "model": req.Model,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens},
	})
}

// localEmbedder is the endpoint's function called in process: for
// building the 100,000-segment benchmark corpus without sending 100,000
// texts through HTTP. Same model name, so the endpoint answers queries
// against the vectors it stored.
type localEmbedder struct{}

func (localEmbedder) Model() string { return fakeModel }

func (localEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = fakeEmbedding(t)
	}
	return out, nil
}
