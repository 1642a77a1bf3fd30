package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/vmihailenco/msgpack/v5"
)

// What a hostile publisher or tool server writes: OSC 52 (set the
// clipboard), CSI 2K (erase the line), a carriage return, an 8-bit CSI, a
// bidi override, DEL and a byte that is not UTF-8.
const (
	osc52   = "\x1b]52;c;cm0gLXJmIH4K\x07"
	eraseLn = "\x1b[2K"
	hostile = "ok" + osc52 + eraseLn + "\rfake\u009b31m\u202eevil\x7f\xff"
)

// rawControls reports the first character of out a terminal would act on.
func rawControls(out string) (rune, bool) {
	for _, r := range out {
		switch {
		case r == '\n' || r == '\t':
		case r < 0x20, r == 0x7f, unsafeRune(r):
			return r, true
		}
	}
	return 0, false
}

func TestTermSafe(t *testing.T) {
	for _, c := range []struct{ in, line, text string }{
		// Controls: text passes unchanged.
		{"plain text", "plain text", "plain text"},
		{"héllo 世界 🙂", "héllo 世界 🙂", "héllo 世界 🙂"},
		{"", "", ""},
		{"a\tb\nc", "a^Ib^Jc", "a\tb\nc"},
		// Attacks: shown, not obeyed.
		{osc52, "^[]52;c;cm0gLXJmIH4K^G", "^[]52;c;cm0gLXJmIH4K^G"},
		{eraseLn + "x", "^[[2Kx", "^[[2Kx"},
		{"a\rb", "a^Mb", "a^Mb"},
		{"\x00\x7f", "^@^?", "^@^?"},
		{"\u009b2J\u009d0;t\u009c", "<U+009B>2J<U+009D>0;t<U+009C>", "<U+009B>2J<U+009D>0;t<U+009C>"},
		{"abc\u202edcb\u2066x\u2069\u200f", "abc<U+202E>dcb<U+2066>x<U+2069><U+200F>", "abc<U+202E>dcb<U+2066>x<U+2069><U+200F>"},
		{"a\u2028b", "a<U+2028>b", "a<U+2028>b"},
		{"bad \xff\xfe utf-8", "bad \uFFFD\uFFFD utf-8", "bad \uFFFD\uFFFD utf-8"},
	} {
		if got := termLine(c.in); got != c.line {
			t.Errorf("termLine(%q) = %q; want %q", c.in, got, c.line)
		}
		if got := termText(c.in); got != c.text {
			t.Errorf("termText(%q) = %q; want %q", c.in, got, c.text)
		}
	}
}

func hostileEvent(t *testing.T, text string) *abi.Event {
	t.Helper()
	data, err := msgpack.Marshal(map[string]any{"msg": text, text: []any{text}})
	if err != nil {
		t.Fatal(err)
	}
	return &abi.Event{Seq: 7, ID: "01J" + text, Type: "app.x" + text, Source: "src" + text,
		Time: time.Unix(1700000000, 0), Data: data, CorrelationID: text, CausationID: text}
}

// kairo events tail/replay print an event's envelope and data: nothing in
// them reaches the terminal raw, in the line form or the --json form, and
// the JSON still means what the publisher wrote.
func TestEventRenderingEscapes(t *testing.T) {
	ev := hostileEvent(t, hostile)
	line := eventLine(ev)
	if r, bad := rawControls(line); bad {
		t.Errorf("eventLine holds a raw %U:\n%q", r, line)
	}
	for _, want := range []string{"app.xok^[]52;c;cm0gLXJmIH4K^G^[[2K^Mfake<U+009B>31m<U+202E>evil^?\uFFFD", "srcok^[]52"} {
		if !strings.Contains(line, want) {
			t.Errorf("eventLine does not show %q:\n%s", want, line)
		}
	}
	obj := eventObject(ev)
	if r, bad := rawControls(string(obj)); bad {
		t.Errorf("eventObject holds a raw %U:\n%q", r, obj)
	}
	var back struct {
		Source string         `json:"source"`
		Type   string         `json:"type"`
		Data   map[string]any `json:"data"`
	}
	if err := json.Unmarshal(obj, &back); err != nil {
		t.Fatalf("eventObject is not JSON: %v\n%s", err, obj)
	}
	// encoding/json replaces the byte that is not UTF-8; the rest is kept.
	want := strings.ToValidUTF8(hostile, "\uFFFD")
	if back.Source != "src"+want || back.Type != "app.x"+want || back.Data["msg"] != want {
		t.Errorf("the JSON decodes to source %q type %q msg %q; want them to carry %q", back.Source, back.Type, back.Data["msg"], want)
	}

	// The control: plain and UTF-8 text print as they are.
	plain := hostileEvent(t, "héllo 世界")
	// The data's keys come in either order (a map's).
	got := eventLine(plain)
	head, data, _ := strings.Cut(got, " {")
	if !strings.HasSuffix(head, "app.xhéllo 世界 srchéllo 世界") ||
		!strings.Contains(data, `"msg":"héllo 世界"`) || !strings.Contains(data, `"héllo 世界":["héllo 世界"]`) {
		t.Errorf("eventLine = %s\nwant it to end app.xhéllo 世界 srchéllo 世界 and the data {msg, héllo 世界} as they are", got)
	}
	if got := string(eventObject(plain)); !strings.Contains(got, `"source":"srchéllo 世界"`) {
		t.Errorf("eventObject = %s", got)
	}
}

// What kairo chat and kairo send print of the agent's replies, tool calls
// and errors is escaped; a reply keeps its lines.
func TestChatLineEscapes(t *testing.T) {
	for _, c := range []struct {
		typ  string
		data any
		want string
	}{
		{abi.SubjectAgentAction, abi.ActionEvent{Type: abi.ActionSay, ActionData: abi.ActionData{Text: "line one\n" + hostile}}, "agent> line one\nok^[]52"},
		{abi.SubjectAgentAction, abi.ActionEvent{Type: abi.ActionToolCall, ActionData: abi.ActionData{Tool: "t" + osc52, Args: `{"a":"` + eraseLn + `"}`}}, `t^[]52;c;cm0gLXJmIH4K^G {"a":"^[[2K"}`},
		{"kairo.agent.error", map[string]any{"error": hostile}, "· the agent: ok^[]52"},
		{"kairo.process.progress", map[string]any{"values": map[string]any{"time": hostile}}, "time=ok^[]52"},
		{abi.SubjectAgentAction, abi.ActionEvent{Type: abi.ActionSay, ActionData: abi.ActionData{Text: "héllo 世界\nbye"}}, "agent> héllo 世界\nbye"},
	} {
		data, err := msgpack.Marshal(c.data)
		if err != nil {
			t.Fatal(err)
		}
		got := chatLine(&abi.Event{Type: c.typ, Data: data, CorrelationID: "run" + osc52}, false)
		if r, bad := rawControls(got); bad {
			t.Errorf("chatLine holds a raw %U: %q", r, got)
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("chatLine = %q; want it to contain %q", got, c.want)
		}
	}
}

// kairo tools NAME shows a tool's description as the tool's provider wrote
// it, escaped: here a skill's manifest, whose TOML escapes can write any
// control character, as an MCP server's tool list can.
func TestToolsCommandEscapes(t *testing.T) {
	dir := t.TempDir()
	skills := map[string]string{}
	for name, desc := range map[string]string{
		"evil": `copy \u001b]52;c;cm0gLXJmIH4K\u0007\u001b[2K\u202eevil\u009b31m`,
		"kind": `héllo 世界`,
	} {
		path := filepath.Join(dir, name, "skill.toml")
		os.MkdirAll(filepath.Dir(path), 0o700)
		text := "[skill]\nname = \"" + name + "\"\ndescription = \"" + desc + "\"\ncommand = [\"/usr/bin/wc\"]\n[fs]\nexec = [\"/usr/bin/wc\"]\n"
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		skills[name] = path
	}
	serveTools(t, dir, skills)

	out := captureStdout(t, func() error { return runTools(context.Background(), []string{"skill.evil"}) })
	if r, bad := rawControls(out); bad {
		t.Errorf("kairo tools skill.evil printed a raw %U:\n%q", r, out)
	}
	if want := "about\tcopy ^[]52;c;cm0gLXJmIH4K^G^[[2K<U+202E>evil<U+009B>31m Starts"; !strings.Contains(out, want) {
		t.Errorf("kairo tools skill.evil:\n%s\nwant %q", out, want)
	}
	out = captureStdout(t, func() error { return runTools(context.Background(), []string{"--json", "skill.evil"}) })
	if r, bad := rawControls(out); bad {
		t.Errorf("kairo tools --json skill.evil printed a raw %U:\n%q", r, out)
	}
	var tool abi.ToolInfo
	if err := json.Unmarshal([]byte(out), &tool); err != nil || !strings.Contains(tool.Description, osc52) {
		t.Errorf("kairo tools --json: %v; description %q, want the escaped JSON to carry the text", err, tool.Description)
	}
	// The control.
	out = captureStdout(t, func() error { return runTools(context.Background(), []string{"skill.kind"}) })
	if !strings.Contains(out, "about\théllo 世界 Starts") {
		t.Errorf("kairo tools skill.kind:\n%s", out)
	}
}
