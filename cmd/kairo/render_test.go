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

// progressEvent is a kairo.process.progress event of process p at t.
func progressEvent(t *testing.T, p string, at time.Time, values map[string]string) *abi.Event {
	t.Helper()
	data, err := msgpack.Marshal(map[string]any{"processId": p, "stream": "stdout", "values": values})
	if err != nil {
		t.Fatal(err)
	}
	return &abi.Event{Type: "kairo.process.progress", Time: at, Data: data, CorrelationID: "run-1"}
}

// A progress report reads the same everywhere: plain "progress 40% (8/20)",
// or a bar whose rate and ETA come from the earlier reports' times.
func TestProgressForms(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	var m progressMeter
	first, _ := m.read(progressEvent(t, "p1", t0, map[string]string{"step": "4", "total": "20"}))
	second, ok := m.read(progressEvent(t, "p1", t0.Add(time.Second), map[string]string{"step": "8", "total": "20", "file": "b.txt"}))
	if !ok {
		t.Fatal("a progress event was not read")
	}
	if got := first.plain(); got != "progress 20% (4/20)" {
		t.Errorf("plain = %q", got)
	}
	// The control: the first report has no rate to give, the second has.
	if got := first.bar(); got != "[####................]  20% (4/20)" {
		t.Errorf("first bar = %q", got)
	}
	if got := second.bar(); got != "[########............]  40% (8/20) 4.0/s ETA 3s file=b.txt" {
		t.Errorf("second bar = %q", got)
	}
	if got := second.plain(); got != "progress 40% (8/20) file=b.txt" {
		t.Errorf("plain = %q", got)
	}
	pct, _ := m.read(progressEvent(t, "p2", t0, map[string]string{"percent": "25"}))
	if got := pct.plain(); got != "progress 25%" {
		t.Errorf("percent only: %q", got)
	}
	pct, _ = m.read(progressEvent(t, "p2", t0.Add(2*time.Second), map[string]string{"percent": "50"}))
	if got := pct.bar(); got != "[##########..........]  50% 12%/s ETA 4s" {
		t.Errorf("percent bar = %q", got)
	}
	if _, ok := readProgress(&abi.Event{Type: "kairo.process.exited"}); ok {
		t.Error("an exit read as progress")
	}
}

// On a terminal a process's progress redraws its line (cursor up, erase);
// anything printed between starts a new one. Piped, each report is a plain
// line and no escape sequence is written; as JSON, the event.
func TestScreenProgress(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	ev := func(step string, s int) *abi.Event {
		return progressEvent(t, "p1", t0.Add(time.Duration(s)*time.Second), map[string]string{"step": step, "total": "4"})
	}
	var b strings.Builder
	s := newScreen(&b, progressTerminal, 80)
	s.progress(ev("1", 0), "· ")
	first := b.String()
	s.progress(ev("2", 1), "· ")
	redraw := strings.TrimPrefix(b.String(), first)
	if strings.Contains(first, "\x1b[1A") || redraw != "\x1b[1A\r\x1b[K· [##########..........]  50% (2/4) 1.0/s ETA 2s\n" {
		t.Errorf("terminal: first %q, then %q; want the second to redraw the first's line", first, redraw)
	}
	s.line("agent> hello")
	before := b.String()
	s.progress(ev("3", 2), "· ")
	if after := strings.TrimPrefix(b.String(), before); strings.Contains(after, "\x1b[1A") || !strings.HasPrefix(after, "· [###############") {
		t.Errorf("after a line, progress must start a line of its own: %q", after)
	}

	// With the chat's prompt, the prompt follows each line and is cleared
	// before a redraw.
	b.Reset()
	s = newScreen(&b, progressTerminal, 80)
	s.setPrompt("you> ")
	s.progress(ev("1", 0), "· [run-1] ")
	s.progress(ev("2", 1), "· [run-1] ")
	if got := b.String(); !strings.HasSuffix(got, "\nyou> \r\x1b[K\x1b[1A\r\x1b[K· [run-1] [##########..........]  50% (2/4) 1.0/s ETA 2s\nyou> ") {
		t.Errorf("terminal with a prompt: %q", got)
	}

	b.Reset()
	s = newScreen(&b, progressPlain, 0)
	s.progress(ev("1", 0), "· ")
	s.progress(ev("2", 1), "· ")
	if got := b.String(); got != "· progress 25% (1/4)\n· progress 50% (2/4)\n" {
		t.Errorf("plain: %q", got)
	}

	b.Reset()
	s = newScreen(&b, progressJSON, 0)
	s.progress(ev("2", 1), "· ")
	if got := b.String(); !strings.HasPrefix(got, `{"seq":0,`) || !strings.Contains(got, `"type":"kairo.process.progress"`) || !strings.Contains(got, `"values":{"step":"2","total":"4"}`) && !strings.Contains(got, `"values":{"total":"4","step":"2"}`) {
		t.Errorf("json: %q", got)
	}

	// A progress line never wraps: redrawing it would overwrite the line above.
	b.Reset()
	s = newScreen(&b, progressTerminal, 30)
	s.progress(ev("1", 0), "· ")
	if line := strings.TrimSuffix(b.String(), "\n"); len([]rune(line)) != 29 || !strings.HasSuffix(line, "…") {
		t.Errorf("clipped to a 30-column terminal: %q", line)
	}
}
