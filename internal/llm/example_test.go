package llm_test

import (
	"context"
	"fmt"
	"log"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/llm"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/manifests"
)

// kairo up puts the model kairo.toml's [llm] describes behind llm.chat, in a
// Mux; the agent runtime later replays one run loop from its recording while
// the others go on talking to the model.
func ExampleMux() {
	ctx := context.Background()
	b := bus.New(bus.NewMemoryStore(1024), bus.Config{})
	defer b.Close()
	k := kernel.New(b, kernel.Config{})
	defer k.Close()

	cfg, err := manifests.Load("") // [llm] sets no endpoint by default
	if err != nil {
		log.Fatal(err)
	}
	live, err := llm.Open(cfg.LLM, b) // records on b
	if err != nil {
		log.Fatal(err)
	}
	mux := llm.NewMux(live)
	llm.Register(k, mux)

	// Replaying run loop "run-7": its recorded exchanges answer its
	// requests, in order; any other run loop still reaches live.
	events, err := llm.Recorded(ctx, b, "run-7")
	if err != nil {
		log.Fatal(err)
	}
	replay, err := llm.NewReplay(events)
	if err != nil {
		log.Fatal(err)
	}
	mux.Route("run-7", replay)
	defer mux.Route("run-7", nil)

	_, err = mux.Chat(ctx, abi.ChatParams{
		Messages:      []abi.ChatMessage{{Role: abi.RoleUser, Content: "hello"}},
		CorrelationID: "run-8",
	})
	fmt.Println(llm.ToABIError(err).Code)
	// Output: unavailable
}
