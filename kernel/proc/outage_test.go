package proc

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus/jetstream"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
)

// natsNode is a nats-server with JetStream on a fixed port and folder, so
// that it can be stopped and started again as the same server.
type natsNode struct {
	t    *testing.T
	opts server.Options
	srv  *server.Server
}

func (n *natsNode) start() {
	n.t.Helper()
	o := n.opts
	srv, err := server.NewServer(&o)
	if err != nil {
		n.t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		n.t.Fatal("the nats-server was not ready within 10 s")
	}
	n.srv = srv
}

func (n *natsNode) stop() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		n.srv = nil
	}
}

// A process that exits while the event store cannot be reached has its
// exit recorded once the store is back — once, with its exit code — not
// left open for a restart to call interrupted. The control: a process
// that exits while the store answers has its exit recorded at once.
func TestExitRecordedAfterOutage(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	n := &natsNode{t: t, opts: server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true}}
	n.start()
	t.Cleanup(n.stop)
	store, err := jetstream.Open(jetstream.Config{URL: fmt.Sprintf("nats://127.0.0.1:%d", port), Stream: "OUTAGE", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b := bus.New(store, bus.Config{})
	defer b.Close()
	m := NewManager(b, Config{})
	defer m.Close()

	exits := func() map[string]int {
		got := map[string]int{}
		pt, _ := abi.CompilePattern(abi.SubjectProcessExited)
		b.Replay(context.Background(), bus.Query{Pattern: pt}, func(ev *abi.Event) error {
			var x abi.ProcessExitedEvent
			if msgpack.Unmarshal(ev.Data, &x) == nil && x.ExitCode != nil {
				got[fmt.Sprintf("%s:%d", x.ProcessID, *x.ExitCode)]++
			}
			return nil
		})
		return got
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("not within 20 s: %s", what)
			}
		}
	}

	before, err := m.Spawn(Spec{Argv: []string{"sh", "-c", "exit 2"}}, "owner")
	if err != nil {
		t.Fatal(err)
	}
	eventually("the control's exit is stored", func() bool { return exits()[before.ID()+":2"] == 1 })

	during, err := m.Spawn(Spec{Argv: []string{"sh", "-c", "sleep 1; exit 3"}}, "owner")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // its spawn is stored
	n.stop()
	eventually("the process exits", func() bool { return during.Info().Status != abi.ProcessRunning })
	time.Sleep(1500 * time.Millisecond) // the exit's publish meets the outage
	n.start()
	eventually("the exit is stored once the store is back", func() bool { return exits()[during.ID()+":3"] == 1 })
	time.Sleep(300 * time.Millisecond)
	if got := exits(); got[during.ID()+":3"] != 1 || got[before.ID()+":2"] != 1 || len(got) != 2 {
		t.Fatalf("the stored exits: %v; want each process's once", got)
	}
}
