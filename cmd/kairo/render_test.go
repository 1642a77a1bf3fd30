package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/vmihailenco/msgpack/v5"
)

func TestJSONThroughMsgpack(t *testing.T) {
	for _, tc := range []struct{ in, out string }{
		{`{}`, `{}`},
		{`[]`, `[]`},
		{`null`, `null`},
		{`"hé <b>"`, `"hé <b>"`},
		{`{"z":1,"a":{"y":[true,false,null],"b":"x"}}`, `{"z":1,"a":{"y":[true,false,null],"b":"x"}}`},
		{`{"a":1,"a":2,"b":3}`, `{"a":2,"b":3}`},
		{`[0,-1,127,-129,65536,9223372036854775807,-9223372036854775808,18446744073709551615]`,
			`[0,-1,127,-129,65536,9223372036854775807,-9223372036854775808,18446744073709551615]`},
		{`[1.5,-0.25,1e300,2.0]`, `[1.5,-0.25,1e+300,2]`},
		{` {"spaced" : [ 1 , 2 ] } `, `{"spaced":[1,2]}`},
	} {
		mp, err := jsonToMsgpack(tc.in)
		if err != nil {
			t.Errorf("jsonToMsgpack(%s): %v", tc.in, err)
			continue
		}
		got, err := msgpackToJSON(mp)
		if err != nil || string(got) != tc.out {
			t.Errorf("%s → MsgPack → %s, %v; want %s", tc.in, got, err, tc.out)
		}
	}
}

func TestJSONNumbersAreTyped(t *testing.T) {
	mp, err := jsonToMsgpack(`{"i":42,"f":4.5,"big":18446744073709551615}`)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := msgpack.Unmarshal(mp, &m); err != nil {
		t.Fatal(err)
	}
	// Compact ints: 42 arrives as the smallest integer type, never a float.
	if _, ok := m["i"].(float64); ok {
		t.Errorf("42 became a float")
	}
	if m["f"] != 4.5 || m["big"] != uint64(math.MaxUint64) {
		t.Errorf("decoded %#v", m)
	}
}

func TestMsgpackToJSONKinds(t *testing.T) {
	when := time.Date(2025, 6, 1, 10, 0, 0, 5, time.UTC)
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"binary", []byte("hi"), `"aGk="`},
		{"time", when, `"2025-06-01T10:00:00.000000005Z"`},
		{"int keys", map[int]string{7: "x"}, `{"7":"x"}`},
		{"float32", float32(0.1), `0.1`},
		{"NaN", math.NaN(), `"NaN"`},
		{"-Inf", math.Inf(-1), `"-Inf"`},
		{"no HTML escaping", "<&>", `"<&>"`},
	} {
		raw, err := msgpack.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := msgpackToJSON(raw)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %s, %v; want %s", tc.name, got, err, tc.want)
		}
	}
	// An unknown extension keeps its bytes.
	got, err := msgpackToJSON([]byte{0xd4, 0x05, 0x2a}) // fixext1, type 5, byte 42
	if err != nil || string(got) != `{"ext":5,"data":"Kg=="}` {
		t.Errorf("ext: %s, %v", got, err)
	}
	for _, bad := range [][]byte{{0x92, 0x01}, {0xc1}, {0x01, 0x02}} {
		if got, err := msgpackToJSON(bad); err == nil {
			t.Errorf("msgpackToJSON(% x) = %s, want an error", bad, got)
		}
	}
}

func TestEventRendering(t *testing.T) {
	ev := &abi.Event{
		Seq: 12, ID: "e1", Type: "app.x", Source: "cli",
		Time: time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC),
		Data: must(jsonToMsgpack(`{"k":"v"}`)), CorrelationID: "run-1",
	}
	line := eventLine(ev)
	if !strings.HasPrefix(line, "[12] ") || !strings.HasSuffix(line, ` app.x cli {"k":"v"}`) {
		t.Errorf("eventLine = %q", line)
	}
	want := `{"seq":12,"id":"e1","type":"app.x","source":"cli","time":"2025-06-01T10:00:00Z","data":{"k":"v"},"correlationId":"run-1","causationId":""}`
	if got := string(eventObject(ev)); got != want {
		t.Errorf("eventObject =\n%s\nwant\n%s", got, want)
	}
	ev.Data = []byte{0xc1} // never valid MsgPack
	if got := string(eventObject(ev)); !strings.Contains(got, `"data":{"undecodable":"wQ==","error":`) {
		t.Errorf("undecodable data: %s", got)
	}
	ev.Data = nil
	if got := eventLine(ev); !strings.HasSuffix(got, " app.x cli") {
		t.Errorf("eventLine without data = %q", got)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
