package plugin_test

import (
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/plugin"
)

// A plugin that serves "upper.text" to other plugins and publishes every
// demo.* event it receives back in upper case. Built with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o upper.wasm
//
// and dropped into the plugins folder with upper.toml beside it, granting
// subscribe ["demo.>"] and publish ["upper.>"].
func Example() {
	plugin.Register(plugin.Plugin{
		Init: func(abi.PluginConfig) (abi.PluginInfo, error) {
			return abi.PluginInfo{
				Name:          "upper",
				Kinds:         []string{abi.KindTool},
				Subscriptions: []string{"demo.>"},
				Services:      []string{"upper.text"},
			}, nil
		},
		Handle: func(b *abi.Batch) (abi.Reply, error) {
			var reply abi.Reply
			for _, ev := range b.Events {
				var s string
				if msgpack.Unmarshal(ev.Data, &s) != nil {
					continue
				}
				data, _ := msgpack.Marshal(strings.ToUpper(s))
				if err := plugin.Publish(&abi.Event{Type: "upper." + ev.Type, Data: data, CausationID: ev.ID}); err != nil {
					plugin.Log(4, err.Error()) // not granted, or too many in this batch
				}
			}
			for _, c := range b.ServiceCalls {
				var s string
				res := abi.CallResult{Token: c.ID}
				if err := msgpack.Unmarshal(c.Args, &s); err != nil {
					res.Error = abi.Errorf(abi.CodeInvalidParams, "upper.text takes a string: %v", err)
				} else {
					res.Result, _ = msgpack.Marshal(strings.ToUpper(s))
				}
				reply.ServiceResults = append(reply.ServiceResults, res)
			}
			return reply, nil
		},
	})
}
