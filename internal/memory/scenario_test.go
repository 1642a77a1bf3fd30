package memory

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The run loops of the recall set and of the benchmark corpus are made from
// scenario families: a kind of task a host agent is given (back up a
// database, free disk space, renew a certificate...), written once as the
// steps a real run loop of it takes — the calls, their results as the tools
// print them, what the agent says — with slots for what changes from one
// run to another (the database, the host, the numbers). Each family also
// holds the questions a user would ask about such a run later, worded the
// way a user would ask them rather than copied from the stored text, and
// which steps answer each.

// family is one scenario.
type family struct {
	name string
	// key is the slot that tells the family's runs apart (the database,
	// the host...): the labelled runs of a family each have their own.
	key   string
	slots map[string][]string
	// derive adds slots computed from the others.
	derive func(v map[string]string)
	goal   string
	steps  []step
	qs     []fq
	status string // how the run loop ended; default "done"
}

// step is one thing that happens in a run loop. Text is a template:
// {slot} is a slot's value; {name=spec} draws a value, prints it and keeps
// it as {name}: n:lo:hi an integer, f:lo:hi a one-decimal number, pick:a|b
// one of the choices, ip an address, hex a short commit hash.
type step struct {
	kind  string // user, thought, say, ask, call, result, note
	tick  uint64 // for thought, say, ask, call: the decision's tick
	tool  string // call, result
	text  string // the text; for call, the JSON arguments
	fail  bool   // result: the call failed; note: exit code 1 or 2
	call  int    // result, note: the step of the call it answers
	secs  int    // note: how long the process ran
	argv  string // note: the command line
	lines []string
	done  bool // say: the run loop is over
}

// fq is a question and the steps that answer it; each labelled run asks
// one of the wordings, in turn.
type fq struct {
	ans  []int
	says []string
}

var (
	hosts    = []string{"web-01", "web-02", "web-03", "web-04", "web-05", "app-01", "app-02", "app-03", "build-01", "build-02", "ci-runner-1", "ci-runner-2", "edge-01", "edge-02", "db-01", "db-02", "db-03", "db-04", "cache-01", "mq-01", "bastion-01", "bastion-02", "vpn-01", "gpu-01", "gpu-02"}
	projects = []string{"kairo-cli", "ledgerd", "metrics-agent", "imgproxy", "chatbridge", "syncd", "pgwatch", "edge-router", "tilecache", "notifyd", "payments-api", "searchsvc", "gatewayd", "scheduler", "feedsync", "mailer", "reportgen", "authsvc", "uploader", "geoindex"}
)

func pool(names ...string) []string { return names }

var families = []family{
	{
		name: "db-backup", key: "db",
		slots: map[string][]string{"db": pool("billing", "inventory", "analytics", "payroll", "crm", "ledger", "telemetry", "catalog", "warehouse", "bookings"), "host": hosts[14:18]},
		goal:  "Back up the {db} database on {host} before tonight's migration",
		steps: []step{
			{kind: "thought", tick: 1, text: "pg_dump in custom format; the backup role should have read access to {db}."},
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"pg_dump -h {host} -U backup -Fc {db} -f /var/backups/{db}.dump"}`},
			{kind: "result", call: 1, tool: "run_skill", fail: true, text: `pg_dump: error: connection to server at "{host}" (10.0.{a=n:1:9}.{b=n:10:250}), port 5432 failed: FATAL:  password authentication failed for user "backup"`},
			{kind: "thought", tick: 2, text: "The backup role has no entry in ~/.pgpass for {host}; use the credential from the vault."},
			{kind: "say", tick: 2, text: "{host} rejected the backup user's password; retrying with the credential from the vault."},
			{kind: "call", tick: 2, tool: "run_skill", text: `{"command":"PGPASSFILE=/run/secrets/pgpass pg_dump -h {host} -U backup -Fc {db} -f /var/backups/{db}-{date}.dump"}`},
			{kind: "note", call: 5, secs: 0, argv: "pg_dump -h {host} -U backup -Fc {db}", text: "dump finished", lines: []string{"pg_dump: saving {tables=n:20:400} tables", "wrote /var/backups/{db}-{date}.dump ({size=f:0.3:48} GB)"}},
			{kind: "say", tick: 3, done: true, text: "The {db} backup is done: /var/backups/{db}-{date}.dump, {size} GB, {tables} tables."},
		},
		qs: []fq{
			{[]int{2, 4}, []string{"why did the first try at backing up {db} fail?", "what went wrong signing in for the {db} dump?", "what error did the {db} backup run into at first?", "the {db} backup had a login problem, what was it?"}},
			{[]int{6, 7}, []string{"where did the {db} backup get written to?", "what's the path of the {db} database dump?", "which file holds the {db} backup from {host}?", "where can I find yesterday's {db} dump?"}},
			{[]int{6, 7}, []string{"how large was the {db} dump?", "what size did the {db} backup come out at?", "how many tables were saved in the {db} backup?", "how big is the backup of {db}?"}},
		},
	},
	{
		name: "disk-cleanup", key: "host",
		slots: map[string][]string{"host": hosts},
		goal:  "{host} is almost out of disk, / is at {pct=n:93:99}% — clean it up",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"du -xh --max-depth=2 / | sort -rh | head -6"}`},
			{kind: "result", call: 0, tool: "run_skill", text: "{dock=n:18:60}G\t/var/lib/docker\n{jour=n:4:19}G\t/var/log/journal\n{gocache=n:2:9}G\t/home/ci/.cache/go-build\n1.2G\t/usr/lib"},
			{kind: "thought", tick: 2, text: "Docker images dominate; prune unused images and vacuum the journal to 500M."},
			{kind: "call", tick: 2, tool: "run_skill", text: `{"command":"docker system prune -af --volumes"}`},
			{kind: "result", call: 3, tool: "run_skill", text: "Deleted Images: {imgs=n:12:140} untagged. Total reclaimed space: {rec=f:8:55}GB"},
			{kind: "call", tick: 2, tool: "run_skill", text: `{"command":"journalctl --vacuum-size=500M"}`},
			{kind: "result", call: 5, tool: "run_skill", text: "Vacuuming done, freed {jf=f:3:18}G of archived journal files from /var/log/journal."},
			{kind: "say", tick: 3, done: true, text: "Disk on {host} is now at {after=n:35:70}% used (was {pct}%): {rec} GB from Docker, {jf} GB of journal."},
		},
		qs: []fq{
			{[]int{1}, []string{"what was filling up the disk on {host}?", "which folders took the most room on {host}?", "what were the biggest directories on {host}?", "on {host}, what was hogging the drive?"}},
			{[]int{4, 7}, []string{"how much did clearing out docker free on {host}?", "how many gigabytes did the docker prune give back on {host}?", "how much space did removing old docker images recover on {host}?"}},
			{[]int{6, 7}, []string{"how much of the system journal got deleted on {host}?", "how much did vacuuming the logs free on {host}?"}},
			{[]int{7}, []string{"how full is the root partition on {host} after the cleanup?", "what's {host}'s disk usage now?"}},
		},
	},
	{
		name: "cert-renew", key: "domain",
		slots: map[string][]string{"domain": pool("shop.example.com", "api.acme.io", "grafana.internal.net", "mail.kairo.dev", "status.example.org", "docs.acme.io", "auth.example.com", "vpn.corp.example", "git.kairo.dev", "cdn.example.net")},
		goal:  "Renew the TLS certificate for {domain}, it expires in {days=n:2:9} days",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"certbot renew --cert-name {domain}"}`},
			{kind: "result", call: 0, tool: "run_skill", fail: true, text: "Challenge failed for domain {domain}: DNS problem: NXDOMAIN looking up TXT for _acme-challenge.{domain} - check that a DNS record exists for this domain"},
			{kind: "thought", tick: 2, text: "The DNS-01 hook has no API token; create the TXT record through the provider directly."},
			{kind: "call", tick: 2, tool: "run_skill", text: `{"command":"dns-txt-set _acme-challenge.{domain} --ttl 60"}`},
			{kind: "result", call: 3, tool: "run_skill", text: "TXT record _acme-challenge.{domain} created (TTL 60) at {prov=pick:Cloudflare|Route53|Gandi|Hetzner}"},
			{kind: "call", tick: 3, tool: "run_skill", text: `{"command":"certbot renew --cert-name {domain} --preferred-challenges dns"}`},
			{kind: "result", call: 5, tool: "run_skill", text: "Congratulations, all renewals succeeded: /etc/letsencrypt/live/{domain}/fullchain.pem (success). New certificate valid until {until}."},
			{kind: "say", tick: 4, done: true, text: "{domain} has a new certificate, valid until {until}; nginx reloaded."},
		},
		qs: []fq{
			{[]int{1}, []string{"why couldn't the ssl cert for {domain} be renewed at first?", "what blocked renewing the {domain} certificate?", "what was the acme challenge error for {domain}?"}},
			{[]int{4}, []string{"which dns provider hosts the {domain} zone?", "where was the challenge record for {domain} created?"}},
			{[]int{6, 7}, []string{"when does the new {domain} certificate expire?", "until what date is the {domain} cert good now?", "how long is the renewed tls cert of {domain} valid?"}},
		},
	},
	{
		name: "build-release", key: "project",
		slots: map[string][]string{"project": projects[:10]},
		goal:  "Build the release binaries of {project} for linux amd64 and arm64",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"make release PROJECT={project}"}`},
			{kind: "note", call: 0, fail: true, secs: 41, argv: "make release PROJECT={project}", text: "build failed", lines: []string{"internal/{pkg=pick:store|proto|auth|cache|sched}/{file=pick:codec|client|server|queue|index}.go:{line=n:20:480}:{col=n:2:40}: undefined: {sym=pick:NewDecoder|RetryPolicy|ParseHeader|WithTimeout|EncodeFrame}", "make: *** [Makefile:{ml=n:10:90}: build-linux-amd64] Error 1"}},
			{kind: "thought", tick: 2, text: "{sym} was renamed upstream; update the call site in {file}.go."},
			{kind: "call", tick: 2, tool: "run_skill", text: `{"command":"sed -i 's/{sym}/{sym}V2/' internal/{pkg}/{file}.go && make release PROJECT={project}"}`},
			{kind: "note", call: 3, secs: 0, argv: "make release PROJECT={project}", text: "build succeeded", lines: []string{"built dist/{project}-linux-amd64 ({s1=f:8:60} MB)", "built dist/{project}-linux-arm64 ({s2=f:8:60} MB)"}},
			{kind: "say", tick: 3, done: true, text: "{project} release built for amd64 and arm64 in dist/ after renaming {sym} to {sym}V2 in internal/{pkg}/{file}.go."},
		},
		qs: []fq{
			{[]int{1, 5}, []string{"which symbol was missing when compiling {project}?", "what compile error broke the {project} release build?", "why didn't {project} build the first time?"}},
			{[]int{4}, []string{"how big is the arm64 binary of {project}?", "what size are the {project} release artifacts?"}},
			{[]int{5}, []string{"what did you change to get {project} to compile?", "how did you fix the {project} build?"}},
		},
	},
	{
		name: "flaky-test", key: "project",
		slots: map[string][]string{"project": projects[10:]},
		goal:  "Run the whole test suite of {project} and tell me if anything fails",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"go test ./... -count=1"}`},
			{kind: "note", call: 0, fail: true, secs: 0, argv: "go test ./... -count=1", lines: []string{"--- FAIL: {test=pick:TestReconnectAfterTimeout|TestConcurrentFlush|TestLeaseRenewal|TestRetryBackoff|TestShutdownDrains} (30.01s)", "    {tf=pick:client|lease|flush|retry|drain}_test.go:{tl=n:40:300}: timed out waiting for ack", "FAIL", "{pass=n:150:900} passed, 1 failed"}},
			{kind: "thought", tick: 2, text: "A timeout in {test} with nothing else failing looks flaky; run it alone 20 times."},
			{kind: "call", tick: 2, tool: "run_skill", text: `{"command":"go test -run {test} -count=20 ./..."}`},
			{kind: "note", call: 3, fail: true, secs: 0, argv: "go test -run {test} -count=20 ./...", lines: []string{"--- FAIL: {test} (30.00s)", "FAIL: 2 of 20 runs timed out, 18 passed"}},
			{kind: "say", tick: 3, done: true, text: "{project}: {pass} tests pass; {test} is flaky (2 of 20 runs time out waiting for an ack), not a regression."},
		},
		qs: []fq{
			{[]int{1, 5}, []string{"which test broke in the {project} suite?", "what failed when running the {project} tests?"}},
			{[]int{1, 5}, []string{"how many tests passed for {project}?", "how many of the {project} tests were green?"}},
			{[]int{4, 5}, []string{"how often did the timing out {project} test fail when repeated?", "is the failing {project} test a real regression or intermittent?", "was the {project} failure flaky?"}},
		},
	},
	{
		name: "deploy", key: "service",
		slots: map[string][]string{"service": pool("checkout", "search-api", "notifications", "user-profile", "inventory-sync", "pricing", "recommendations", "media-upload", "ledger-api", "session-store")},
		goal:  "Deploy {service} version {ver=pick:v1.4.2|v2.0.0|v3.1.7|v0.9.12|v5.2.0} to staging",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"kubectl -n staging set image deploy/{service} {service}=registry.local/{service}:{ver}"}`},
			{kind: "result", call: 0, tool: "run_skill", text: "deployment.apps/{service} image updated"},
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"kubectl -n staging rollout status deploy/{service} --timeout=300s"}`},
			{kind: "note", call: 2, secs: 0, argv: "kubectl -n staging rollout status deploy/{service}", lines: []string{`Waiting for deployment "{service}" rollout to finish: {rep=n:2:6} of {rep} updated replicas are available...`, `deployment "{service}" successfully rolled out`}},
			{kind: "call", tick: 2, tool: "run_skill", text: `{"command":"curl -s -o /dev/null -w '%{http_code}' https://staging.internal/{service}/healthz"}`},
			{kind: "result", call: 4, tool: "run_skill", text: "503"},
			{kind: "thought", tick: 3, text: "503 right after a rollout is probably the readiness warm-up; check again in 30s."},
			{kind: "call", tick: 3, tool: "run_skill", text: `{"command":"sleep 30; curl -s https://staging.internal/{service}/healthz"}`},
			{kind: "result", call: 7, tool: "run_skill", text: `200 {"status":"ok","version":"{ver}","db":"connected"}`},
			{kind: "say", tick: 4, done: true, text: "{service} {ver} is live on staging with {rep} replicas; healthz answers 200 after a brief 503 during warm-up."},
		},
		qs: []fq{
			{[]int{3, 9}, []string{"did the {service} rollout to staging go through?", "how many replicas of {service} are up on staging?", "did the new {service} version get rolled out?"}},
			{[]int{5, 9}, []string{"what did the {service} health check return right after the deploy?", "was {service} unhealthy at first after shipping it?"}},
			{[]int{8, 9}, []string{"is {service} healthy on staging now?", "which version of {service} reports ok on staging?"}},
		},
	},
	{
		name: "bad-gateway", key: "site",
		slots:  map[string][]string{"site": pool("blog.acme.io", "portal.example.net", "admin.kairo.dev", "wiki.example.org", "store.acme.io", "tickets.example.com", "forum.kairo.dev", "app.example.net", "dash.acme.io", "careers.example.org"), "app": pool("gunicorn", "puma", "node", "uwsgi", "php-fpm")},
		derive: func(v map[string]string) { v["slug"] = strings.Split(v["site"], ".")[0] },
		goal:   "{site} keeps returning 502 Bad Gateway, find out why",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"tail -n 50 /var/log/nginx/error.log"}`},
			{kind: "result", call: 0, tool: "run_skill", text: `connect() failed (111: Connection refused) while connecting to upstream, client: 198.51.100.{c=n:2:250}, server: {site}, upstream: "http://127.0.0.1:{port=n:3000:9000}/"`},
			{kind: "call", tick: 2, tool: "run_skill", text: `{"command":"systemctl status {app}-{slug}"}`},
			{kind: "result", call: 2, tool: "run_skill", text: "{app}-{slug}.service - {site} backend\n   Active: failed (Result: oom-kill) since {date} 03:{mm=n:10:59}:12 UTC\n   Main PID: {pid=n:1000:60000} (code=killed, signal=KILL)"},
			{kind: "call", tick: 3, tool: "run_skill", text: `{"command":"systemctl restart {app}-{slug} && systemctl is-active {app}-{slug}"}`},
			{kind: "result", call: 4, tool: "run_skill", text: "active"},
			{kind: "say", tick: 4, done: true, text: "{site}'s backend ({app}) was OOM-killed at 03:{mm}; restarted it and the 502s stopped. Consider raising its MemoryMax."},
		},
		qs: []fq{
			{[]int{1}, []string{"which local port does {site} proxy to?", "what did the nginx error log say about {site}?", "what was the upstream address for {site}?"}},
			{[]int{3, 6}, []string{"what killed the app server behind {site}?", "why was the {site} backend down?", "what took {site} offline?"}},
			{[]int{6}, []string{"what should I do so the {site} backend doesn't die again?", "how do we prevent {site} from crashing again?"}},
		},
	},
	{
		name: "ssh-bruteforce", key: "host",
		slots: map[string][]string{"host": hosts},
		goal:  "How many failed SSH logins did {host} get in the last 24 hours?",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"journalctl -u ssh --since -24h | grep -c 'Failed password'"}`},
			{kind: "result", call: 0, tool: "run_skill", text: "{fails=n:300:9000}"},
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"journalctl -u ssh --since -24h | grep 'Failed password' | awk '{print $(NF-3)}' | sort | uniq -c | sort -rn | head -3"}`},
			{kind: "result", call: 2, tool: "run_skill", text: "{t1=n:100:900} 203.0.113.{ip1=n:2:250}\n {t2=n:50:99} 192.0.2.{ip2=n:2:250}\n {t3=n:10:49} 198.51.100.{ip3=n:2:250}"},
			{kind: "ask", tick: 2, text: "{fails} failed SSH password attempts on {host} in 24h; the top source, 203.0.113.{ip1}, made {t1}. Shall I ban it with fail2ban?"},
			{kind: "user", text: "yes, ban it"},
			{kind: "call", tick: 3, tool: "run_skill", text: `{"command":"fail2ban-client set sshd banip 203.0.113.{ip1}"}`},
			{kind: "result", call: 6, tool: "run_skill", text: "1"},
			{kind: "say", tick: 4, done: true, text: "Banned 203.0.113.{ip1} in the sshd jail on {host}."},
		},
		qs: []fq{
			{[]int{1, 4}, []string{"how many bad ssh passwords were tried on {host}?", "count of failed logins over ssh on {host}?"}},
			{[]int{3, 4, 8}, []string{"which address was hammering {host} with ssh guesses?", "where did most of the ssh brute force on {host} come from?", "top attacker ip against {host}?"}},
			{[]int{6, 8}, []string{"did you block the attacker on {host}?", "was the brute forcing ip on {host} banned?"}},
		},
	},
	{
		name: "memory-hog", key: "svc",
		slots: map[string][]string{"svc": pool("indexer", "cache-warmer", "etl-runner", "image-resizer", "ws-gateway", "crawler", "billing-worker", "event-router", "pdf-renderer", "stats-aggregator"), "host": hosts[:10]},
		goal:  "Why is {svc} using so much memory on {host}?",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"ps -o pid,rss,cmd -C {svc}"}`},
			{kind: "result", call: 0, tool: "run_skill", text: "  PID     RSS CMD\n{pid=n:1000:60000} {rss=n:3000000:9000000} /usr/local/bin/{svc} --config /etc/{svc}.yaml"},
			{kind: "call", tick: 2, tool: "run_skill", text: `{"command":"curl -s localhost:6060/debug/pprof/heap > /tmp/heap.out && go tool pprof -top -nodecount=3 /tmp/heap.out"}`},
			{kind: "result", call: 2, tool: "run_skill", text: "      flat  flat%  function\n {h1=f:1:5}GB {p1=n:55:85}%  {fn=pick:cache.(*LRU).Add|bytes.growSlice|json.(*decodeState).object|image.NewRGBA|proto.Unmarshal}\n  0.2GB  4%  runtime.malg"},
			{kind: "say", tick: 3, done: true, text: "{svc} holds {h1} GB in {fn} ({p1}% of the heap): the cache has no size bound. Set max_entries in /etc/{svc}.yaml."},
		},
		qs: []fq{
			{[]int{1}, []string{"how much RAM was {svc} holding on {host}?", "what was the resident size of the {svc} process?"}},
			{[]int{3, 4}, []string{"which function allocates most of {svc}'s heap?", "what's eating memory inside {svc}?", "where do the {svc} allocations come from?"}},
			{[]int{4}, []string{"what's the fix for {svc} growing so big?", "how do I stop {svc} from using that much memory?"}},
		},
	},
	{
		name: "git-rebase", key: "branch",
		slots: map[string][]string{"branch": pool("feature/oauth-pkce", "fix/race-in-flush", "feat/csv-export", "chore/bump-deps", "feature/dark-mode", "fix/tz-parsing", "feat/webhooks-v2", "refactor/store-iface", "feature/rate-limit", "fix/null-avatar"), "repo": pool("kairo", "ledgerd", "webapp", "infra")},
		goal:  "Rebase {branch} onto main in {repo} and push it",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"git -C ~/src/{repo} fetch origin && git -C ~/src/{repo} rebase origin/main {branch}"}`},
			{kind: "result", call: 0, tool: "run_skill", fail: true, text: "CONFLICT (content): Merge conflict in {cfile=pick:internal/api/handler.go|web/src/App.tsx|db/migrations/0042_users.sql|config/defaults.yaml|go.mod}\nerror: could not apply {sha=hex}... {msg=pick:add PKCE verifier|guard flush with mutex|export orders as CSV|bump golang.org/x/net|add theme toggle}"},
			{kind: "ask", tick: 2, text: "Rebasing {branch} conflicts in {cfile}. Keep main's version or the branch's?"},
			{kind: "user", text: "keep the branch version of that file"},
			{kind: "call", tick: 3, tool: "run_skill", text: `{"command":"git checkout --theirs {cfile} && git add {cfile} && GIT_EDITOR=true git rebase --continue && git push --force-with-lease origin {branch}"}`},
			{kind: "result", call: 4, tool: "run_skill", text: "Successfully rebased and updated refs/heads/{branch}.\n + {sha}...{sha2=hex} {branch} -> {branch} (forced update)"},
			{kind: "say", tick: 4, done: true, text: "{branch} is rebased on main, the conflict in {cfile} resolved with the branch's version, and force-pushed."},
		},
		qs: []fq{
			{[]int{1, 2}, []string{"which file had a merge conflict when rebasing {branch}?", "where did the rebase of {branch} get stuck?"}},
			{[]int{3, 6}, []string{"how was the conflict on {branch} resolved?", "whose side did we keep for the {branch} conflict?"}},
			{[]int{5, 6}, []string{"did {branch} get pushed after the rebase?", "is {branch} up on the remote now?"}},
		},
	},
	{
		name: "dep-upgrade", key: "lib",
		slots: map[string][]string{"lib": pool("github.com/redis/go-redis", "google.golang.org/grpc", "github.com/jackc/pgx", "github.com/aws/aws-sdk-go-v2", "github.com/prometheus/client_golang", "go.opentelemetry.io/otel", "github.com/spf13/cobra", "github.com/gorilla/websocket", "github.com/nats-io/nats.go", "golang.org/x/oauth2"), "project": projects},
		goal:  "Upgrade {lib} in {project} to the latest version",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"go get {lib}@latest && go build ./..."}`},
			{kind: "result", call: 0, tool: "run_skill", fail: true, text: "go: upgraded {lib} {old=pick:v8.11.5|v1.58.3|v4.18.1|v1.24.0|v0.9.4} => {new=pick:v9.7.0|v1.64.0|v5.7.2|v1.30.1|v1.2.0}\n./{bf=pick:cache|client|store|metrics|auth}.go:{bl=n:10:200}:{bc=n:2:30}: {berr=pick:too many arguments in call to client.Do|undefined: grpc.WithInsecure|cannot use conn as *pgxpool.Pool value|config.LoadDefaultAWSConfig undefined|not enough arguments in call to NewCounterVec}"},
			{kind: "thought", tick: 2, text: "The new major version changed the API; adapt {bf}.go and rebuild."},
			{kind: "call", tick: 2, tool: "edit_file", text: `{"path":"{bf}.go","line":{bl}}`},
			{kind: "result", call: 3, tool: "edit_file", text: "edited {bf}.go"},
			{kind: "call", tick: 3, tool: "run_skill", text: `{"command":"go build ./... && go test ./..."}`},
			{kind: "result", call: 5, tool: "run_skill", text: "ok: build and {tn=n:40:400} tests pass"},
			{kind: "say", tick: 4, done: true, text: "{lib} upgraded {old} → {new} in {project}; fixed {bf}.go for the API change ({berr}). Build and tests pass."},
		},
		qs: []fq{
			{[]int{1, 7}, []string{"what broke in {project} when bumping {lib}?", "which api change did the {lib} update bring?"}},
			{[]int{1, 7}, []string{"which version did {lib} go to?", "what release of {lib} are we on after the upgrade?"}},
			{[]int{6, 7}, []string{"is {project} building again after the {lib} update?", "do the tests pass after upgrading {lib}?"}},
		},
	},
	{
		name: "cron", key: "script",
		slots: map[string][]string{"script": pool("rotate-logs.sh", "sync-reports.py", "prune-snapshots.sh", "refresh-cache.sh", "export-metrics.py", "vacuum-db.sh", "send-digest.py", "renew-tokens.sh", "reindex-search.sh", "archive-uploads.sh")},
		goal:  "Schedule {script} to run every night at {hh=n:1:5}:{mm=pick:00|15|30|45}",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"(crontab -l; echo '{mm} {hh} * * * /opt/jobs/{script} >> /var/log/{script}.log 2>&1') | crontab -"}`},
			{kind: "result", call: 0, tool: "run_skill", text: "crontab installed: {entries=n:3:12} entries"},
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"crontab -l | grep {script}"}`},
			{kind: "result", call: 2, tool: "run_skill", text: "{mm} {hh} * * * /opt/jobs/{script} >> /var/log/{script}.log 2>&1"},
			{kind: "say", tick: 2, done: true, text: "{script} runs daily at {hh}:{mm}; its output goes to /var/log/{script}.log."},
		},
		qs: []fq{
			{[]int{3, 4}, []string{"at what time does {script} run each night?", "when is {script} scheduled?", "what's the crontab entry for {script}?"}},
			{[]int{3, 4}, []string{"where does the output of {script} get logged?", "which log file does {script} write to?"}},
		},
	},
	{
		name: "unreachable", key: "remote",
		slots: map[string][]string{"remote": pool("packages.internal", "s3.eu-west-1.amazonaws.com", "ldap.corp.example", "smtp.mailhub.net", "registry.internal", "ntp.pool.example", "vault.internal", "kafka-2.internal", "metrics.example.net", "sentry.internal"), "host": hosts[:10]},
		goal:  "{host} can't reach {remote}, figure out what's wrong",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"ping -c 4 {remote}"}`},
			{kind: "result", call: 0, tool: "run_skill", fail: true, text: "4 packets transmitted, 0 received, 100% packet loss"},
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"traceroute -n {remote}"}`},
			{kind: "result", call: 2, tool: "run_skill", text: " 1  10.20.{x=n:0:9}.1  0.4 ms\n 2  10.20.0.254  1.1 ms\n 3  * * *\n 4  * * *"},
			{kind: "call", tick: 2, tool: "run_skill", text: `{"command":"iptables -S OUTPUT | grep -n DROP"}`},
			{kind: "result", call: 4, tool: "run_skill", text: "{rule=n:3:19}:-A OUTPUT -d {net=pick:10.30.0.0/16|172.16.8.0/22|10.99.0.0/16|192.168.40.0/24} -p tcp -m tcp --dport {rport=pick:443|389|587|5000|9092} -j DROP"},
			{kind: "ask", tick: 3, text: "{host}'s OUTPUT chain drops tcp/{rport} to {net} (rule {rule}), which covers {remote}. Remove the rule?"},
		},
		status: "canceled",
		qs: []fq{
			{[]int{3}, []string{"where did packets to {remote} stop?", "what was the last hop that answered on the way to {remote}?"}},
			{[]int{5, 6}, []string{"which firewall rule was blocking {host} from talking to {remote}?", "was an iptables drop the reason {remote} was unreachable?", "which port was being dropped toward {remote}?"}},
			{[]int{1}, []string{"did {remote} answer pings from {host}?", "how much packet loss was there to {remote}?"}},
		},
	},
	{
		name: "docker-shrink", key: "image",
		slots: map[string][]string{"image": pool("api-server", "worker", "frontend", "ml-serving", "cron-runner", "gateway", "report-builder", "auth-proxy", "scraper", "ingest")},
		goal:  "Make the {image} docker image smaller, it's huge",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"docker image ls registry.local/{image} --format '{{.Size}}'"}`},
			{kind: "result", call: 0, tool: "run_skill", text: "{before=f:0.8:3.9}GB"},
			{kind: "thought", tick: 2, text: "Multi-stage build: compile in golang:1.22, copy only the binary into distroless static."},
			{kind: "call", tick: 2, tool: "run_skill", text: `{"command":"docker build -f Dockerfile.multistage -t registry.local/{image}:slim ."}`},
			{kind: "note", call: 3, secs: 0, argv: "docker build -f Dockerfile.multistage -t registry.local/{image}:slim .", lines: []string{"Successfully tagged registry.local/{image}:slim", "image size {after=n:18:190}MB"}},
			{kind: "say", tick: 3, done: true, text: "{image}: {before}GB → {after}MB with a multi-stage build on distroless."},
		},
		qs: []fq{
			{[]int{1, 5}, []string{"how big was the {image} image before slimming it?", "what did the {image} container weigh originally?"}},
			{[]int{4, 5}, []string{"how small did the {image} image end up?", "what's the new size of {image}?"}},
			{[]int{5}, []string{"how did you cut down the {image} image?", "what technique shrank {image}?"}},
		},
	},
	{
		name: "csv-export", key: "table",
		slots: map[string][]string{"table": pool("orders", "invoices", "refunds", "signups", "shipments", "subscriptions", "tickets", "payouts", "reviews", "returns")},
		goal:  "Export last month's {table} to CSV for finance",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"psql -c \"\\copy (SELECT * FROM {table} WHERE created_at >= date_trunc('month', now()) - interval '1 month') TO '/srv/exports/{table}-{month}.csv' CSV HEADER\""}`},
			{kind: "result", call: 0, tool: "run_skill", text: "COPY {rows=n:1200:98000}"},
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"ls -lh /srv/exports/{table}-{month}.csv"}`},
			{kind: "result", call: 2, tool: "run_skill", text: "-rw-r----- 1 postgres finance {mb=f:0.4:60}M {date} /srv/exports/{table}-{month}.csv"},
			{kind: "say", tick: 2, done: true, text: "Exported {rows} {table} rows to /srv/exports/{table}-{month}.csv ({mb} MB), readable by the finance group."},
		},
		qs: []fq{
			{[]int{1, 4}, []string{"how many rows were in the {table} export?", "how many {table} records went into the spreadsheet?", "how many lines did the {table} extract for finance have?"}},
			{[]int{3, 4}, []string{"where can I find the {table} csv file?", "what's the path of last month's {table} export?"}},
		},
	},
	{
		name: "load-test", key: "endpoint",
		slots: map[string][]string{"endpoint": pool("/api/search", "/api/checkout", "/v1/quotes", "/graphql", "/api/feed", "/v2/orders", "/api/login", "/v1/tiles", "/api/reports", "/v1/upload")},
		goal:  "Benchmark {endpoint} on staging: latency and throughput at 200 concurrent connections",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"wrk -t8 -c200 -d60s https://staging.internal{endpoint}"}`},
			{kind: "note", call: 0, secs: 60, argv: "wrk -t8 -c200 -d60s https://staging.internal{endpoint}", lines: []string{"Latency   {avg=n:20:200}ms avg, {p99=n:250:1900}ms p99", "Requests/sec: {rps=n:300:9000}", "Non-2xx responses: {errs=n:0:400}"}},
			{kind: "say", tick: 2, done: true, text: "{endpoint}: {rps} req/s at 200 connections, {avg} ms average, {p99} ms p99, {errs} non-2xx responses."},
		},
		qs: []fq{
			{[]int{1, 2}, []string{"what was the tail latency of {endpoint} under load?", "how slow were the worst {endpoint} requests in the benchmark?"}},
			{[]int{1, 2}, []string{"how many requests per second could {endpoint} handle?", "what throughput did {endpoint} reach?"}},
			{[]int{1, 2}, []string{"how many errors did {endpoint} return during the load test?", "did {endpoint} fail any requests when stressed?"}},
		},
	},
	{
		name: "new-user", key: "user",
		slots: map[string][]string{"user": pool("alice", "bob", "carol", "dmitri", "esther", "farid", "grace", "hiro", "ines", "jamal"), "host": hosts},
		goal:  "Create an account for {user} on {host} with sudo rights",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"useradd -m -s /bin/bash -G sudo,docker {user}"}`},
			{kind: "result", call: 0, tool: "run_skill", text: "user {user} created (uid {uid=n:1001:1099})"},
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"install -d -m 700 -o {user} /home/{user}/.ssh && cp /tmp/{user}.pub /home/{user}/.ssh/authorized_keys"}`},
			{kind: "result", call: 2, tool: "run_skill", text: "authorized_keys installed for {user} ({kt=pick:ed25519|rsa 4096|ecdsa} key, fingerprint SHA256:{fp=hex})"},
			{kind: "say", tick: 2, done: true, text: "{user} can log in to {host} with their {kt} key; member of sudo and docker."},
		},
		qs: []fq{
			{[]int{1}, []string{"what uid did {user} get on {host}?", "which user id was assigned to {user}?"}},
			{[]int{3, 4}, []string{"what kind of ssh key does {user} use?", "which key type did {user} send us?"}},
			{[]int{0, 4}, []string{"which groups is {user} in on {host}?", "can {user} run admin commands on {host}?"}},
		},
	},
	{
		name: "dns-change", key: "name",
		slots: map[string][]string{"name": pool("www.acme.io", "api.example.net", "files.kairo.dev", "img.example.org", "m.acme.io", "go.example.com", "assets.kairo.dev", "beta.example.net", "eu.acme.io", "static.example.org")},
		goal:  "Point {name} at the new load balancer",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"dns-set A {name} {lbip=ip} --ttl 300"}`},
			{kind: "result", call: 0, tool: "run_skill", text: "A record {name} -> {lbip} (TTL 300), old value {oldip=ip}"},
			{kind: "call", tick: 2, tool: "run_skill", text: `{"command":"dig +short {name} @1.1.1.1"}`},
			{kind: "result", call: 2, tool: "run_skill", text: "{lbip}"},
			{kind: "say", tick: 3, done: true, text: "{name} now resolves to {lbip} (was {oldip}); with a 300 s TTL, caches should pick it up within 5 minutes."},
		},
		qs: []fq{
			{[]int{1, 3, 4}, []string{"what ip does {name} resolve to now?", "what address is {name} pointing at after the switch?"}},
			{[]int{1, 4}, []string{"what did {name} point to before the change?", "what was the previous address of {name}?"}},
			{[]int{4}, []string{"how long until the {name} change propagates?", "when will everyone see the new {name} record?"}},
		},
	},
	{
		name: "openssl-patch", key: "host",
		slots: map[string][]string{"host": hosts},
		goal:  "Patch the OpenSSL vulnerability on {host}",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"apt-get install -y --only-upgrade openssl libssl3"}`},
			{kind: "note", call: 0, secs: 0, argv: "apt-get install -y --only-upgrade openssl libssl3", lines: []string{"Unpacking libssl3 ({v2=pick:3.0.2-0ubuntu1.18|3.0.13-0ubuntu3.4|3.0.11-1~deb12u3}) over ({v1=pick:3.0.2-0ubuntu1.15|3.0.13-0ubuntu3.1|3.0.11-1~deb12u2}) ...", "Setting up openssl ({v2}) ..."}},
			{kind: "call", tick: 2, tool: "run_skill", text: `{"command":"needrestart -b"}`},
			{kind: "result", call: 2, tool: "run_skill", text: "NEEDRESTART-SVC: {svc1=pick:nginx.service|haproxy.service|postfix.service}\nNEEDRESTART-SVC: {svc2=pick:sshd.service|dovecot.service|php8.2-fpm.service}"},
			{kind: "call", tick: 3, tool: "run_skill", text: `{"command":"systemctl restart {svc1} {svc2}"}`},
			{kind: "result", call: 4, tool: "run_skill", text: "restarted"},
			{kind: "say", tick: 4, done: true, text: "OpenSSL on {host} upgraded {v1} → {v2}; restarted {svc1} and {svc2}, which had the old library loaded."},
		},
		qs: []fq{
			{[]int{1, 6}, []string{"which openssl version is on {host} now?", "what libssl package did {host} get?"}},
			{[]int{3, 6}, []string{"which services had to be restarted after the openssl update on {host}?", "what daemons still used the old ssl library on {host}?"}},
		},
	},
	{
		name: "s3-sync", key: "bucket",
		slots: map[string][]string{"bucket": pool("acme-backups", "kairo-artifacts", "media-archive", "logs-cold", "ml-datasets", "finance-exports", "static-assets", "db-snapshots", "research-data", "user-uploads")},
		goal:  "Sync /srv/{dir=pick:media|reports|datasets|builds|uploads} to the {bucket} bucket",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"aws s3 sync /srv/{dir} s3://{bucket}/{dir} --only-show-errors"}`},
			{kind: "note", call: 0, fail: true, secs: 0, argv: "aws s3 sync /srv/{dir} s3://{bucket}/{dir} --only-show-errors", text: "synced {gb=f:1:90} GB", lines: []string{"upload failed: /srv/{dir}/{fname=pick:2024/q4/summary.pdf|raw/cam-03/0001.mp4|train/shard-0007.parquet|v2.3.1/app.tar.gz|avatars/8812.png} to s3://{bucket}/{dir}/{fname} An error occurred (AccessDenied) when calling the PutObject operation: Access Denied", "{nfail=n:2:40} of {nfiles=n:800:9000} files failed"}},
			{kind: "thought", tick: 2, text: "The failures are all under one prefix; the bucket policy probably has an explicit deny there."},
			{kind: "say", tick: 2, done: true, text: "Synced {gb} GB of /srv/{dir} to {bucket}; {nfail} files failed with AccessDenied — the bucket policy refuses PutObject under that prefix."},
		},
		qs: []fq{
			{[]int{1, 3}, []string{"why did some uploads to {bucket} fail?", "what error stopped files from landing in {bucket}?"}},
			{[]int{1, 3}, []string{"how many files didn't make it to {bucket}?", "how much data was copied to {bucket}?"}},
		},
	},
	{
		name: "fine-tune", key: "model",
		slots: map[string][]string{"model": pool("llama-3-8b", "mistral-7b", "bert-base", "t5-large", "whisper-small", "resnet50", "vit-b16", "qwen2-7b", "phi-3-mini", "clip-vit-l"), "dataset": pool("support-tickets", "legal-clauses", "product-reviews", "call-transcripts", "medical-notes")},
		goal:  "Fine-tune {model} on the {dataset} dataset",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"python train.py --model {model} --data {dataset} --batch-size 64"}`},
			{kind: "note", call: 0, fail: true, secs: 95, argv: "python train.py --model {model} --data {dataset} --batch-size 64", lines: []string{"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {alloc=f:1:9} GiB (GPU 0; {vram=pick:24|40|80} GiB total capacity)"}},
			{kind: "thought", tick: 2, text: "Quarter the batch and accumulate gradients over 4 steps to keep the effective batch at 64."},
			{kind: "call", tick: 2, tool: "run_skill", text: `{"command":"python train.py --model {model} --data {dataset} --batch-size 16 --grad-accum 4"}`},
			{kind: "note", call: 3, secs: 0, argv: "python train.py --model {model} --data {dataset} --batch-size 16 --grad-accum 4", lines: []string{"epoch 3/3  train_loss {loss=f:0.1:0.9}  eval_loss {eloss=f:0.2:1.2}", "saved checkpoint to /models/{model}-{dataset}/final"}},
			{kind: "say", tick: 3, done: true, text: "{model} fine-tuned on {dataset}: eval loss {eloss} after 3 epochs, checkpoint in /models/{model}-{dataset}/final (batch 16 × 4 accumulation after running out of GPU memory at 64)."},
		},
		qs: []fq{
			{[]int{1, 5}, []string{"why did the {model} training crash?", "what went wrong with the {model} fine-tune at first?"}},
			{[]int{4, 5}, []string{"what loss did {model} reach on {dataset}?", "how well did the {model} run on {dataset} converge?"}},
			{[]int{4, 5}, []string{"where's the finished {model} checkpoint?", "where were the trained {model} weights saved?"}},
		},
	},
	{
		name: "slow-query", key: "page",
		slots: map[string][]string{"page": pool("orders page", "customer dashboard", "search results page", "invoice list", "admin report", "shipping tracker", "loyalty page", "billing history", "product catalog", "audit log viewer")},
		goal:  "The {page} is slow, find the slow query",
		steps: []step{
			{kind: "call", tick: 1, tool: "run_skill", text: `{"command":"psql -c \"SELECT query, mean_exec_time FROM pg_stat_statements ORDER BY mean_exec_time DESC LIMIT 3\""}`},
			{kind: "result", call: 0, tool: "run_skill", text: "SELECT * FROM {tbl=pick:order_items|customers|events|invoices|shipments} WHERE {col=pick:customer_id|email|created_at|status|tracking_no} = $1 | {ms=n:800:9000} ms"},
			{kind: "call", tick: 2, tool: "run_skill", text: `{"command":"psql -c \"CREATE INDEX CONCURRENTLY ON {tbl} ({col})\""}`},
			{kind: "result", call: 2, tool: "run_skill", text: "CREATE INDEX"},
			{kind: "call", tick: 2, tool: "run_skill", text: `{"command":"psql -c \"EXPLAIN ANALYZE SELECT * FROM {tbl} WHERE {col} = 42\""}`},
			{kind: "result", call: 4, tool: "run_skill", text: "Index Scan using {tbl}_{col}_idx on {tbl}  (cost=0.43..8.45 rows=1) Execution Time: {ms2=f:0.3:9} ms"},
			{kind: "say", tick: 3, done: true, text: "The {page} was slow because {tbl} had no index on {col} ({ms} ms a query); added one, now {ms2} ms."},
		},
		qs: []fq{
			{[]int{1, 6}, []string{"which query was dragging down the {page}?", "what was the slowest sql behind the {page}?"}},
			{[]int{5, 6}, []string{"how fast is the {page} query after adding the index?", "what's the execution time for the {page} lookup now?"}},
			{[]int{6}, []string{"what fixed the slow {page}?", "why was the {page} so sluggish?"}},
		},
	},
}

// instance is one run of a family: its slots filled.
type instance struct {
	f    *family
	r    *rand.Rand
	vals map[string]string
}

var placeholder = regexp.MustCompile(`\{([a-z0-9]+)(?:=([a-z]+)(?::([^}]*))?)?\}`)

// fill renders a template, drawing the values it defines.
func (in *instance) fill(tmpl string) string {
	return placeholder.ReplaceAllStringFunc(tmpl, func(m string) string {
		p := placeholder.FindStringSubmatch(m)
		name, kind, spec := p[1], p[2], p[3]
		if kind == "" {
			v, ok := in.vals[name]
			if !ok {
				panic(fmt.Sprintf("family %s: {%s} used before it is defined", in.f.name, name))
			}
			return v
		}
		var v string
		switch kind {
		case "n", "f":
			var lo, hi float64
			fmt.Sscanf(strings.ReplaceAll(spec, ":", " "), "%g %g", &lo, &hi)
			x := lo + in.r.Float64()*(hi-lo)
			if kind == "n" {
				v = fmt.Sprint(int(x))
			} else {
				v = fmt.Sprintf("%.1f", x)
			}
		case "pick":
			opts := strings.Split(spec, "|")
			v = opts[in.r.IntN(len(opts))]
		case "ip":
			v = fmt.Sprintf("203.0.%d.%d", 100+in.r.IntN(50), 2+in.r.IntN(250))
		case "hex":
			v = fmt.Sprintf("%07x", in.r.Uint32()&0xfffffff)
		default:
			panic(fmt.Sprintf("family %s: unknown spec %q", in.f.name, m))
		}
		in.vals[name] = v
		return v
	})
}

// newInstance fills a family's slots: key is the key slot's value, the
// other slots drawn from r.
func newInstance(f *family, key string, r *rand.Rand, started time.Time) *instance {
	in := &instance{f: f, r: r, vals: map[string]string{}}
	// In a fixed order: the draws must not depend on map iteration.
	for _, name := range slices.Sorted(maps.Keys(f.slots)) {
		if vals := f.slots[name]; name != f.key {
			in.vals[name] = vals[r.IntN(len(vals))]
		}
	}
	in.vals[f.key] = key
	in.vals["date"] = started.Format("2006-01-02")
	in.vals["until"] = started.AddDate(0, 0, 90).Format("2006-01-02")
	in.vals["month"] = started.AddDate(0, -1, 0).Format("2006-01")
	if f.derive != nil {
		f.derive(in.vals)
	}
	return in
}

// loopSpec is a run loop as the recall set stores it: readable, and turned
// into bus events by events().
type loopSpec struct {
	ID      string     `json:"id"`
	Family  string     `json:"family"`
	Started time.Time  `json:"started"`
	Goal    string     `json:"goal"`
	Steps   []stepSpec `json:"steps"`
	Status  string     `json:"status"`
	Summary string     `json:"summary,omitempty"`
}

type stepSpec struct {
	Kind  string   `json:"kind"`
	Tick  uint64   `json:"tick,omitempty"`
	Tool  string   `json:"tool,omitempty"`
	Text  string   `json:"text,omitempty"`
	Fail  bool     `json:"fail,omitempty"`
	Call  int      `json:"call,omitempty"`
	Secs  int      `json:"secs,omitempty"`
	Argv  string   `json:"argv,omitempty"`
	Lines []string `json:"lines,omitempty"`
	Done  bool     `json:"done,omitempty"`
}

// spec renders the instance as a run loop.
func (in *instance) spec(id string, started time.Time) loopSpec {
	l := loopSpec{ID: id, Family: in.f.name, Started: started, Goal: in.fill(in.f.goal), Status: in.f.status}
	if l.Status == "" {
		l.Status = "done"
	}
	for _, s := range in.f.steps {
		ss := stepSpec{Kind: s.kind, Tick: s.tick, Tool: s.tool, Text: in.fill(s.text), Fail: s.fail, Call: s.call, Argv: in.fill(s.argv), Done: s.done}
		ss.Secs = s.secs
		if s.kind == "note" && ss.Secs == 0 {
			ss.Secs = 5 + in.r.IntN(900)
		}
		for _, line := range s.lines {
			ss.Lines = append(ss.Lines, in.fill(line))
		}
		l.Steps = append(l.Steps, ss)
		if s.done {
			l.Summary = ss.Text
		}
	}
	if l.Status != "done" {
		l.Summary = "canceled by the user before the last step"
	}
	return l
}
