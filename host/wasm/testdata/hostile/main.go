// Command hostile is a plugin built with the SDK that misbehaves as its
// config says: {"mode": "loop"} loops in Handle, "loopinit" in Init, "panic"
// panics in Handle, "grow" allocates until memory runs out, "flood"
// publishes until the host says no, "imports" calls, logs and reads the
// clock; any other mode answers with one noop.
//
// Under the plugin manager, three more modes answer events: "ping" calls
// the method named by the config's "method" (default kernel.ping) for each
// event and publishes each result as "ping.result"; "recurse" serves
// hostile.recurse and, for each event and each service call, calls
// hostile.recurse again, publishing "recurse.result" with each answer;
// "readfile" reads the file named by the config's "path" for each event and
// publishes "file.read" saying what it got.
//
// Mode "cost" makes the host pay as its config says, in each batch: "calls"
// calls of "method" (default kernel.ping) with "callSize" bytes of
// arguments, "publishes" events of a bin of "publishSize" bytes on
// "subject" (default "cost.event"), "logs" log lines of "logSize" bytes, and a reply of
// "actions" empty actions; it says in its thought how many calls and
// publishes the host took. A batch without events (the results of its
// calls) it answers with nothing. Mode "hoard" serves hostile.hoard and never
// answers it: for each event it calls hostile.hoard "calls" times (default
// 100), and publishes each refusal and each result as "ping.result".
//
// For the suite against a running daemon (cmd/kairo/hostile_test.go),
// where a drop-in publishes in its own namespace only, the config's
// "prefix" ("plugin.NAME.") goes before every subject it publishes on, and
// each batch it handles without failing ends with a "done" event whose
// text is its thought; its service is NAME.recurse or NAME.hoard, after
// the name it is given. Each misbehaviour has a bounded twin, for the
// controls: "n" bounds the iterations of loop and loopinit, the publishes
// of flood and the service calls of recurse; "mib" the MiB grow holds;
// "recover" makes panic recover; "answer" makes hoard answer its service
// calls. Mode "clock" reads the clock "n" times (0: for ever) and "sleep"
// sleeps "ms" milliseconds.
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/plugin"
)

func init() { plugin.Register(plugin.Plugin{Init: setup, Handle: handle}) }

func main() {}

var (
	prefix string
	self   string // the plugin's name, which its services are named after
	calls  int    // the recurse calls made so far
	mode   string
	config map[string]any
	sink   [][]byte
	spin   int
)

func setup(cfg abi.PluginConfig) (abi.PluginInfo, error) {
	config = cfg.Config
	mode, _ = cfg.Config["mode"].(string)
	prefix, _ = cfg.Config["prefix"].(string)
	info := abi.PluginInfo{Name: "hostile", Kinds: []string{abi.KindPolicy}}
	if name, ok := cfg.Config["name"].(string); ok {
		info.Name = name // a second instance, as a control beside the first
	}
	self = info.Name
	if sub, ok := cfg.Config["subscribe"].(string); ok {
		info.Subscriptions = []string{sub}
	}
	switch mode {
	case "loopinit":
		for n := num("n", 0); n == 0 || spin < n; {
			spin++
		}
	case "recurse":
		info.Services = []string{self + ".recurse"}
	case "hoard":
		info.Services = []string{self + ".hoard"}
	}
	return info, nil
}

// result is what the manager modes publish.
type result struct {
	OK    bool   `msgpack:"ok"`
	Error string `msgpack:"error,omitempty"`
	Text  string `msgpack:"text,omitempty"`
}

func emit(subject string, r result) error {
	data, err := msgpack.Marshal(r)
	if err != nil {
		return err
	}
	return plugin.Publish(&abi.Event{Type: prefix + subject, Data: data})
}

func emitResults(subject string, b *abi.Batch) error {
	for _, r := range b.CallResults {
		res := result{OK: r.Error == nil}
		if r.Error != nil {
			res.Error = r.Error.Code + ": " + r.Error.Message
		}
		if err := emit(subject, res); err != nil {
			return err
		}
	}
	return nil
}

func handle(b *abi.Batch) (abi.Reply, error) {
	reply, err := misbehave(b)
	if err == nil && prefix != "" {
		if err := emit("done", result{OK: true, Text: reply.Thought}); err != nil {
			reply.Thought += "; done refused: " + err.Error()
		}
	}
	return reply, err
}

func misbehave(b *abi.Batch) (abi.Reply, error) {
	switch mode {
	case "loop":
		for n := num("n", 0); n == 0 || spin < n; {
			spin++
		}
		return abi.Reply{Thought: fmt.Sprintf("looped %d times", spin)}, nil
	case "panic":
		if config["recover"] == true {
			defer func() { _ = recover() }()
		}
		panic("hostile plugin panics in handle")
	case "grow":
		for n := num("mib", 0); n == 0 || len(sink) < n; {
			sink = append(sink, make([]byte, 1<<20))
		}
		return abi.Reply{Thought: fmt.Sprintf("holds %d MiB", len(sink))}, nil
	case "flood":
		n := num("n", 0)
		for i := 0; n == 0 || i < n; i++ {
			if err := plugin.Publish(&abi.Event{Type: prefix + "flood"}); err != nil {
				return abi.Reply{Thought: fmt.Sprintf("refused after %d: %v", i, err)}, nil
			}
		}
		return abi.Reply{Thought: fmt.Sprintf("published %d", n)}, nil
	case "clock":
		var last time.Time
		for i, n := 0, num("n", 0); n == 0 || i < n; i++ {
			last = plugin.Now()
		}
		return abi.Reply{Thought: "the clock says " + last.UTC().Format(time.RFC3339Nano)}, nil
	case "sleep":
		time.Sleep(time.Duration(num("ms", 0)) * time.Millisecond)
		return abi.Reply{Thought: "slept"}, nil
	case "imports":
		tok, err := plugin.Call(abi.MethodKernelPing, map[string]any{"n": 1})
		if err != nil {
			return abi.Reply{}, err
		}
		plugin.Log(0, fmt.Sprintf("called kernel.ping, token %d", tok))
		return abi.Reply{Thought: plugin.Now().UTC().Format(time.RFC3339Nano), Actions: []abi.Action{{ID: fmt.Sprint(tok), Type: abi.ActionNoop}}}, nil
	case "ping":
		method, _ := config["method"].(string)
		if method == "" {
			method = abi.MethodKernelPing
		}
		for range b.Events {
			if _, err := plugin.Call(method, map[string]any{}); err != nil {
				if err := emit("ping.result", result{Error: err.Error()}); err != nil {
					return abi.Reply{}, err
				}
			}
		}
		return abi.Reply{}, emitResults("ping.result", b)
	case "recurse":
		var reply abi.Reply
		for range len(b.Events) + len(b.ServiceCalls) {
			if n := num("n", 0); n > 0 && calls >= n {
				break
			}
			calls++
			if _, err := plugin.Call(self+".recurse", nil); err != nil {
				return reply, err
			}
		}
		for _, c := range b.ServiceCalls {
			reply.ServiceResults = append(reply.ServiceResults, abi.CallResult{Token: c.ID, Result: msgpack.RawMessage{0xc3}})
		}
		return reply, emitResults("recurse.result", b)
	case "cost":
		if len(b.Events) == 0 {
			// The results of its calls: answering them with more calls
			// would loop.
			return abi.Reply{Thought: "results"}, nil
		}
		return cost()
	case "hoard":
		var reply abi.Reply
		for range b.Events {
			for range num("calls", 100) {
				if _, err := plugin.Call(self+".hoard", nil); err != nil {
					if err := emit("ping.result", result{Error: err.Error()}); err != nil {
						return abi.Reply{}, err
					}
				}
			}
		}
		if config["answer"] == true {
			for _, c := range b.ServiceCalls {
				reply.ServiceResults = append(reply.ServiceResults, abi.CallResult{Token: c.ID, Result: msgpack.RawMessage{0xc3}})
			}
		}
		return reply, emitResults("ping.result", b)
	case "readfile":
		path, _ := config["path"].(string)
		for range b.Events {
			text, err := os.ReadFile(path)
			r := result{OK: err == nil, Text: string(text)}
			if err != nil {
				r.Error = err.Error()
			}
			if err := emit("file.read", r); err != nil {
				return abi.Reply{}, err
			}
		}
		return abi.Reply{}, nil
	}
	return abi.Reply{Thought: "fine", Actions: []abi.Action{{Type: abi.ActionNoop}}}, nil
}

// num reads an integer from the config, whatever width MsgPack gave it.
func num(key string, def int) int {
	switch v := config[key].(type) {
	case int8:
		return int(v)
	case int16:
		return int(v)
	case int32:
		return int(v)
	case int64:
		return int(v)
	case uint8:
		return int(v)
	case uint16:
		return int(v)
	case uint32:
		return int(v)
	case uint64:
		return int(v)
	case float64:
		return int(v)
	}
	return def
}

func cost() (abi.Reply, error) {
	method, _ := config["method"].(string)
	if method == "" {
		method = abi.MethodKernelPing
	}
	args, _ := msgpack.Marshal(map[string]string{"pad": string(make([]byte, num("callSize", 0)))})
	subject, _ := config["subject"].(string)
	if subject == "" {
		subject = prefix + "cost.event"
	}
	called, published := 0, 0
	for range num("calls", 0) {
		if _, err := plugin.Call(method, msgpack.RawMessage(args)); err == nil {
			called++
		}
	}
	data, _ := msgpack.Marshal(make([]byte, num("publishSize", 0)))
	for range num("publishes", 0) {
		if err := plugin.Publish(&abi.Event{Type: subject, Data: data}); err == nil {
			published++
		}
	}
	line := string(make([]byte, num("logSize", 1)))
	for range num("logs", 0) {
		plugin.Log(0, line)
	}
	reply := abi.Reply{Thought: fmt.Sprintf("called %d, published %d", called, published)}
	reply.Actions = make([]abi.Action, num("actions", 0))
	return reply, nil
}
