package main

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/internal/llmscript"
)

// Secrets by handle through a real `kairo up`: skills that name a secret
// in their [secrets] get it, as a variable, a file and a handle's value,
// and what they print of it reads ***deploy*** wherever it is kept or
// shown; a skill that does not name it, and a skill's child unless its
// manifest says so, do not get it; a handle passed to a skill that names
// it is resolved, and refused for one that does not. One daemon serves
// every part: the default agent runs the LLM policy against a scripted
// model, the agent ops the rules; the last part looks for the values
// everywhere the daemon kept or showed something.

// printerSkill prints its secret as the variable, the file and base64,
// the SHA-256 of the variable and of its second argument (a handle's
// value), its param, and its secrets folder with its mode and the file's:
// each line but the marker is about the secret.
const printerSkill = `[skill]
name = "printer"
description = "prints its secret"
command = ["/usr/bin/sh", "-c", '''
echo "marker=printer-ran"
echo "token=$DEPLOY_TOKEN"
echo "file=$(cat "$KAIRO_SECRETS/deploy")"
echo "b64=$(printf %s "$DEPLOY_TOKEN" | base64)"
echo "sha=$(printf %s "$DEPLOY_TOKEN" | sha256sum | cut -c1-64)"
echo "word=$1 arg=$2"
echo "argsha=$(printf %s "$2" | sha256sum | cut -c1-64)"
echo "dir=$KAIRO_SECRETS"
echo "mode=$(stat -c %a "$KAIRO_SECRETS" "$KAIRO_SECRETS/deploy" | tr '\n' ' ')"
''', "sh", "{word}"]

[params.word]
description = "a word to print"
default = "plain"

[secrets]
env = { DEPLOY_TOKEN = "deploy" }
files = ["deploy"]
` + systemGrants

// otherSkill names no secret: what it would get of one, it prints.
const otherSkill = `[skill]
name = "other"
description = "names no secret"
command = ["/usr/bin/sh", "-c", '''
echo "marker=other-ran"
echo "token=${DEPLOY_TOKEN:-unset}"
ls "$KAIRO_SECRETS" >/dev/null 2>&1 && echo "ls=listed" || echo "ls=failed"
echo "word=$1 arg=$2"
''', "sh", "{word}"]

[params.word]
description = "a word to print"
default = "plain"
` + systemGrants

// childScript prints the SHA-256 of the skill's own DEPLOY_TOKEN, then
// runs through the kernel a command that prints what it got of the
// secret.
const childScript = `echo "parent=$(printf %s "$DEPLOY_TOKEN" | sha256sum | cut -c1-64)"
$K spawn -- /usr/bin/sh -c 'echo "child=${DEPLOY_TOKEN:-unset}"; echo "childfile=$(cat "$KAIRO_SECRETS/deploy" 2>/dev/null || echo none)"; echo "childsha=$(printf %s "$DEPLOY_TOKEN" | sha256sum | cut -c1-64)"' 2>&1`

// byNameScript runs the skill printer through the kernel, the handle its
// argument.
const byNameScript = `$K spawn --skill printer secret:deploy 2>&1 | sed 's/^/byname:/'`

// spawnerSkill is a skill called name that runs script, in which $K is
// kairo; secrets is its [secrets] table, "" for none.
func spawnerSkill(name, script, secrets string) string {
	script = "K=" + kairoBin + "\n" + script
	return `[skill]
name = "` + name + `"
description = "runs a command and printer through the kernel"
command = ["/usr/bin/sh", "-c", '''` + script + `''']

[fs]
read = ["/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache", "` + filepath.Dir(kairoBin) + `"]
write = ["$WORK"]
exec = ["/usr/bin", "` + kairoBin + `"]

[ipc]
call = ["process.spawn", "process.wait", "process.stdin.write"]
` + secrets
}

// setSecret writes value as the secret name of home's store, as `kairo
// secrets set` does: a 0600 file in a 0700 folder, renamed into place.
func setSecret(t *testing.T, home, name, value string) {
	t.Helper()
	dir := filepath.Join(home, "secrets")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "."+name+".new")
	if err := os.WriteFile(tmp, []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// secretValue is a fresh value for a secret: no test run reuses it.
func secretValue(t *testing.T) string {
	t.Helper()
	b := make([]byte, 9)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "e2e-" + hex.EncodeToString(b)
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// forbidden are the forms of values a masked store or stream must not
// hold: each value, its base64 and its hex.
func forbidden(values ...string) []string {
	var out []string
	for _, v := range values {
		out = append(out, v, base64.StdEncoding.EncodeToString([]byte(v)), hex.EncodeToString([]byte(v)))
	}
	return out
}

// leaked is the first of needles in b with what surrounds it, "" for
// none.
func leaked(b []byte, needles []string) string {
	for _, n := range needles {
		if i := strings.Index(string(b), n); i >= 0 {
			return fmt.Sprintf("%q in %q", n, b[max(0, i-300):min(len(b), i+len(n)+100)])
		}
	}
	return ""
}

// collect runs cmd, collecting its stdout until it ends; the returned
// function stops it, after a grace for it to end by itself, and returns
// what it printed.
func collect(t *testing.T, cmd *exec.Cmd) func() string {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := &syncBuffer{}
	done := make(chan struct{})
	go func() {
		io.Copy(buf, out)
		close(done)
	}()
	stop := func() string {
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		cmd.Wait()
		return buf.String()
	}
	t.Cleanup(func() { cmd.Process.Kill(); <-done; cmd.Wait() })
	return stop
}

// consoleAPI is the console of a running daemon, asked with its token.
type consoleAPI struct {
	base, token string
	c           *http.Client
}

func openConsole(t *testing.T, home string) *consoleAPI {
	t.Helper()
	r := kairo(t, home, "console", "--print")
	u := strings.TrimSpace(r.stdout)
	base, _, ok := strings.Cut(u, "/?token=")
	tok, err := os.ReadFile(filepath.Join(home, "console.token"))
	if r.code != 0 || !ok || err != nil {
		t.Fatalf("kairo console --print: %s (%v)", r, err)
	}
	return &consoleAPI{base: base, token: strings.TrimSpace(string(tok)), c: &http.Client{}}
}

func (a *consoleAPI) request(t *testing.T, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, a.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	res, err := a.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, b)
	}
	return res
}

func (a *consoleAPI) get(t *testing.T, path string) []byte {
	t.Helper()
	res := a.request(t, path)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stream reads the console's event stream from the first event, with the
// processes' output, until the daemon ends it.
func (a *consoleAPI) stream(t *testing.T) func() string {
	t.Helper()
	res := a.request(t, "/api/stream?from=0")
	buf := &syncBuffer{}
	done := make(chan struct{})
	go func() {
		io.Copy(buf, res.Body)
		close(done)
	}()
	t.Cleanup(func() { res.Body.Close(); <-done })
	return func() string {
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			res.Body.Close()
			<-done
		}
		return buf.String()
	}
}

// secretUses are the kairo.secret.used events of the log, by process.
func secretUses(t *testing.T, home string) map[string][]map[string]any {
	t.Helper()
	out := map[string][]map[string]any{}
	for _, ev := range eventLog(t, home) {
		if ev.Type == "kairo.secret.used" {
			id, _ := ev.Data["processId"].(string)
			out[id] = append(out[id], ev.Data)
		}
	}
	return out
}

// usesOf are the "as" of the uses of the secret deploy by the runs of
// skill, each run's sorted and joined by ", ", the runs sorted.
func usesOf(uses map[string][]map[string]any, skill string) []string {
	var runs []string
	for _, us := range uses {
		var as []string
		for _, u := range us {
			if u["skill"] == skill && u["name"] == "deploy" {
				as = append(as, fmt.Sprint(u["as"]))
			}
		}
		if len(as) > 0 {
			slices.Sort(as)
			runs = append(runs, strings.Join(as, ", "))
		}
	}
	slices.Sort(runs)
	return runs
}

// TestSecrets: see the top of the file. Each denial beside its control.
func TestSecrets(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	old, rotated := secretValue(t), secretValue(t)
	setSecret(t, home, "deploy", old)
	installSkill(t, home, "printer", printerSkill)
	installSkill(t, home, "other", otherSkill)
	const holds = "\n[secrets]\nenv = { DEPLOY_TOKEN = \"deploy\" }\nfiles = [\"deploy\"]\n"
	installSkill(t, home, "keeper", spawnerSkill("keeper", childScript, holds+"children = false\n"))
	installSkill(t, home, "giver", spawnerSkill("giver", childScript, holds+"children = true\n"))
	installSkill(t, home, "plain", spawnerSkill("plain", byNameScript, ""))

	m := &recordingModel{}
	m.model = &llmscript.Server{Think: llmscript.Summarizing(func(n int, system, prompt string) map[string]any {
		s := llmscript.Read(prompt)
		task := s.Task("deploy with the model")
		switch last := s.Last(); {
		case last.Text == "deploy with the model":
			return llmscript.Calls("skill_printer", map[string]any{"word": "secret:deploy", "answers": last.Label})
		case last.Text == "" && task != nil && len(task.Running) == 0 && strings.Contains(prompt, "exited with code"):
			return llmscript.Actions(map[string]any{"type": "say", "text": "Deployed.", "done": true, "runLoopId": task.ID})
		}
		return llmscript.Noop()
	})}
	srv := httptest.NewServer(m)
	defer srv.Close()
	writeConfig(t, home, llmConfig(t, srv.URL)+`
[console]
listen = "127.0.0.1:0"

[agents.ops]
policy = "rules"
description = "runs skills"
[agents.ops.grants]
skills = ["*"]

[mcp.leaky]
command = ["/usr/bin/sh", "-c", "echo token=$DEPLOY_TOKEN >&2; exit 3"]
[mcp.leaky.secrets]
env = { DEPLOY_TOKEN = "deploy" }
`)
	d := startUp(t, home)
	tail := exec.Command(kairoBin, "events", "tail", "--from", "1", "--json")
	tail.Env = childEnv(home)
	tailed := collect(t, tail)
	con := openConsole(t, home)
	streamed := con.stream(t)
	ops := func(t *testing.T, text string) string {
		t.Helper()
		r := kairo(t, home, "send", "@ops "+text)
		if r.code != 0 {
			t.Fatalf("send @ops %s:\n%s\n%s", text, r, d.stderr)
		}
		return r.stdout
	}
	// wants fails unless out holds every line of want.
	wants := func(t *testing.T, what, out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s lacks %q:\n%s", what, w, out)
			}
		}
		if n := leaked([]byte(out), forbidden(old, rotated)); n != "" {
			t.Errorf("%s holds the secret: %s", what, n)
		}
	}

	// 0. An MCP server given the secret writes it on stderr and exits:
	// the daemon logs the failure with the server's stderr, which reads
	// ***deploy*** in kairo.log and in kairo.mcp.failed.
	t.Run("logged", func(t *testing.T) {
		log := filepath.Join(home, "kairo.log")
		until(t, "the MCP server's failure in kairo.log", func() bool {
			b, _ := os.ReadFile(log)
			return strings.Contains(string(b), "an MCP server cannot serve the agent")
		})
		b, _ := os.ReadFile(log)
		wants(t, "kairo.log", string(b), "token=***deploy***")
		failed := false
		for _, ev := range eventLog(t, home) {
			failed = failed || ev.Type == "kairo.mcp.failed" && strings.Contains(fmt.Sprint(ev.Data), "token=***deploy***")
		}
		if !failed {
			t.Error("no kairo.mcp.failed quotes the server's stderr, masked")
		}
	})

	// 1. printer gets the secret as a variable, a file and a handle's
	// value (its argument); each reads ***deploy*** in its answer, and
	// the line that holds no secret (the control) is there in clear.
	var secretsDir string
	t.Run("given", func(t *testing.T) {
		out := ops(t, "run printer secret:deploy")
		wants(t, "run printer's answer", out, "marker=printer-ran", "token=***deploy***", "file=***deploy***", "b64=***deploy***",
			"sha="+sha(old), "word=plain arg=***deploy***", "argsha="+sha(old), "mode=500 400 ")
		if secretsDir = field(out, "dir="); secretsDir == "" {
			t.Error("printer names no secrets folder")
		}
		uses := usesOf(secretUses(t, home), "printer")
		want := "argument 1, env DEPLOY_TOKEN, file $KAIRO_SECRETS/deploy"
		if len(uses) != 1 || uses[0] != want {
			t.Errorf("printer's uses of deploy %q; want one run's %q", uses, want)
		}
	})
	if secretsDir != "" {
		// The folder of the 0400 files goes with the run's temp folder.
		until(t, "printer's secrets folder removed", func() bool {
			_, err := os.Stat(secretsDir)
			return os.IsNotExist(err)
		})
	}

	// 2. other names no secret: it gets none, and a handle in its param
	// or its arguments is refused; the controls are the same run without
	// the handle, and printer with the handle in its param.
	t.Run("not named", func(t *testing.T) {
		out := ops(t, "run other")
		wants(t, "run other's answer", out, "marker=other-ran", "token=unset", "ls=failed", "word=plain arg=")
		for _, args := range []string{"word=secret:deploy", "secret:deploy"} {
			out := ops(t, "run other "+args)
			wants(t, "run other "+args, out, `may not use the secret "deploy"`)
			if strings.Contains(out, "marker=other-ran") {
				t.Errorf("run other %s ran:\n%s", args, out)
			}
		}
		wants(t, "run other word=hello", ops(t, "run other word=hello"), "marker=other-ran", "word=hello arg=")
		wants(t, "run printer word=secret:deploy", ops(t, "run printer word=secret:deploy"), "word=***deploy*** arg=")
		if uses := usesOf(secretUses(t, home), "other"); len(uses) != 0 {
			t.Errorf("other used deploy: %q", uses)
		}
	})

	// 3. A child a skill starts through the kernel gets the skill's
	// secret only with [secrets] children = true; without, its variable
	// is unset and it has no file. Both skills hold it themselves. The
	// operator runs them attached, to read all they print.
	spawn := func(t *testing.T, skill string) string {
		t.Helper()
		r := kairoRun(t, userWorkspace(t), childEnv(home), nil, "spawn", "--skill", skill)
		if r.code != 0 {
			t.Fatalf("kairo spawn --skill %s:\n%s", skill, r)
		}
		return r.stdout
	}
	t.Run("children", func(t *testing.T) {
		wants(t, "keeper (children = false)", spawn(t, "keeper"), "parent="+sha(old), "child=unset", "childfile=none", "childsha="+sha(""))
		wants(t, "giver (children = true)", spawn(t, "giver"), "parent="+sha(old), "child=***deploy***", "childfile=***deploy***", "childsha="+sha(old))
	})

	// 3b. A skill that names no secret runs printer by name with the
	// handle as its argument: printer names the secret, so it gets the
	// value there — and its output is masked on its way to that skill
	// (and to the console), and the use is recorded. As a child of a
	// tree it is not given its own variable and file: only a spawner's
	// [secrets] children gives a child secrets.
	t.Run("by name in a tree", func(t *testing.T) {
		before := len(usesOf(secretUses(t, home), "printer"))
		wants(t, "plain running printer", spawn(t, "plain"), "byname:marker=printer-ran", "byname:word=plain arg=***deploy***",
			"byname:argsha="+sha(old), "byname:token=\n")
		uses := usesOf(secretUses(t, home), "printer")
		if len(uses) != before+1 || !slices.Contains(uses, "argument 1") {
			t.Errorf("printer's uses of deploy %q; want one more run's %q", uses, "argument 1")
		}
	})

	// 4. The model passes the handle in printer's param (a skill's tool
	// takes its params): printer runs with the value, and what the model
	// is sent, as the scripted server received it and as kairo.llm.request
	// records it, holds the handle and ***deploy***, never the value.
	t.Run("model", func(t *testing.T) {
		r := kairo(t, home, "send", "deploy with the model")
		if r.code != 0 || !strings.Contains(r.stdout, "Deployed.") {
			t.Fatalf("deploy with the model:\n%s\n%s", r, d.stderr)
		}
		var bodies strings.Builder
		for _, req := range m.policyRequests() {
			bodies.WriteString(req.body)
		}
		wants(t, "the model's requests", bodies.String(), `secret:deploy`, `word=***deploy*** arg=`, "token=***deploy***", "sha="+sha(old))
		var args []string
		recorded := false
		for _, ev := range eventLog(t, home) {
			if ev.Type == "kairo.agent.action" && strings.Contains(fmt.Sprint(ev.Data["tool"]), "printer") {
				args = append(args, fmt.Sprint(ev.Data["args"]))
			}
			if ev.Type == "kairo.llm.request" && strings.Contains(fmt.Sprint(ev.Data), "token=***deploy***") {
				recorded = true
			}
		}
		if !recorded {
			t.Error("no kairo.llm.request records printer's output, masked")
		}
		if !slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, `"word":"secret:deploy"`) }) {
			t.Errorf("no action of the model holds the handle: %q", args)
		}
	})

	// 5. The secret changed while Kairo runs: the next run gets the new
	// value, masked; the old one stays masked where it appears again
	// (the user's message quoting it).
	t.Run("rotated", func(t *testing.T) {
		setSecret(t, home, "deploy", rotated)
		wants(t, "run printer after the change", ops(t, "run printer"), "token=***deploy***", "file=***deploy***", "sha="+sha(rotated))
		ops(t, "the old token was "+old)
		found := false
		for _, ev := range eventLog(t, home) {
			if ev.Type == "kairo.agent.ops.message" && ev.Data["text"] == "the old token was ***deploy***" {
				found = true
			}
		}
		if !found {
			t.Error("the message quoting the old value is not in the log, masked")
		}
	})

	// Neither value, nor its base64 or hex, is in what the console serves
	// (its lists, and its stream from the first event with every
	// process's output), what events tail printed, the daemon's log, or
	// any file of its home but the store; each of these holds printer's
	// marker line (the control), but the log, which logs no output (its
	// control is the MCP server's failure, above).
	t.Run("nowhere", func(t *testing.T) {
		needles := forbidden(old, rotated)
		for _, path := range []string{"/api/events?limit=10000", "/api/agents", "/api/status", "/api/approvals", "/api/tools"} {
			b := con.get(t, path)
			if n := leaked(b, needles); n != "" {
				t.Errorf("GET %s holds %s", path, n)
			}
			if path == "/api/events?limit=10000" && !strings.Contains(string(b), "marker=printer-ran") {
				t.Errorf("GET %s lacks printer's marker", path)
			}
		}
		if code := d.stop(); code != 0 {
			t.Errorf("kairo up exited %d\n%s", code, d.stderr)
		}
		tailOut := tailed()
		tailJSON(t, tailOut)
		for what, out := range map[string]string{"events tail": tailOut, "the console's stream": streamed(), "the daemon's stderr": d.stderr.String()} {
			if n := leaked([]byte(out), needles); n != "" {
				t.Errorf("%s holds %s", what, n)
			}
			if what != "the daemon's stderr" && !strings.Contains(out, "marker=printer-ran") {
				t.Errorf("%s lacks printer's marker", what)
			}
		}
		seen := map[string]bool{}
		filepath.WalkDir(home, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if e.IsDir() && path == filepath.Join(home, "secrets") {
				return filepath.SkipDir
			}
			if !e.Type().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("read %s: %v", path, err)
				return nil
			}
			rel, _ := filepath.Rel(home, path)
			if n := leaked(b, needles); n != "" {
				t.Errorf("%s holds %s", rel, n)
			}
			// memory.db is the default agent's memory, memory-ops.db ops's.
			for _, prefix := range []string{"events.db", "memory.db", "memory-ops.db"} {
				if strings.HasPrefix(rel, prefix) && strings.Contains(string(b), "marker=printer-ran") {
					seen[prefix] = true
				}
			}
			if rel == "kairo.log" && len(b) > 0 {
				seen[rel] = true
			}
			return nil
		})
		for _, f := range []string{"events.db", "memory.db", "memory-ops.db", "kairo.log"} {
			if !seen[f] {
				t.Errorf("%s* holds nothing of printer's run: the scan would miss a leak", f)
			}
		}
	})
}

// tailJSON checks that each line events tail --json printed is an event.
func tailJSON(t *testing.T, out string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev logged
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Type == "" {
			t.Errorf("events tail --json line %q: %v", sc.Text(), err)
		}
	}
}
