package kernel

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kairo-os/kairo/abi"
	"github.com/vmihailenco/msgpack/v5"
)

// Grants narrow what a caller may do: the methods it may call and the
// subjects it may publish on and subscribe to. A sandboxed skill's are its
// manifest's [ipc]; a plugin's are its manifest's [grants] as the operator
// allowed them (host/wasm.Grants holds them, and its calls carry them). A
// caller without grants (nil) is an ordinary client of its uid.
type Grants struct {
	Call      []string // methods, such as "events.publish"
	Publish   []string // subjects or patterns events.publish may use
	Subscribe []string // patterns events.subscribe and events.replay may use
}

// allow says why method with params is not granted, or nil.
func (g *Grants) allow(method string, params msgpack.RawMessage) error {
	if !slices.Contains(g.Call, method) {
		return fmt.Errorf("not granted: %s (its grants' call list has %s)", method, listOrNone(g.Call))
	}
	switch method {
	case abi.MethodEventsPublish:
		var p abi.PublishParams
		if err := msgpack.Unmarshal(params, &p); err != nil {
			return nil // the method itself reports bad params
		}
		if !coveredBy(p.Event.Type, g.Publish) {
			return fmt.Errorf("not granted: events.publish of %q (its grants' publish list has %s)", p.Event.Type, listOrNone(g.Publish))
		}
	case abi.MethodEventsSubscribe, abi.MethodEventsReplay:
		var p abi.SubscribeParams // replay's pattern has the same key
		if err := msgpack.Unmarshal(params, &p); err != nil {
			return nil
		}
		if !coveredBy(p.Pattern, g.Subscribe) {
			return fmt.Errorf("not granted: %s of %q (its grants' subscribe list has %s)", method, orAll(p.Pattern), listOrNone(g.Subscribe))
		}
	}
	return nil
}

// coveredBy reports whether every subject pattern p matches is matched by
// one of grants.
func coveredBy(p string, grants []string) bool {
	for _, g := range grants {
		if abi.Covers(g, p) {
			return true
		}
	}
	return false
}

func orAll(p string) string {
	if p == "" {
		return ">"
	}
	return p
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "nothing"
	}
	return strings.Join(l, ", ")
}

// checkGrants refuses a call its caller's grants do not allow.
func checkGrants(method string, call *Call) *abi.Error {
	if call == nil || call.Session == nil {
		return nil
	}
	g := call.Session.Caller().Grants
	if g == nil {
		return nil
	}
	if err := g.allow(method, call.Params); err != nil {
		return abi.Errorf(abi.CodePermissionDenied, "%v", err)
	}
	return nil
}
