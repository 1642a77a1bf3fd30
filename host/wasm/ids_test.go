package wasm

import (
	"context"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/sdk/plugin"
	"github.com/vmihailenco/msgpack/v5"
)

// A plugin cannot claim an id the kernel derives: what it publishes with
// an id of its choosing is stored in its scope, so the operator's decision
// of an approval whose decision id it published first is stored all the
// same. The control: the plugin publishing its id again is a duplicate.

// claimer publishes, for each demo.claim event, an app.claimed event with
// the id the claim's data names.
func claimer(host plugin.Host) plugin.Plugin {
	return plugin.Plugin{
		Init: func(abi.PluginConfig) (abi.PluginInfo, error) {
			return abi.PluginInfo{Name: "claimer", Version: "0.1.0", Subscriptions: []string{"demo.claim"}}, nil
		},
		Handle: func(b *abi.Batch) (abi.Reply, error) {
			for _, ev := range b.Events {
				var id string
				_ = msgpack.Unmarshal(ev.Data, &id)
				_ = host.Publish(&abi.Event{ID: id, Type: "app.claimed"})
			}
			return abi.Reply{}, nil
		},
	}
}

var claimerManifest = []byte(`[plugin]
name = "claimer"
version = "0.1.0"
kinds = ["input"]

[grants]
subscribe = ["demo.>"]
publish = ["app.>"]
`)

// idsSession is a door into the kernel for one principal.
type idsSession struct{ caller kernel.Caller }

func (s idsSession) Caller() kernel.Caller                { return s.caller }
func (s idsSession) Context() context.Context             { return context.Background() }
func (s idsSession) PushEvents(uint64, []abi.Event) error { return nil }
func (s idsSession) PushChunks([]abi.StreamChunk) error   { return nil }
func (s idsSession) EndStream(uint64, *abi.Error) error   { return nil }

func invokeAs(t *testing.T, k *kernel.Kernel, c kernel.Caller, method string, params any) abi.Approval {
	t.Helper()
	raw, err := msgpack.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	out, aerr := k.Invoke(context.Background(), method, &kernel.Call{Session: idsSession{c}, Params: raw})
	if aerr != nil {
		t.Fatalf("%s: %v", method, aerr)
	}
	var a abi.Approval
	if err := msgpack.Unmarshal(out, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestPluginCannotClaimDerivedIDs(t *testing.T) {
	e := newManagerEnv(t)
	claimed := e.watch("app.claimed")
	decided := e.watch(abi.SubjectApprovalDecided)
	e.startFolder(ManagerConfig{Builtins: []plugin.Builtin{{Manifest: claimerManifest, New: claimer}}}, Folder{Path: e.dir})
	e.waitState("claimer", abi.PluginRunning)

	// Published by the operator, so the plugin speaks for itself.
	claim := func(id string) {
		raw, _ := msgpack.Marshal(id)
		if _, err := e.bus.Publish(context.Background(), &abi.Event{Type: "demo.claim", Source: "operator/0", Data: raw}); err != nil {
			t.Fatal(err)
		}
	}
	claim("ap-act1-decided")
	first := claimed.wait(t, 1)[0]
	if first.ID == "ap-act1-decided" || !strings.HasSuffix(first.ID, ":ap-act1-decided") || !strings.HasPrefix(first.ID, first.Source+":") {
		t.Fatalf("the plugin's event %+v: want its id in its source's scope", first)
	}

	agent := kernel.Caller{Kind: kernel.KindAgent, Name: "main"}
	a := invokeAs(t, e.kernel, agent, abi.MethodApprovalRequest, abi.ApprovalRequest{
		ActionID: "act1", CorrelationID: "run1", Tool: "skill.fetch", Mode: abi.ApprovalAlways,
	})
	d := invokeAs(t, e.kernel, kernel.Caller{Kind: kernel.KindOperator}, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: a.ID, Approved: true})
	if d.State != abi.ApprovalApproved || d.Already {
		t.Fatalf("the operator's approval: %+v, want approved now", d)
	}
	if got := decided.wait(t, 1); got[0].ID != "ap-act1-decided" || got[0].Source != abi.PrincipalKernel+"/approval" {
		t.Fatalf("the decision %+v", got[0])
	}

	// The control: the same claim again is the plugin's duplicate; a
	// marker after it shows it was handled.
	claim("ap-act1-decided")
	claim("marker")
	if got := claimed.wait(t, 2); got[1].ID != first.Source+":marker" || got[1].Seq <= first.Seq {
		t.Fatalf("after the repeated claim: %+v, want the marker alone", got)
	}
}
