package host_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/wasmbuild"
	"github.com/kairo-os/kairo/kernel/bus"
)

// A drop-in policy plugin can be an agent's policy: with [agents.bot] on
// the echo plugin from the drop-in folder, a message for bot is ticked by
// it — bot records the tick that observed it — while the default agent's
// rules answer the one for it (the control). agent.list names both.
func TestDaemonRunsADropInPolicyForAnAgent(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	plugins := filepath.Join(home, "plugins")
	if err := wasmbuild.Plugin("echo", plugins); err != nil {
		t.Fatal(err)
	}
	toml, err := os.ReadFile(filepath.Join("..", "plugins", "echo", "echo.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plugins, "echo.toml"), toml, 0o600); err != nil {
		t.Fatal(err)
	}
	d := startWith(t, home, "[agents.bot]\npolicy = \"echo\"\ndescription = \"echoes\"\n")
	k := d.Kernel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make(chan abi.Event, 64)
	sub, err := k.Bus.Subscribe(ctx, ">", bus.SubscribeConfig{FromSeq: k.Bus.LastSeq() + 1}, func(evs []abi.Event) error {
		for _, ev := range evs {
			ev.Data = slices.Clone(ev.Data)
			select {
			case got <- ev:
			default:
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	send := func(text string) string {
		raw, _ := msgpack.Marshal(abi.UserMessage{Text: text, MessageID: abi.NewID()})
		ev := &abi.Event{Type: abi.SubjectUserMessage, Source: "test", Data: raw}
		if _, err := k.Bus.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
		return ev.ID
	}
	toBot, toDefault := send("@bot hello"), send("help")
	var routed string
	botTicked, defaultSaid := false, false
	for !botTicked || !defaultSaid {
		var ev abi.Event
		select {
		case ev = <-got:
		case <-ctx.Done():
			t.Fatalf("bot ticked: %v, the default agent answered: %v", botTicked, defaultSaid)
		}
		switch {
		case ev.Type == abi.AgentMessageSubject("bot") && ev.CausationID == toBot:
			routed = ev.ID
		case ev.Type == abi.SubjectAgentTick && ev.Source == "agent/bot" && routed != "":
			var rec abi.TickRecord
			botTicked = msgpack.Unmarshal(ev.Data, &rec) == nil && slices.Contains(rec.Observed, routed)
		case ev.Type == abi.AgentMessageSubject("default") && ev.CausationID == toDefault:
			defaultSaid = true
		case ev.Type == abi.AgentMessageSubject("default") && ev.CausationID == toBot:
			t.Fatal("the message for bot reached the default agent")
		}
	}
	c, err := d.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var list abi.AgentsResult
	if err := c.Call(ctx, abi.MethodAgentList, nil, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Agents) != 2 || list.Agents[0].ID != "default" || !list.Agents[0].Default || list.Agents[1].ID != "bot" ||
		list.Agents[1].Policy != "echo" || list.Agents[1].Description != "echoes" || list.Agents[1].Grants.Commands {
		t.Errorf("agent.list: %+v", list.Agents)
	}
}
