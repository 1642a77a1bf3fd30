package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/client"
)

// requestApproval asks the daemon for an approval, as the agent does (the
// operator may ask too), and returns it.
func requestApproval(t *testing.T, c *client.Client, r abi.ApprovalRequest) abi.Approval {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var a abi.Approval
	if err := c.Call(ctx, abi.MethodApprovalRequest, r, &a); err != nil {
		t.Fatalf("approval.request %+v: %v", r, err)
	}
	return a
}

// approvalState is approval id as the kernel holds it.
func approvalState(t *testing.T, c *client.Client, id string) abi.Approval {
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
	t.Fatalf("approval %s is not in approval.list: %+v", id, res.Approvals)
	return abi.Approval{}
}

// TestApprovalsCLI: kairo approvals lists what waits with its reason, run
// loop and grants as manifest lines; kairo approve decides it, a second
// approve says it was decided before and changes nothing (exit 0), a deny
// of it says it was approved and exits 1; deny takes the ID without its
// "ap-"; an unknown ID names kairo approvals; --json parses; a requester's
// escapes reach the terminal as text.
func TestApprovalsCLI(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	d := startUp(t, home)
	c := d.dial()
	defer c.Close()

	if r := kairo(t, home, "approvals"); r.code != 0 || !strings.Contains(r.stdout, "no approvals pending") {
		t.Fatalf("kairo approvals with none:\n%s", r)
	}

	run := requestApproval(t, c, abi.ApprovalRequest{
		ActionID: "act-cli-1", CorrelationID: "loop-cli-0001", Tool: "shell", Args: `{"cmd":"make deploy"}`,
		Mode: abi.ApprovalAlways, Reason: "shell needs approval before it runs\x1b]52;c;cHduZWQ=\x07",
	})
	rerun := requestApproval(t, c, abi.ApprovalRequest{
		ActionID: "act-cli-2", CorrelationID: "loop-cli-0001", Tool: "skill.fetch", Mode: abi.ApprovalOnDeny,
		Skill: "fetch", Grants: abi.Grants{Write: []string{"/srv/out"}, ConnectTCP: []uint16{443}}, Reason: "denied: fs.write /srv/out",
	})
	if run.ID != "ap-act-cli-1" || rerun.ID != "ap-act-cli-2-rerun" || run.State != abi.ApprovalPending {
		t.Fatalf("approval.request answered %+v and %+v", run, rerun)
	}

	r := kairo(t, home, "approvals")
	if r.code != 0 {
		t.Fatalf("kairo approvals:\n%s", r)
	}
	t.Logf("kairo approvals:\n%s", r.stdout)
	for _, want := range []string{
		"ap-act-cli-1  pending, asked ", "expires in ", "shell {\"cmd\":\"make deploy\"}", "loop-cli-0001",
		"shell needs approval before it runs^[]52;c;cHduZWQ=^G",
		"ap-act-cli-2-rerun  pending", `[fs] write = ["/srv/out"]`, "[net] connect_tcp = [443]", "denied: fs.write /srv/out",
		"kairo approve ap-act-cli-1", "kairo deny ap-act-cli-1",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("kairo approvals printed no %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "\x1b") {
		t.Errorf("kairo approvals printed an escape character: %q", r.stdout)
	}

	r = kairo(t, home, "approvals", "--json")
	if r.code != 0 {
		t.Fatalf("kairo approvals --json:\n%s", r)
	}
	t.Logf("kairo approvals --json:\n%s", r.stdout)
	var ids []string
	for line := range strings.Lines(r.stdout) {
		var o struct {
			ID            string     `json:"id"`
			State         string     `json:"state"`
			Reason        string     `json:"reason"`
			CorrelationID string     `json:"correlationId"`
			Grants        abi.Grants `json:"grants"`
			Expires       time.Time  `json:"expires"`
		}
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatalf("kairo approvals --json: %q: %v", line, err)
		}
		if o.State != abi.ApprovalPending || o.Reason == "" || o.CorrelationID != "loop-cli-0001" || o.Expires.IsZero() {
			t.Errorf("kairo approvals --json: %q", line)
		}
		ids = append(ids, o.ID)
	}
	if strings.Join(ids, " ") != "ap-act-cli-1 ap-act-cli-2-rerun" {
		t.Errorf("kairo approvals --json listed %q, want both, oldest first", ids)
	}

	r = kairo(t, home, "approve", "ap-act-cli-1")
	if r.code != 0 || !strings.Contains(r.stdout, "approved ap-act-cli-1: shell") {
		t.Fatalf("kairo approve:\n%s", r)
	}
	a := approvalState(t, c, "ap-act-cli-1")
	if a.State != abi.ApprovalApproved || a.Decided == nil || a.Decided.By != fmt.Sprintf("operator/%d", os.Getuid()) {
		t.Fatalf("after kairo approve the kernel holds %+v (decided %+v)", a, a.Decided)
	}

	r = kairo(t, home, "approve", "ap-act-cli-1")
	if r.code != 0 || !strings.Contains(r.stdout, "ap-act-cli-1 was decided before: approved by operator/") || !strings.Contains(r.stdout, "nothing changed") {
		t.Errorf("a second kairo approve:\n%s", r)
	}
	r = kairo(t, home, "deny", "ap-act-cli-1")
	if r.code != 1 || !strings.Contains(r.stderr, "kairo: ap-act-cli-1 was decided before: approved by operator/") || !strings.Contains(r.stderr, "nothing changed") {
		t.Errorf("kairo deny of an approved one:\n%s", r)
	}
	if a := approvalState(t, c, "ap-act-cli-1"); a.State != abi.ApprovalApproved {
		t.Errorf("the deny changed the approval: %+v", a)
	}

	r = kairo(t, home, "deny", "--reason", "not on a Friday", "act-cli-2-rerun")
	if r.code != 0 || !strings.Contains(r.stdout, "denied ap-act-cli-2-rerun: skill.fetch") {
		t.Fatalf("kairo deny without the ap-:\n%s", r)
	}
	if a := approvalState(t, c, "ap-act-cli-2-rerun"); a.State != abi.ApprovalDenied || a.Decided.Reason != "not on a Friday" {
		t.Errorf("after kairo deny the kernel holds %+v (decided %+v)", a, a.Decided)
	}

	r = kairo(t, home, "approve", "ap-nope")
	if r.code != 1 || !strings.Contains(r.stderr, `no approval "ap-nope"`) || !strings.Contains(r.stderr, "`kairo approvals`") {
		t.Errorf("kairo approve of an unknown ID:\n%s", r)
	}
	r = kairo(t, home, "approve", "act-cli")
	if r.code != 1 || !strings.Contains(r.stderr, "names 2 approvals") {
		t.Errorf("kairo approve of an ambiguous ID:\n%s", r)
	}
	if r = kairo(t, home, "approve"); r.code != 2 || !strings.Contains(r.stderr, "usage: kairo approve") {
		t.Errorf("kairo approve without an ID:\n%s", r)
	}

	if r = kairo(t, home, "approvals"); r.code != 0 || !strings.Contains(r.stdout, "no approvals pending") {
		t.Errorf("kairo approvals once decided:\n%s", r)
	}
	r = kairo(t, home, "approvals", "--all")
	for _, want := range []string{"ap-act-cli-1  approved", "decided   approved by operator/", "ap-act-cli-2-rerun  denied", "denied by operator/", ": not on a Friday"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("kairo approvals --all printed no %q:\n%s", want, r)
		}
	}
}

// TestApprovalsHelpers: grants as manifest lines, and IDs named by a part.
func TestApprovalsHelpers(t *testing.T) {
	g := abi.Grants{Read: []string{"/a", `/b "q"`}, Exec: []string{"/usr/local/bin"}, BindTCP: []uint16{8080, 9090}, Hosts: []string{"api.example.com:443"}}
	want := []string{`[fs] read = ["/a", "/b \"q\""]`, `[fs] exec = ["/usr/local/bin"]`, `[net] bind_tcp = [8080, 9090]`, `[net] hosts = ["api.example.com:443"]`}
	if got := grantLines(g); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("grantLines = %q, want %q", got, want)
	}
	if got := grantLines(abi.Grants{}); len(got) != 0 {
		t.Errorf("grantLines of nothing = %q", got)
	}
	list := []abi.Approval{{ApprovalRequest: abi.ApprovalRequest{ID: "ap-a1b2"}}, {ApprovalRequest: abi.ApprovalRequest{ID: "ap-a1b2-rerun"}}, {ApprovalRequest: abi.ApprovalRequest{ID: "ap-ffee"}}}
	for _, tc := range []struct{ in, want, err string }{
		{"ap-a1b2", "ap-a1b2", ""},
		{"a1b2", "ap-a1b2", ""}, // exact without ap- wins over the -rerun it starts
		{"rerun", "ap-a1b2-rerun", ""},
		{"ffee", "ap-ffee", ""},
		{"ap-a", "", "names 2 approvals"},
		{"zz", "", `no approval "zz"`},
	} {
		got, err := resolveApproval(list, tc.in)
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("resolveApproval(%q) = %q, %v; want %q, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{5 * time.Second, "5s"}, {3 * time.Minute, "3m"}, {10*time.Minute - time.Second, "10m"}, {59*time.Minute + 45*time.Second, "1h"},
		{125 * time.Minute, "2h5m"}, {72 * time.Hour, "3d"}} {
		if got := since(tc.d); got != tc.want {
			t.Errorf("since(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
