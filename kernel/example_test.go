package kernel_test

import (
	"context"
	"fmt"
	"log"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/vmihailenco/msgpack/v5"
)

// session is an in-process door into the kernel for one caller, as the
// plugin engine and the agent are: the kernel asks it who calls, and pushes
// what the caller subscribed to through it.
type session struct {
	ctx    context.Context
	caller kernel.Caller
}

func (s *session) Caller() kernel.Caller                { return s.caller }
func (s *session) Context() context.Context             { return s.ctx }
func (s *session) PushEvents(uint64, []abi.Event) error { return nil }
func (s *session) PushChunks([]abi.StreamChunk) error   { return nil }
func (s *session) EndStream(uint64, *abi.Error) error   { return nil }

// A kernel on a bus with an in-memory store: a host part registers a
// method of its own in the one table, and a caller invokes it and a
// built-in, as an IPC client or a plugin would.
func Example() {
	ctx := context.Background()
	b := bus.New(bus.NewMemoryStore(0), bus.Config{})
	defer b.Close()
	k := kernel.New(b, kernel.Config{})
	defer k.Close()

	type greetParams struct {
		Name string `msgpack:"name"`
	}
	k.Register(kernel.Method{
		Name:    "demo.greet",
		Summary: "say hello to whoever is named",
		Quick:   true, // answers at once: a door may run it on its reader
		Handler: func(ctx context.Context, c *kernel.Call) (any, error) {
			var p greetParams
			if err := c.Decode(&p); err != nil {
				return nil, err
			}
			if p.Name == "" {
				return nil, abi.Errorf(abi.CodeInvalidParams, "name is empty: say who to greet")
			}
			return "hello, " + p.Name + ", from " + c.Session.Caller().String(), nil
		},
	})

	op := &session{ctx: ctx, caller: kernel.Caller{Kind: kernel.KindOperator, PID: 4242, UID: 1000}}
	params, _ := msgpack.Marshal(greetParams{Name: "kairo"})
	raw, aerr := k.Invoke(ctx, "demo.greet", &kernel.Call{Session: op, Params: params})
	if aerr != nil {
		log.Fatal(aerr)
	}
	var greeting string
	msgpack.Unmarshal(raw, &greeting)
	fmt.Println(greeting)

	// A handler's error reaches the caller as the abi.Error it returned.
	params, _ = msgpack.Marshal(greetParams{})
	_, aerr = k.Invoke(ctx, "demo.greet", &kernel.Call{Session: op, Params: params})
	fmt.Println(aerr.Code)

	// events.publish stamps the source from the caller, never from the event.
	params, _ = msgpack.Marshal(abi.PublishParams{Event: abi.Event{Type: "app.order.created"}})
	raw, aerr = k.Invoke(ctx, abi.MethodEventsPublish, &kernel.Call{Session: op, Params: params})
	if aerr != nil {
		log.Fatal(aerr)
	}
	var res abi.PublishResult
	msgpack.Unmarshal(raw, &res)
	b.Replay(ctx, bus.Query{FromSeq: res.Seq}, func(ev *abi.Event) error {
		fmt.Println(ev.Seq, ev.Type, ev.Source)
		return nil
	})
	// Output:
	// hello, kairo, from operator pid 4242 (uid 1000)
	// invalid_params
	// 1 app.order.created operator/1000
}
