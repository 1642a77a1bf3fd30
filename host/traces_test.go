package host_test

import (
	"context"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/testkit/observe"
	"github.com/kairo-os/kairo/kernel"
)

// callerSession is a session of a given principal, for calling methods as
// someone other than the operator.
type callerSession struct{ caller kernel.Caller }

func (s callerSession) Caller() kernel.Caller                { return s.caller }
func (s callerSession) Context() context.Context             { return context.Background() }
func (s callerSession) PushEvents(uint64, []abi.Event) error { return nil }
func (s callerSession) PushChunks([]abi.StreamChunk) error   { return nil }
func (s callerSession) EndStream(uint64, *abi.Error) error   { return nil }

// traces.export sends what the log holds to the operator's receiver: a
// plugin, a skill or an agent that may call methods is refused it, even
// one whose grants name it; the operator, the control, gets its answer.
func TestTracesExportIsTheOperators(t *testing.T) {
	t.Parallel()
	sink := observe.NewSink(t)
	d := startWith(t, t.TempDir(), "[telemetry]\notlp_endpoint = \""+sink.URL+"\"\n")
	params, err := msgpack.Marshal(abi.TracesExportParams{RunLoops: []string{"01a224e2-ce6a-7b26-89db-501602c5c531"}})
	if err != nil {
		t.Fatal(err)
	}
	call := func(c kernel.Caller) (abi.TracesExportResult, *abi.Error) {
		var res abi.TracesExportResult
		out, aerr := d.Kernel().Invoke(context.Background(), abi.MethodTracesExport, &kernel.Call{Session: callerSession{c}, Params: params})
		if aerr == nil {
			if err := msgpack.Unmarshal(out, &res); err != nil {
				t.Fatal(err)
			}
		}
		return res, aerr
	}
	for _, c := range []kernel.Caller{
		{Kind: kernel.KindPlugin, Name: "probe", Grants: &kernel.Grants{Call: []string{abi.MethodTracesExport}}},
		{Kind: kernel.KindSkill, Name: "probe"},
		{Kind: kernel.KindAgent, Name: "default"},
		{Kind: kernel.KindOperator, Grants: &kernel.Grants{Call: []string{abi.MethodTracesExport}}}, // the operator narrowed
	} {
		if _, aerr := call(c); aerr == nil || aerr.Code != abi.CodePermissionDenied {
			t.Errorf("%s: traces.export answered %v, want permission denied", c, aerr)
		}
	}
	res, aerr := call(kernel.Caller{Kind: kernel.KindOperator})
	if aerr != nil {
		t.Fatalf("the operator: %v", aerr)
	}
	if len(res.Missing) != 1 || !strings.HasPrefix(res.Endpoint, "http://127.0.0.1:") {
		t.Errorf("the operator's export of a run loop the log lacks: %+v", res)
	}
}
