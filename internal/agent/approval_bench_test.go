package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/ipc"
	"github.com/kairo-os/kairo/sdk/client"
)

// BenchmarkApprovalRoundTrip: a tool call marked "always" asks for an
// approval; an operator's client over the kernel socket, subscribed to the
// requests, approves each at once; the call then starts its process. ms is
// the median from the request's event to the process's spawned event (both
// stamped by the bus), p99-ms the 99th percentile: the approval's own
// cost, with a person who answers instantly.
func BenchmarkApprovalRoundTrip(b *testing.B) {
	e := newEnv(b)
	dir, err := os.MkdirTemp("", "kairo-approval-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv, err := ipc.Listen(e.kernel, ipc.Config{Path: filepath.Join(dir, "k.sock"), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	defer func() { srv.Close(); <-served }()

	// The operator: approves every request it sees.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := client.Dial(ctx, filepath.Join(dir, "k.sock"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	sub, err := c.Subscribe(ctx, abi.SubjectApprovalRequested, 0)
	if err != nil {
		b.Fatal(err)
	}
	decider := make(chan error, 1)
	go func() {
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				if ctx.Err() == nil {
					b.Errorf("subscription: %v", err)
				}
				decider <- nil
				return
			}
			var r abi.ApprovalRequest
			if err := msgpack.Unmarshal(ev.Data, &r); err != nil {
				decider <- err
				return
			}
			if err := c.Call(ctx, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: r.ID, Approved: true}, nil); err != nil {
				b.Errorf("decide %s: %v", r.ID, err)
				decider <- err
				return
			}
		}
	}()

	// A policy that answers each message with one spawn of true.
	policy := PolicyFunc(func(ctx context.Context, bt *abi.Batch) (*abi.Reply, error) {
		var reply abi.Reply
		data, _ := msgpack.Marshal(abi.ActionData{Tool: abi.MethodProcessSpawn, Args: `{"argv":["true"]}`})
		for _, ev := range bt.Events {
			if ev.Type == abi.AgentMessageSubject("default") {
				reply.Actions = append(reply.Actions, abi.Action{Type: abi.ActionToolCall, Data: data, CausationID: ev.ID})
			}
		}
		return &reply, nil
	})
	e.start(Config{Policy: policy, Approval: alwaysFor(abi.MethodProcessSpawn), MaxIterations: 1 << 20, Hz: 200, Spin: -1})

	lat := make([]time.Duration, 0, b.N)
	taken := map[string]bool{} // the actions whose requests earlier iterations took
	b.ResetTimer()
	for i := range b.N {
		e.say("run "+strconv.Itoa(i), "")
		req := e.events.until(b, "approval.requested", func(ev *abi.Event) bool {
			return ev.Type == abi.SubjectApprovalRequested && ev.CausationID != "" && !taken[ev.CausationID]
		})
		taken[req.CausationID] = true
		spawned := e.events.until(b, "the approved call's process", func(ev *abi.Event) bool {
			return ev.Type == abi.SubjectProcessSpawned && ev.CausationID == req.CausationID
		})
		lat = append(lat, spawned.Time.Sub(req.Time))
	}
	b.StopTimer()
	cancel()
	if err := <-decider; err != nil {
		b.Fatal(err)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
