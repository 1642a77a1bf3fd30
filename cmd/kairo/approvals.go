package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/jsonview"
	"github.com/kairo-os/kairo/sdk/client"
)

// This file is the operator's side of consent: kairo approvals lists what
// waits for a person, kairo approve and kairo deny decide it through
// approval.decide, whose first decision stands; and kairo run says, after
// a run, what the sandbox refused it and which manifest line would allow it.

func runApprovals(ctx context.Context, args []string) error {
	f := newFlags("approvals", "kairo approvals [--all] [--json]", `
List the approvals waiting for a person, oldest first: the action the agent
(or the host) asked to run, in which run loop, why it asks, and for the
re-run of a skill the sandbox refused, exactly what the run would hold
besides its manifest, as manifest lines. Decide each with
"kairo approve ID" or "kairo deny ID"; one nobody decides is denied when it
expires.

With --all, the decided ones the kernel keeps too. With --json, one JSON
object per approval, with the names of approval.list: id, actionId,
correlationId (the run loop), tool, args, mode, skill, grants, reason,
requester, expires, state, requestedAt, decided ({approved, reason, by}),
usedBy.`)
	all := f.Bool("all", false, "the decided approvals too")
	asJSON := f.Bool("json", false, "print one JSON object per approval")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	list, err := listApprovals(ctx, *all)
	if err != nil {
		return err
	}
	if *asJSON {
		for _, a := range list {
			j, err := jsonview.Approval(a)
			if err != nil {
				return err
			}
			fmt.Printf("%s\n", j)
		}
		return nil
	}
	if len(list) == 0 {
		if *all {
			fmt.Println("no approvals: none was asked for")
		} else {
			fmt.Println("no approvals pending")
		}
		return nil
	}
	now := time.Now()
	for i, a := range list {
		if i > 0 {
			fmt.Println()
		}
		fmt.Print(approvalBlock(a, now))
	}
	return nil
}

func listApprovals(ctx context.Context, all bool) ([]abi.Approval, error) {
	var res abi.ApprovalListResult
	if err := callKernel(ctx, "kairo approvals", abi.MethodApprovalList, abi.ApprovalListParams{All: all}, &res); err != nil {
		return nil, err
	}
	return res.Approvals, nil
}

// approvalBlock is one approval for a person, a few lines; every string
// the requester wrote is printed through termLine.
func approvalBlock(a abi.Approval, now time.Time) string {
	var b strings.Builder
	head := termLine(a.ID) + "  " + termLine(a.State)
	if !a.RequestedAt.IsZero() {
		head += ", asked " + since(now.Sub(a.RequestedAt)) + " ago"
	}
	if a.State == abi.ApprovalPending && !a.Expires.IsZero() {
		if left := a.Expires.Sub(now); left > 0 {
			head += ", expires in " + since(left) + " (then denied)"
		} else {
			head += ", expired"
		}
	}
	fmt.Fprintf(&b, "%s\n", head)
	row := func(k, v string) { fmt.Fprintf(&b, "  %-9s %s\n", k, v) }
	tool := termLine(a.Tool)
	if a.Args != "" {
		tool += " " + termLine(clip(a.Args, 200))
	}
	row("tool", tool)
	if a.Skill != "" {
		row("skill", termLine(a.Skill))
	}
	if a.CorrelationID != "" {
		row("run loop", termLine(a.CorrelationID)+" (kairo runs show "+termLine(shortID(a.CorrelationID))+")")
	}
	if a.Requester != "" {
		row("asked by", termLine(a.Requester))
	}
	row("reason", termLine(a.Reason))
	if lines := grantLines(a.Grants); len(lines) > 0 {
		k := "grants"
		for _, l := range lines {
			row(k, termLine(l))
			k = ""
		}
		row("", "(added to the manifest of "+termLine(a.Skill)+" for one run)")
	}
	switch {
	case a.State == abi.ApprovalPending:
		row("decide", "kairo approve "+termLine(a.ID)+"  |  kairo deny "+termLine(a.ID)+" [--reason TEXT]")
	case a.Decided != nil:
		row("decided", decisionText(a))
	}
	if a.UsedBy != "" {
		row("spent by", termLine(a.UsedBy))
	}
	return b.String()
}

// decisionText says who decided a, how, and why.
func decisionText(a abi.Approval) string {
	d := a.Decided
	if d == nil {
		return termLine(a.State)
	}
	s := termLine(a.State) + " by " + termLine(d.By)
	if d.Reason != "" {
		s += ": " + termLine(d.Reason)
	}
	return s
}

// grantLines are the manifest lines that grants g adds, one per key:
// [fs] write = ["/srv/out"].
func grantLines(g abi.Grants) []string {
	var out []string
	paths := func(table, key string, l []string) {
		if len(l) == 0 {
			return
		}
		q := make([]string, len(l))
		for i, p := range l {
			q[i] = strconv.Quote(p)
		}
		out = append(out, "["+table+"] "+key+" = ["+strings.Join(q, ", ")+"]")
	}
	ports := func(key string, l []uint16) {
		if len(l) == 0 {
			return
		}
		q := make([]string, len(l))
		for i, p := range l {
			q[i] = strconv.Itoa(int(p))
		}
		out = append(out, "[net] "+key+" = ["+strings.Join(q, ", ")+"]")
	}
	paths("fs", "read", g.Read)
	paths("fs", "write", g.Write)
	paths("fs", "exec", g.Exec)
	ports("connect_tcp", g.ConnectTCP)
	ports("bind_tcp", g.BindTCP)
	paths("net", "hosts", g.Hosts)
	return out
}

// since is a duration for a person, to the minute past one: "40s", "3m",
// "2h5m", "3d".
func since(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour-30*time.Second:
		return strconv.Itoa(int(d.Round(time.Minute).Minutes())) + "m"
	case d < 48*time.Hour:
		d = d.Round(time.Minute)
		h := int(d.Hours())
		if m := int(d.Minutes()) % 60; m > 0 {
			return fmt.Sprintf("%dh%dm", h, m)
		}
		return strconv.Itoa(h) + "h"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}

func runApprove(ctx context.Context, args []string) error {
	f := newFlags("approve", "kairo approve [--reason TEXT] ID", `
Approve approval ID (kairo approvals lists them; a unique start or end of
the ID will do): the action it holds runs, or for the re-run of a refused
skill, its next run holds the grants shown, once. The first decision
stands: an approval decided before (by you, the chat or its timeout) is
not changed, and kairo says so; it exits 0 if it was approved, 1 if it was
denied or withdrawn (the task that asked ended first).`)
	reason := f.String("reason", "", "why, recorded with the decision")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	return decide(ctx, pos[0], true, *reason)
}

func runDeny(ctx context.Context, args []string) error {
	f := newFlags("deny", "kairo deny [--reason TEXT] ID", `
Deny approval ID (kairo approvals lists them; a unique start or end of the
ID will do): the action it holds does not run, and the agent is told. The
first decision stands: an approval decided before is not changed, and kairo
says so; it exits 0 if it was denied, 1 if it was approved or withdrawn (the
task that asked ended first).`)
	reason := f.String("reason", "", "why, recorded with the decision and told to the agent")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	return decide(ctx, pos[0], false, *reason)
}

// decide calls approval.decide for the approval id names, and says what
// became of it.
func decide(ctx context.Context, id string, approve bool, reason string) error {
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var res abi.ApprovalListResult
	if err := c.Call(ctx, abi.MethodApprovalList, abi.ApprovalListParams{All: true}, &res); err != nil {
		return callError(decideCommand(approve), err)
	}
	full, err := resolveApproval(res.Approvals, id)
	if err != nil {
		return err
	}
	var a abi.Approval
	if err := c.Call(ctx, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: full, Approved: approve, Reason: reason}, &a); err != nil {
		return callError(decideCommand(approve), err)
	}
	want := abi.ApprovalDenied
	if approve {
		want = abi.ApprovalApproved
	}
	if a.Already && a.State == abi.ApprovalWithdrawn {
		// The task that asked ended first: there is nothing left to run,
		// so neither answer is what the operator asked for.
		fmt.Fprintf(os.Stderr, "kairo: %s was withdrawn by %s: %s; nothing changed, and its action will not run\n",
			termLine(a.ID), termLine(a.Decided.By), termLine(a.Decided.Reason))
		return exitCode(1)
	}
	if a.Already {
		msg := fmt.Sprintf("%s was decided before: %s; nothing changed", termLine(a.ID), decisionText(a))
		if a.State != want {
			fmt.Fprintf(os.Stderr, "kairo: %s\n", msg)
			return exitCode(1)
		}
		fmt.Println(msg)
		return nil
	}
	fmt.Printf("%s %s: %s", termLine(a.State), termLine(a.ID), termLine(a.Tool))
	if a.CorrelationID != "" {
		fmt.Printf(" in run loop %s", termLine(shortID(a.CorrelationID)))
	}
	fmt.Println()
	if approve {
		if lines := grantLines(a.Grants); len(lines) > 0 {
			fmt.Printf("the next run of %s holds, once, besides its manifest:\n", termLine(a.Skill))
			for _, l := range lines {
				fmt.Printf("  %s\n", termLine(l))
			}
		}
	}
	return nil
}

// resolveApproval finds the approval id names among list: its whole ID,
// the ID without "ap-", or a start or end of it that only one ID has.
func resolveApproval(list []abi.Approval, id string) (string, error) {
	var match []string
	for _, a := range list {
		switch {
		case a.ID == id, a.ID == "ap-"+id:
			return a.ID, nil
		case id != "" && (strings.HasPrefix(a.ID, id) || strings.HasPrefix(a.ID, "ap-"+id) || strings.HasSuffix(a.ID, id)):
			match = append(match, a.ID)
		}
	}
	switch len(match) {
	case 0:
		return "", fmt.Errorf("no approval %q; `kairo approvals` lists the pending ones (--all the decided ones too)", termLine(id))
	case 1:
		return match[0], nil
	}
	return "", fmt.Errorf("%q names %d approvals (%s); give more of the ID", termLine(id), len(match), termLine(strings.Join(match, ", ")))
}

// denialGrace is how long kairo run waits after the exit for refusals
// reported late: the audit subsystem hands records over asynchronously.
const denialGrace = 300 * time.Millisecond

// runDenials collects the kairo.sandbox.denied events of one run's tree.
// The kernel coalesces a tree's refusals by operation and object, and a
// later event for one carries the count so far: the highest is kept.
type runDenials struct {
	sub    *client.Subscription
	cancel context.CancelFunc
	done   chan struct{} // closed when the reader returned

	mu    sync.Mutex
	byKey map[[2]string]int // (op, object) → index in list
	list  []abi.SandboxDenied
}

// followDenials subscribes on c, before the spawn, to the refusals of the
// tree whose events carry causation cause. A kernel that refuses the
// subscription (kairo run inside a sandbox) leaves it empty.
func followDenials(ctx context.Context, c *client.Client, cause string) *runDenials {
	d := &runDenials{done: make(chan struct{}), byKey: map[[2]string]int{}}
	ctx, d.cancel = context.WithCancel(context.WithoutCancel(ctx))
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	sub, err := c.Subscribe(sctx, abi.SubjectSandboxDenied, 0)
	cancel()
	if err != nil {
		close(d.done)
		return d
	}
	d.sub = sub
	go func() { // owned by d: end stops it
		defer close(d.done)
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				return
			}
			var x abi.SandboxDenied
			if ev.CausationID == cause && msgpack.Unmarshal(ev.Data, &x) == nil {
				d.add(x)
			}
		}
	}()
	return d
}

func (d *runDenials) add(x abi.SandboxDenied) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := [2]string{x.Op, x.Object}
	if i, ok := d.byKey[k]; ok {
		if x.Count > d.list[i].Count {
			d.list[i] = x
		}
		return
	}
	d.byKey[k] = len(d.list)
	d.list = append(d.list, x)
}

// end waits grace for late refusals, stops following and returns the
// run's refusals in the order they were first seen.
func (d *runDenials) end(grace time.Duration) []abi.SandboxDenied {
	if d.sub != nil {
		time.Sleep(grace)
	}
	d.cancel()
	<-d.done
	if d.sub != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		d.sub.Close(ctx)
		cancel()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.list
}

// denialLine says what the sandbox refused, how often, and what would
// allow it:
//
//	denied: fs.write /etc (3 times) — to allow it, add to the manifest: [fs] write = ["/etc"]
func denialLine(d abi.SandboxDenied) string {
	s := "denied: " + termLine(d.Op) + " " + termLine(d.Object)
	if d.Count > 1 {
		s += fmt.Sprintf(" (%d times)", d.Count)
	}
	if d.Grant != "" {
		return s + " — to allow it, add to the manifest: " + termLine(d.Grant)
	}
	s += " — no manifest line allows it"
	if d.Detail != "" {
		s += " (" + termLine(d.Detail) + ")"
	}
	return s
}

// decideCommand is the command a person typed to decide.
func decideCommand(approve bool) string {
	if approve {
		return "kairo approve"
	}
	return "kairo deny"
}
