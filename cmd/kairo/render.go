package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/jsonview"
)

// timeLayout is RFC 3339 with milliseconds, for the one-line form.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// eventLine renders an event on one line for people:
//
//	[12] 2025-06-01T10:00:00.000+02:00 app.order.created cli {"id":7}
//
// The type and the source are the publisher's words, shown escaped; the
// data is JSON, escaped by marshalJSON. When kairos share one store, the
// source is followed by @ and the host that published it (cli@build-2).
func eventLine(ev *abi.Event) string {
	var b bytes.Buffer
	src := ev.Source
	if ev.Host != "" {
		src += "@" + ev.Host
	}
	fmt.Fprintf(&b, "[%d] %s %s %s", ev.Seq, ev.Time.Local().Format(timeLayout), termLine(ev.Type), termLine(src))
	if len(ev.Data) > 0 {
		b.WriteByte(' ')
		b.Write(dataJSON(ev.Data))
	}
	return b.String()
}

// eventObject renders an event as one JSON object (no newline), the form
// the console serves too.
func eventObject(ev *abi.Event) []byte { return jsonview.EventObject(ev) }

// dataJSON converts event data to JSON (jsonview.Data).
func dataJSON(raw []byte) json.RawMessage { return jsonview.Data(raw) }

// marshalJSON is json.Marshal without HTML escaping, safe for a terminal
// (jsonview.Marshal).
func marshalJSON(v any) []byte { return jsonview.Marshal(v) }

// maxDepth bounds nesting, so hostile data cannot exhaust the stack.
const maxDepth = jsonview.MaxDepth

// msgpackToJSON converts one MsgPack value to JSON (jsonview.FromMsgpack).
func msgpackToJSON(raw []byte) (json.RawMessage, error) { return jsonview.FromMsgpack(raw) }

// yesNo is b as a table shows it.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
