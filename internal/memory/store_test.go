package memory

import (
	"github.com/kairo-os/kairo/abi"

	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func openStore(t testing.TB, dir string, opts Config) *Store {
	t.Helper()
	s, err := Open(filepath.Join(dir, "memory.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// segsOf makes a run loop's segments from texts, each "kind: text" with
// kind u (user message), c (tool call), r (tool result), s (response) or
// t (reasoning); a user message starts a new iteration.
func segsOf(id string, texts ...string) []Segment {
	types := map[string]SegmentType{"u": abi.MemorySegmentUserMessage, "c": abi.MemorySegmentToolCall, "r": abi.MemorySegmentToolResult, "s": abi.MemorySegmentResponse, "t": abi.MemorySegmentReasoning}
	var out []Segment
	it, seg := -1, 0
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for i, text := range texts {
		kind, body, _ := strings.Cut(text, ": ")
		if kind == "u" || it < 0 {
			it, seg = it+1, 0
		}
		out = append(out, Segment{
			Anchor:  Anchor{RunLoopID: id, IterationIndex: it, SegmentIndex: seg, SegmentType: types[kind], Timestamp: at.Add(time.Duration(i) * time.Second)},
			Text:    body,
			EventID: fmt.Sprintf("%s-%d", id, i),
		})
		seg++
	}
	return out
}

var testLoops = map[string][]Segment{
	"rl-nginx": segsOf("rl-nginx",
		"u: the shop website returns 502 errors since this morning",
		"c: call run_skill tail /var/log/nginx/error.log",
		"r: connect() failed (111: Connection refused) while connecting to upstream 127.0.0.1:8081",
		"s: The app server behind nginx is down; restarting gunicorn.",
		"c: call run_skill systemctl restart gunicorn",
		"r: gunicorn active (running)",
		"s: The shop is back: gunicorn was restarted and answers on 8081."),
	"rl-disk": segsOf("rl-disk",
		"u: web-03 is out of disk space",
		"c: call run_skill du -xh --max-depth=2 /",
		"r: 41G /var/lib/docker 12G /var/log/journal",
		"c: call run_skill docker system prune -af",
		"r: Total reclaimed space: 33.2GB",
		"s: Freed 33 GB on web-03; the root filesystem is at 48%."),
	"rl-cert": segsOf("rl-cert",
		"u: renew the TLS certificate of api.example.com",
		"t: certbot with the DNS challenge; the token is in the vault",
		"c: call run_skill certbot renew --cert-name api.example.com",
		"r: all renewals succeeded; valid until 2025-09-01",
		"s: api.example.com has a new certificate valid until 2025-09-01."),
}

func indexAll(t testing.TB, s *Store) {
	t.Helper()
	for id, segs := range testLoops {
		if err := s.Index(context.Background(), id, segs); err != nil {
			t.Fatal(err)
		}
	}
}

func count(t testing.TB, s *Store, q string, args ...any) int {
	t.Helper()
	var n int
	if err := s.wdb.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRetrieveRanksTheRightChunkFirst(t *testing.T) {
	s := openStore(t, t.TempDir(), Config{})
	indexAll(t, s)
	for _, c := range []struct{ q, want string }{
		{"how much space was reclaimed?", "rl-disk#0.4"},
		{"which port was the upstream of the shop on?", "rl-nginx#0.2"},
		{"until when is the api.example.com certificate valid?", "rl-cert#0.4"},
	} {
		chunks, err := s.Retrieve(context.Background(), c.q, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(chunks) == 0 || anchorKey(chunks[0].Anchor) != c.want {
			t.Errorf("%q: got %v, want %s first", c.q, chunks, c.want)
			continue
		}
		for i := 1; i < len(chunks); i++ {
			if chunks[i].Score > chunks[i-1].Score {
				t.Errorf("%q: scores not best first: %v", c.q, chunks)
			}
		}
		if c := chunks[0]; c.Text == "" || c.Anchor.Timestamp.IsZero() || c.Anchor.SegmentType == "" {
			t.Errorf("chunk without its text or anchor: %+v", c)
		}
	}
	// Reasoning is not kept by default: the thought was dropped at Index.
	if n := count(t, s, `SELECT count(*) FROM segments WHERE type = 'reasoning'`); n != 0 {
		t.Errorf("%d reasoning segments stored with KeepReasoning off", n)
	}
}

func TestIndexIsIdempotent(t *testing.T) {
	s := openStore(t, t.TempDir(), Config{})
	ctx := context.Background()
	for range 3 {
		indexAll(t, s)
	}
	want := len(testLoops["rl-nginx"]) + len(testLoops["rl-disk"]) + len(testLoops["rl-cert"]) - 1 // less the thought
	if n := count(t, s, `SELECT count(*) FROM segments`); n != want {
		t.Fatalf("3 indexings of the same run loops left %d segments, want %d", n, want)
	}
	chunks, err := s.Retrieve(ctx, "docker prune reclaimed", 10)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range chunks {
		if k := anchorKey(c.Anchor); seen[k] {
			t.Errorf("chunk %s returned twice", k)
		}
		seen[anchorKey(c.Anchor)] = true
	}
	// Indexed again with less, the run loop is what was indexed last.
	if err := s.Index(ctx, "rl-disk", testLoops["rl-disk"][:2]); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, `SELECT count(*) FROM segments WHERE loop_id = 'rl-disk'`); n != 2 {
		t.Errorf("rl-disk indexed again with 2 segments holds %d", n)
	}
	chunks, _ = s.Retrieve(ctx, "reclaimed space", 5)
	for _, c := range chunks {
		if strings.Contains(c.Text, "reclaimed") {
			t.Errorf("a segment removed by indexing again is still found: %v", c)
		}
	}
	// The term counts follow: they equal a count made afresh, and FTS5's.
	checkTermCounts(t, s)
}

// checkTermCounts compares the store's term counts with a fresh count of
// its segments and with FTS5's own vocabulary: the pruning of common terms
// is only as good as they.
func checkTermCounts(t *testing.T, s *Store) {
	t.Helper()
	table := func() map[string]int {
		t.Helper()
		rows, err := s.wdb.Query(`SELECT term, docs FROM terms`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]int{}
		for rows.Next() {
			var term string
			var n int
			if err := rows.Scan(&term, &n); err != nil {
				t.Fatal(err)
			}
			m[term] = n
		}
		return m
	}
	fresh := &Store{wdb: s.wdb, terms: &termCounts{}}
	s.terms.mu.RLock()
	got := fmt.Sprint(table(), s.terms.rows, s.terms.tokens)
	s.terms.mu.RUnlock()
	// Empty the table, and count again from the segments.
	if _, err := s.wdb.Exec(`DELETE FROM terms`); err != nil {
		t.Fatal(err)
	}
	if err := fresh.recountTerms(); err != nil {
		t.Fatal(err)
	}
	docs := table()
	if want := fmt.Sprint(docs, fresh.terms.rows, fresh.terms.tokens); got != want {
		t.Errorf("term counts after indexing:\n%s\ncounted afresh:\n%s", got, want)
	}
	if _, err := s.wdb.Exec(`CREATE VIRTUAL TABLE IF NOT EXISTS temp.vocab USING fts5vocab(main, segments_fts, 'row')`); err != nil {
		t.Fatal(err)
	}
	rows, err := s.wdb.Query(`SELECT term, doc FROM temp.vocab`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var term string
		var doc int
		rows.Scan(&term, &doc)
		n++
		if docs[term] != doc {
			t.Errorf("term %q: counted in %d segments, FTS5 says %d", term, docs[term], doc)
		}
	}
	if n != len(docs) {
		t.Errorf("%d terms counted, FTS5 holds %d", len(docs), n)
	}
}

func TestExpand(t *testing.T) {
	s := openStore(t, t.TempDir(), Config{})
	indexAll(t, s)
	ctx := context.Background()
	nginx := testLoops["rl-nginx"] // 7 segments: 0.0 .. 0.6
	for _, c := range []struct {
		at            int // the focus, an index into nginx
		window        int
		before, after int
	}{
		{3, 2, 2, 2},
		{0, 2, 0, 2},
		{6, 2, 2, 0},
		{3, 0, 0, 0},
		{3, 100, 3, 3},
	} {
		got, err := s.Expand(ctx, nginx[c.at].Anchor, c.window)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Before) != c.before || len(got.After) != c.after || got.Focus.Text != nginx[c.at].Text || got.Segments != 7 {
			t.Errorf("expand %s by %d: %d before, %d after, focus %q, %d in all; want %d, %d, %q, 7",
				nginx[c.at].Anchor, c.window, len(got.Before), len(got.After), got.Focus.Text, got.Segments, c.before, c.after, nginx[c.at].Text)
		}
		for i, b := range got.Before {
			if want := nginx[c.at-len(got.Before)+i].Text; b.Text != want {
				t.Errorf("before[%d] = %q, want %q", i, b.Text, want)
			}
		}
		if got.Goal != nginx[0].Text || got.RunLoopID != "rl-nginx" {
			t.Errorf("goal %q of %q", got.Goal, got.RunLoopID)
		}
	}
	// From a retrieved chunk, as a caller would.
	chunks, _ := s.Retrieve(ctx, "reclaimed space docker", 1)
	if got, err := s.Expand(ctx, chunks[0].Anchor, 1); err != nil || got.Focus.Text != chunks[0].Text {
		t.Errorf("expand of a retrieved anchor: %v, %v", got.Focus, err)
	}

	bad := nginx[2].Anchor
	for _, c := range []struct {
		name   string
		anchor Anchor
		window int
		says   string
	}{
		{"unknown run loop", Anchor{RunLoopID: "rl-nope", SegmentType: abi.MemorySegmentResponse}, 1, `run loop "rl-nope" is not in memory`},
		{"no run loop", Anchor{}, 1, "names no run loop"},
		{"segment out of range", Anchor{RunLoopID: "rl-nginx", IterationIndex: 0, SegmentIndex: 40}, 1, "has no segment 40 in iteration 0 (it has 7 segments in iterations 0 to 0)"},
		{"iteration out of range", Anchor{RunLoopID: "rl-nginx", IterationIndex: 9}, 1, "has no segment 0 in iteration 9"},
		{"stale type", Anchor{RunLoopID: bad.RunLoopID, IterationIndex: bad.IterationIndex, SegmentIndex: bad.SegmentIndex, SegmentType: abi.MemorySegmentReasoning}, 1, "is stale"},
	} {
		_, err := s.Expand(ctx, c.anchor, c.window)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want ErrNotFound saying %q", c.name, err, c.says)
		}
	}
	if _, err := s.Expand(ctx, bad, -1); err == nil || !strings.Contains(err.Error(), "window is -1") {
		t.Errorf("negative window: %v", err)
	}
}

func TestHostileQueries(t *testing.T) {
	s := openStore(t, t.TempDir(), Config{})
	indexAll(t, s)
	ctx := context.Background()
	for _, q := range []string{
		`"`, `"""`, `docker"`, `"docker`, `NEAR(`, `NEAR(docker prune`, `NEAR(docker, 5)`, `*`, `docker*`, `^docker`,
		`AND`, `OR`, `NOT`, `docker AND`, `AND OR NOT`, `text: docker`, `{text context}: docker`, `-docker`, `+`,
		`(`, `)`, `((((`, `:`, `'`, `\`, "\x00", "docker\x00prune", `%`, `_`, `;DROP TABLE segments;--`,
		`шлюз 502 ошибка`, `磁盘空间不足`, `🔥 docker 🔥`, "e\u0301te\u0301", "\u200b\u200b", "web-03's disk",
		strings.Repeat("docker prune reclaimed ", 500), strings.Repeat(`"NEAR(* AND OR `, 800),
	} {
		if _, err := s.Retrieve(ctx, q, 5); err != nil {
			t.Errorf("query %.40q: %v", q, err)
		}
	}
	if got, _ := s.Retrieve(ctx, `"docker" NEAR( prune*`, 5); len(got) == 0 {
		t.Error("a query with FTS5 syntax in it found nothing, though its words are indexed")
	}
	for _, q := range []string{"", "   ", "\n\t"} {
		if _, err := s.Retrieve(ctx, q, 5); !errors.Is(err, ErrEmptyQuery) {
			t.Errorf("query %q: %v, want ErrEmptyQuery", q, err)
		}
	}
	for _, k := range []int{-1, MaxK + 1} {
		if _, err := s.Retrieve(ctx, "docker", k); err == nil || !strings.Contains(err.Error(), "k is") {
			t.Errorf("k %d: %v", k, err)
		}
	}
	if got, err := s.Retrieve(ctx, "docker", 0); err != nil || len(got) == 0 || len(got) > DefaultK {
		t.Errorf("k 0: %d chunks, %v; want 1 to %d", len(got), err, DefaultK)
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	srv := newFakeEmbedServer(t)
	s, err := Open(filepath.Join(dir, "memory.db"), Config{Embedder: srv.embedder(t, 0)})
	if err != nil {
		t.Fatal(err)
	}
	indexAll(t, s)
	before, _ := s.Retrieve(context.Background(), "certificate renewal", 3)
	vectors := s.vec.len()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Retrieve(context.Background(), "certificate", 3); !errors.Is(err, ErrClosed) {
		t.Errorf("retrieve after Close: %v, want ErrClosed", err)
	}
	s = openStore(t, dir, Config{Embedder: srv.embedder(t, 0)})
	if s.vec.len() != vectors || vectors == 0 {
		t.Errorf("reopened with %d vectors, closed with %d", s.vec.len(), vectors)
	}
	after, err := s.Retrieve(context.Background(), "certificate renewal", 3)
	if err != nil || fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("after reopening: %v (%v); before: %v", after, err, before)
	}
	// Another model's vectors are not compared.
	other := &namedEmbedder{localEmbedder{}, "another-model"}
	if s2 := openStore(t, dir, Config{Embedder: other}); s2.vec.len() != 0 {
		t.Errorf("opened with another model, %d vectors loaded", s2.vec.len())
	}
}

type namedEmbedder struct {
	localEmbedder
	name string
}

func (e *namedEmbedder) Model() string { return e.name }

// TestCrashKeepsWhatIndexAcknowledged kills a process with SIGKILL right
// after Index returned, without Close: what Index acknowledged is there
// when the store is opened again.
func TestCrashKeepsWhatIndexAcknowledged(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		t.Skip("the child's own run")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+filepath.Join(dir, "memory.db"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v, want killed by SIGKILL; output:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "indexed") {
		t.Fatalf("the child died before Index returned:\n%s", out.String())
	}
	s := openStore(t, dir, Config{})
	chunks, err := s.Retrieve(context.Background(), "reclaimed space", 1)
	if err != nil || len(chunks) == 0 || chunks[0].Anchor.RunLoopID != "rl-disk" {
		t.Fatalf("after the crash: %v, %v; want rl-disk's result", chunks, err)
	}
	if n := count(t, s, `SELECT count(*) FROM segments`); n != len(testLoops["rl-disk"]) {
		t.Errorf("%d segments after the crash, want %d", n, len(testLoops["rl-disk"]))
	}
}

// crashEnv names the store a child test process indexes into before it
// kills itself (see TestMain).
const crashEnv = "KAIRO_MEMORY_CRASH_DB"

// crashChild indexes one run loop, says so, and dies by SIGKILL.
func crashChild(path string) {
	s, err := Open(path, Config{})
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	if err := s.Index(context.Background(), "rl-disk", testLoops["rl-disk"]); err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	fmt.Println("indexed")
	os.Stdout.Sync()
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

func TestReasoningOffReachesNoDisk(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Config{})
	// Cut with reasoning kept, as a misconfigured caller would: the store
	// still writes none.
	segs := Segments(backupLoop(t).evs, SegmentConfig{KeepReasoning: true})
	if err := s.Index(context.Background(), "rl-backup", segs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if bytes.Contains(b, []byte("SECRET-REASONING")) {
			t.Errorf("%s holds the thought", filepath.Base(f))
		}
	}
	// With reasoning kept, it is stored: the check above can fail.
	s = openStore(t, t.TempDir(), Config{KeepReasoning: true})
	s.Index(context.Background(), "rl-backup", segs)
	if got, _ := s.Retrieve(context.Background(), "SECRET-REASONING-42", 1); len(got) == 0 || got[0].Anchor.SegmentType != abi.MemorySegmentReasoning {
		t.Errorf("reasoning kept, yet not found: %v", got)
	}
}

func TestEmbedderFailureDegradesToFullText(t *testing.T) {
	srv := newFakeEmbedServer(t)
	var reported []error
	var mu sync.Mutex
	s := openStore(t, t.TempDir(), Config{Embedder: srv.embedder(t, 0), OnEmbedError: func(err error) {
		mu.Lock()
		reported = append(reported, err)
		mu.Unlock()
	}})
	indexAll(t, s)
	srv.failing.Store(true)
	chunks, err := s.Retrieve(context.Background(), "reclaimed space docker", 3)
	if err != nil || len(chunks) == 0 || chunks[0].Anchor.RunLoopID != "rl-disk" {
		t.Fatalf("with the embedder down: %v, %v; want full-text chunks", chunks, err)
	}
	if len(reported) != 1 || !strings.Contains(reported[0].Error(), "500") || !strings.Contains(reported[0].Error(), "by full text only") {
		t.Errorf("reported: %v; want one error naming the 500", reported)
	}
	// Index stores the run loop for full-text search and says what failed.
	err = s.Index(context.Background(), "rl-late", segsOf("rl-late", "u: rotate the kafka logs", "r: rotated 14 segments of kafka"))
	if !errors.Is(err, ErrEmbed) || !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "index again") {
		t.Errorf("index with the embedder down: %v; want ErrEmbed naming the 500", err)
	}
	if got, _ := s.Retrieve(context.Background(), "kafka rotated", 1); len(got) == 0 || got[0].Anchor.RunLoopID != "rl-late" {
		t.Errorf("the run loop indexed while the embedder was down is not found: %v", got)
	}
	// Back up, the same run loop indexed again gets its vectors.
	srv.failing.Store(false)
	n := s.vec.len()
	if err := s.Index(context.Background(), "rl-late", segsOf("rl-late", "u: rotate the kafka logs", "r: rotated 14 segments of kafka")); err != nil || s.vec.len() != n+2 {
		t.Errorf("indexed again: %v, %d vectors, want %d", err, s.vec.len(), n+2)
	}
}

func TestConcurrentIndexAndRetrieve(t *testing.T) {
	t.Parallel()
	srv := newFakeEmbedServer(t)
	s := openStore(t, t.TempDir(), Config{Embedder: srv.embedder(t, 0), OnEmbedError: func(err error) { t.Error(err) }})
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				id := fmt.Sprintf("rl-%d-%d", w, i%5) // each run loop indexed 3 times
				segs := segsOf(id, fmt.Sprintf("u: deploy service-%d build %d", w, i), "c: call run_skill kubectl rollout", fmt.Sprintf("r: rolled out %d replicas", i))
				if err := s.Index(ctx, id, segs); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				chunks, err := s.Retrieve(ctx, fmt.Sprintf("deploy service build %d replicas", i), 5)
				if err != nil {
					t.Error(err)
					return
				}
				for _, c := range chunks {
					if _, err := s.Expand(ctx, c.Anchor, 1); err != nil && !errors.Is(err, ErrNotFound) {
						t.Error(err) // ErrNotFound: indexed again meanwhile
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := count(t, s, `SELECT count(*) FROM segments`); n != 3*5*3 {
		t.Errorf("%d segments, want %d: 15 run loops of 3", n, 3*5*3)
	}
	if n := s.vec.len(); n != 45 {
		t.Errorf("%d vectors in memory, want 45", n)
	}
	checkTermCounts(t, s)
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "memory.db"), Config{Synchronous: "sometimes"}); err == nil || !strings.Contains(err.Error(), "Options.Synchronous") {
		t.Errorf("bad synchronous: %v", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "no", "such", "memory.db"), Config{}); err == nil || !strings.Contains(err.Error(), "does its folder exist") {
		t.Errorf("missing folder: %v", err)
	}
	notDB := filepath.Join(t.TempDir(), "memory.db")
	os.WriteFile(notDB, bytes.Repeat([]byte("not a database "), 100), 0o600)
	if _, err := Open(notDB, Config{}); err == nil || !strings.Contains(err.Error(), "is it a Kairo memory store?") {
		t.Errorf("not a database: %v", err)
	}
	s := openStore(t, t.TempDir(), Config{})
	for _, c := range []struct {
		id   string
		segs []Segment
		says string
	}{
		{"", segsOf("x", "u: a"), "run loop id is empty"},
		{"rl-a", segsOf("rl-b", "u: a"), "belongs to run loop rl-b"},
		{"rl-a", append(segsOf("rl-a", "u: a"), segsOf("rl-a", "u: b")...), "two segments are anchored at 0.0"},
		{"rl-a", []Segment{{Anchor: Anchor{SegmentType: "thought"}, Text: "x"}}, `type "thought"`},
		{"rl-a", []Segment{{Anchor: Anchor{IterationIndex: -1, SegmentType: abi.MemorySegmentResponse}}}, "negative anchor"},
	} {
		if err := s.Index(context.Background(), c.id, c.segs); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("index %q: %v, want it to say %q", c.id, err, c.says)
		}
	}
}
