package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/client"
)

// ask requests an approval as the agent would (the operator may ask too).
func ask(t *testing.T, c *client.Client, r abi.ApprovalRequest) abi.Approval {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var a abi.Approval
	if err := c.Call(ctx, abi.MethodApprovalRequest, r, &a); err != nil {
		t.Fatalf("approval.request: %v", err)
	}
	return a
}

// held is approval id as the kernel holds it.
func held(t *testing.T, c *client.Client, id string) abi.Approval {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var res abi.ApprovalListResult
	if err := c.Call(ctx, abi.MethodApprovalList, abi.ApprovalListParams{All: true}, &res); err != nil {
		t.Fatal(err)
	}
	for _, a := range res.Approvals {
		if a.ID == id {
			return a
		}
	}
	t.Fatalf("no approval %s in approval.list", id)
	return abi.Approval{}
}

// approvalJSON is an approval as the console's API answers it.
type approvalJSON struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	Already bool   `json:"already"`
	Reason  string `json:"reason"`
	Expires string `json:"expires"`
	Decided *struct {
		Approved bool   `json:"approved"`
		By       string `json:"by"`
		Reason   string `json:"reason"`
	} `json:"decided"`
}

// TestServerApprove: POST /api/approve passes the checks of every POST —
// without the page's Origin, from another origin, or not as JSON it is
// refused and the approval stays pending — and beside them the page's own
// request decides it; a second decision answers already, with the first
// one; GET /api/approvals lists the pending ones, ?all=1 the decided too.
func TestServerApprove(t *testing.T) {
	_, _, u, c := upConsoleClient(t, time.Minute)
	a := ask(t, c, abi.ApprovalRequest{ActionID: "act-http-1", CorrelationID: "loop-http", Tool: "shell", Mode: abi.ApprovalAlways, Reason: "shell needs approval"})

	res, body := do(t, u, "GET", "/api/approvals", "", bearer(u))
	var list struct {
		Approvals []approvalJSON `json:"approvals"`
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || len(list.Approvals) != 1 ||
		list.Approvals[0].ID != a.ID || list.Approvals[0].State != abi.ApprovalPending || list.Approvals[0].Reason != "shell needs approval" || list.Approvals[0].Expires == "" {
		t.Fatalf("GET /api/approvals: %d %s", res.StatusCode, body)
	}

	own := "http://" + u.Host
	approve := fmt.Sprintf(`{"id": %q, "approved": true, "reason": "looks fine"}`, a.ID)
	for _, h := range []map[string]string{
		cookie(u, map[string]string{"Content-Type": "application/json"}), // no Origin, no Bearer
		cookie(u, map[string]string{"Origin": "http://evil.example", "Content-Type": "application/json"}),
		cookie(u, map[string]string{"Origin": "null", "Content-Type": "application/json"}),
		cookie(u, map[string]string{"Origin": own, "Content-Type": "text/plain"}),
		{"Origin": own, "Content-Type": "application/json"}, // no token
	} {
		res, body := do(t, u, "POST", "/api/approve", approve, h)
		if res.StatusCode != http.StatusForbidden && res.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST /api/approve with %v: %d %s; want it refused", h, res.StatusCode, body)
		}
		if got := held(t, c, a.ID); got.State != abi.ApprovalPending {
			t.Fatalf("a refused POST with %v decided the approval: %+v", h, got)
		}
	}

	// The control: the page's own request.
	page := cookie(u, map[string]string{"Origin": own, "Content-Type": "application/json"})
	res, body = do(t, u, "POST", "/api/approve", approve, page)
	var got approvalJSON
	if res.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil || got.State != abi.ApprovalApproved || got.Already ||
		got.Decided == nil || got.Decided.By != fmt.Sprintf("operator/%d", os.Getuid()) || got.Decided.Reason != "looks fine" {
		t.Fatalf("POST /api/approve from the page: %d %s", res.StatusCode, body)
	}
	if h := held(t, c, a.ID); h.State != abi.ApprovalApproved {
		t.Fatalf("after the page's approve the kernel holds %+v", h)
	}

	// Decided again, either way: the first decision stands.
	for _, approved := range []bool{true, false} {
		res, body = do(t, u, "POST", "/api/approve", fmt.Sprintf(`{"id": %q, "approved": %v}`, a.ID, approved), page)
		got = approvalJSON{}
		if res.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil || !got.Already || got.State != abi.ApprovalApproved || got.Decided.Reason != "looks fine" {
			t.Errorf("a second decision (approved %v): %d %s; want already, approved", approved, res.StatusCode, body)
		}
	}

	for _, tc := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"id": "ap-nope", "approved": true}`, http.StatusNotFound, abi.MethodApprovalList},
		{fmt.Sprintf(`{"id": %q}`, a.ID), http.StatusBadRequest, "true or false"},
		{`{"approved": true}`, http.StatusBadRequest, "GET /api/approvals lists them"},
		{`{"id": "x", "approved": true, "by": "timeout"}`, http.StatusBadRequest, "unknown field"},
	} {
		if res, body := do(t, u, "POST", "/api/approve", tc.body, page); res.StatusCode != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("POST /api/approve %s: %d %s; want %d with %q", tc.body, res.StatusCode, body, tc.status, tc.want)
		}
	}

	if res, body = do(t, u, "GET", "/api/approvals", "", bearer(u)); res.StatusCode != http.StatusOK || !strings.Contains(body, `{"approvals":[]}`) {
		t.Errorf("GET /api/approvals once decided: %d %s", res.StatusCode, body)
	}
	if res, body = do(t, u, "GET", "/api/approvals?all=1", "", bearer(u)); res.StatusCode != http.StatusOK || !strings.Contains(body, `"state":"approved"`) {
		t.Errorf("GET /api/approvals?all=1: %d %s", res.StatusCode, body)
	}
	if res, body = do(t, u, "GET", "/api/approvals?all=maybe", "", bearer(u)); res.StatusCode != http.StatusBadRequest {
		t.Errorf("GET /api/approvals?all=maybe: %d %s", res.StatusCode, body)
	}
}

// row is a JavaScript expression: the panel's row of approval id.
func row(id string) string { return `document.querySelector('[data-approval=` + js(id) + `]')` }

// TestConsoleApprovals: an approval asked for while the page is open
// appears in its panel, live, with its reason and tool as text (markup in
// them stays text) and its grants as manifest lines; the page's Approve
// button decides it (the kernel holds it approved, by the operator); a
// second page that missed the decision — its stream cut — approves it
// again and is told it was decided before and nothing changed. A deny
// from the CLI shows live on the first page.
func TestConsoleApprovals(t *testing.T) {
	t.Parallel()
	home := newHome(t)
	d := startDaemon(t, home)
	url := d.url()
	c := d.dial()

	b := newBrowser(t)
	b.open(url)
	b.wait("the approvals read", `document.body.dataset.approvalsLoaded === "1"`, 30*time.Second)
	if !eval[bool](b, `!document.getElementById("approvals-empty").hidden`) {
		t.Error("the panel does not say nothing waits")
	}

	// A second page, whose stream is cut: it sees the approvals it reads,
	// and no decision after.
	stale := newBrowser(t)
	func() {
		ctx, cancel := context.WithTimeout(stale.ctx, 30*time.Second)
		defer cancel()
		if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
			t.Fatal(err)
		}
		block := []*network.BlockPattern{{URLPattern: "*://*:*/api/stream?*", Block: true}}
		if _, err := chromedp.Call(ctx, network.SetBlockedURLs, network.SetBlockedURLsParams{URLPatterns: block}); err != nil {
			t.Fatal(err)
		}
	}()

	// A run loop for the approvals to belong to: its lane shows them.
	kairo(t, home, "send", "run echo for the approvals")
	var loop struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(kairo(t, home, "runs", "--json", "--limit", "1"), "\n", 2)[0]), &loop); err != nil || loop.ID == "" {
		t.Fatalf("kairo runs --json: %v", err)
	}
	lane := `document.querySelector('[data-loop=` + js(loop.ID) + `]')`

	const hostile = `<img src=x onerror=alert(1)> needs approval`
	run := ask(t, c, abi.ApprovalRequest{
		ActionID: "act-page-1", CorrelationID: loop.ID, Tool: "shell", Args: `{"cmd":"<script>alert(2)</script>"}`,
		Mode: abi.ApprovalAlways, Reason: hostile,
	})
	rerun := ask(t, c, abi.ApprovalRequest{
		ActionID: "act-page-2", CorrelationID: "loop-page-0001", Tool: "skill.fetch", Mode: abi.ApprovalOnDeny,
		Skill: "fetch", Grants: abi.Grants{Write: []string{"/srv/out"}, ConnectTCP: []uint16{443}}, Reason: "denied: fs.write /srv/out",
	})
	b.wait("the approval, live", row(run.ID)+` && `+row(run.ID)+`.dataset.state === "pending"`, 30*time.Second)
	b.wait("the re-run's approval", row(rerun.ID), 30*time.Second)
	if got := eval[string](b, row(run.ID)+`.querySelector(".ap-reason").textContent`); got != hostile {
		t.Errorf("the reason shows %q, want %q as text", got, hostile)
	}
	if got := eval[string](b, row(rerun.ID)+`.querySelector(".ap-grants").textContent`); !strings.Contains(got, `[fs] write = ["/srv/out"]`) || !strings.Contains(got, "[net] connect_tcp = [443]") {
		t.Errorf("the grants show %q", got)
	}
	if n := eval[int](b, `document.querySelectorAll("#approvals img, #approvals script").length`); n != 0 {
		t.Errorf("the panel holds %d elements made of an approval's text", n)
	}
	if got := eval[string](b, `document.getElementById("approvals-count").textContent`); got != "2" {
		t.Errorf("the count shows %q, want 2", got)
	}

	stale.open(url)
	stale.wait("the approvals read", `document.body.dataset.approvalsLoaded === "1"`, 30*time.Second)
	stale.wait("the approval, read", row(run.ID)+` && `+row(run.ID)+`.dataset.state === "pending"`, 30*time.Second)
	b.screenshot("pending")

	// Approve on the first page.
	b.do(
		chromedp.SetValue(chromedp.CSS(`[data-approval="`+run.ID+`"] .ap-note`), "from the page"),
		chromedp.Click(chromedp.CSS(`[data-approval="`+run.ID+`"] button.approve`)),
	)
	b.wait("the approval decided", row(run.ID)+`.dataset.state === "approved"`, 30*time.Second)
	b.wait("the request and the decision in the run loop's lane", lane+`.querySelector(".k-approval") && `+lane+`.querySelector(".k-approved")`, 30*time.Second)
	b.wait("what the kernel made of it", row(run.ID)+`.querySelector(".ap-result.done") && /^approved by operator\/\d+: from the page$/.test(`+row(run.ID)+`.querySelector(".ap-state").textContent)`, 30*time.Second)
	a := held(t, c, run.ID)
	if a.State != abi.ApprovalApproved || a.Decided == nil || a.Decided.By != fmt.Sprintf("operator/%d", os.Getuid()) || a.Decided.Reason != "from the page" {
		t.Fatalf("after the page's Approve the kernel holds %+v (decided %+v)", a, a.Decided)
	}

	// The stale page still offers it; its Approve is told it was decided.
	time.Sleep(500 * time.Millisecond)
	if st := eval[string](stale, row(run.ID)+`.dataset.state`); st != "pending" {
		t.Fatalf("the page with its stream cut shows the approval %s: the stream was not cut", st)
	}
	stale.do(chromedp.Click(chromedp.CSS(`[data-approval="` + run.ID + `"] button.approve`)))
	stale.wait("that it was decided before", row(run.ID)+`.querySelector(".ap-result.already")`, 30*time.Second)
	if got := eval[string](stale, row(run.ID)+`.querySelector(".ap-result").textContent`); !strings.Contains(got, "decided before: approved by operator/") || !strings.Contains(got, "nothing changed") {
		t.Errorf("the second approve says %q", got)
	}
	if st := eval[string](stale, row(run.ID)+`.dataset.state`); st != "approved" {
		t.Errorf("after the second approve the stale page shows %s, want approved", st)
	}
	stale.screenshot("already")

	// A deny from the command line shows on the live page.
	kairo(t, home, "deny", "--reason", "not today", rerun.ID)
	b.wait("the deny, live", row(rerun.ID)+`.dataset.state === "denied"`, 30*time.Second)
	if got := eval[string](b, row(rerun.ID)+`.querySelector(".ap-state").textContent`); !strings.Contains(got, "denied by operator/") || !strings.Contains(got, "not today") {
		t.Errorf("the denied row says %q", got)
	}
	b.wait("nothing waits", `!document.getElementById("approvals-empty").hidden && document.getElementById("approvals-count").textContent === ""`, 10*time.Second)
	b.screenshot("decided")
	b.clean()
}
