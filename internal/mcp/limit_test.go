package mcp

import (
	"strings"
	"testing"
)

func TestIDScan(t *testing.T) {
	big := strings.Repeat(`x\"{[`, 100)
	for _, c := range []struct{ msg, id string }{
		{`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + big + `"}]}}`, "7"},
		{`{"result":{"content":[{"type":"text","text":"` + big + `","id":99}]},"jsonrpc":"2.0","id":"abc-1"}`, `"abc-1"`},
		{` { "id" : 12 , "result" : "` + big + `" } `, "12"},
		{`{"result":{"id":5},"jsonrpc":"2.0","id":6}`, "6"},
		{`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + big + `"}}`, ""},
		{`{"id":{"a":1},"result":1}`, ""},
		{`{"id":null,"result":1}`, ""},
	} {
		var s idScan
		// Byte at a time, as the worst chunking would hand it over.
		for i := 0; i < len(c.msg); i++ {
			s.write([]byte{c.msg[i]})
		}
		got := ""
		if r := s.refusal(10); r != nil {
			got = string(s.id)
			if !strings.Contains(string(r), `"error"`) || !strings.Contains(string(r), "over 10 bytes") {
				t.Errorf("refusal %s", r)
			}
		}
		if got != c.id {
			t.Errorf("%.60s…: id %q, want %q", c.msg, got, c.id)
		}
	}
}
