package mcp

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
)

// idScan finds the top-level "id" of a JSON-RPC message as it streams by,
// keeping nothing but the id: the message is too long to keep, yet the
// request it answers must fail rather than wait for ever. Servers put the
// id first (Python) or last (TypeScript), so every byte is scanned.
type idScan struct {
	depth     int
	inStr     bool
	esc       bool
	expectKey bool   // at depth 1, the next string is a key
	isKey     bool   // the string being read is a key at depth 1
	key       []byte // that key, up to a few bytes
	colon     bool   // the key just read waits for its ":"
	lastKey   string
	inID      bool   // reading the value of "id"
	idStr     bool   // it is a string
	id        []byte // its bytes, as written
	done      bool   // the id is whole (or none can be read)
	found     bool
	bad       bool
}

// maxID bounds the id kept; a longer one is none a client sent.
const maxID = 128

func (s *idScan) write(b []byte) {
	for _, c := range b {
		if s.done {
			return
		}
		s.byte(c)
	}
}

func (s *idScan) byte(c byte) {
	if s.inStr {
		switch {
		case s.esc:
			s.esc = false
		case c == '\\':
			s.esc = true
		case c == '"':
			s.inStr = false
			if s.isKey {
				s.isKey, s.colon, s.lastKey = false, true, string(s.key)
				return
			}
			if s.inID {
				s.id = append(s.id, c)
				s.finish()
				return
			}
		}
		if s.isKey && len(s.key) < 8 {
			s.key = append(s.key, c)
		}
		if s.inID {
			s.keep(c)
		}
		return
	}
	switch c {
	case ' ', '\t', '\r', '\n':
		return
	case '"':
		s.inStr = true
		switch {
		case s.depth == 1 && s.expectKey:
			s.expectKey, s.isKey, s.key = false, true, s.key[:0]
		case s.inID && len(s.id) == 0:
			s.idStr = true
			s.id = append(s.id, c)
		}
		return
	case '{', '[':
		if s.inID {
			s.bad, s.done = true, true // an id is a number or a string
			return
		}
		s.depth++
		s.expectKey = s.depth == 1 && c == '{'
		return
	case '}', ']':
		s.depth--
		if s.inID {
			s.finish()
		}
		return
	case ':':
		if s.depth == 1 && s.colon {
			s.colon = false
			s.inID = s.lastKey == "id"
		}
		return
	case ',':
		if s.depth == 1 {
			s.expectKey = true
			if s.inID {
				s.finish()
			}
		}
		return
	}
	if s.inID {
		s.keep(c)
	}
}

func (s *idScan) keep(c byte) {
	if len(s.id) >= maxID {
		s.bad, s.done = true, true
		return
	}
	s.id = append(s.id, c)
}

func (s *idScan) finish() {
	s.inID, s.done = false, true
	s.found = len(s.id) > 0 && json.Valid(s.id)
}

// refusal is the message that stands in for a message over max bytes: an
// error answer to the request it answered, or nil when it named none (a
// notification, or an id that could not be read).
func (s *idScan) refusal(max int) []byte {
	if !s.found || s.bad || string(s.id) == "null" {
		return nil
	}
	msg, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": json.RawMessage(s.id),
		"error": map[string]any{"code": -32603, "message": overMessage(max)},
	})
	return msg
}

// overMessage is the error of a refusal: Server.Call knows it by its text
// and restates it for the user with the server's name and cap.
func overMessage(max int) string {
	return fmt.Sprintf("the server's answer is over %d bytes, the most read of one message: raise max_result_bytes of its [mcp.NAME] in kairo.toml if its results are meant to be that large", max)
}

// capTransport cuts the body of each answer to a POST (the answers to the
// client's requests, JSON or a stream of them) at max bytes; the standing
// GET stream of the server's own messages is left whole, each of its
// messages being one the client did not ask for.
type capTransport struct {
	base http.RoundTripper
	max  int64
}

func (t capTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil && r.Method == http.MethodPost {
		hit, _ := r.Context().Value(capHitKey{}).(*atomic.Bool)
		resp.Body = &capBody{ReadCloser: resp.Body, left: t.max, max: t.max, hit: hit}
	}
	return resp, err
}

type capBody struct {
	io.ReadCloser
	left, max int64
	hit       *atomic.Bool // set when the cap cut the body; may be nil
}

// capHitKey marks the context of a call with the flag its answer's body
// sets when the cap cut it: the SDK reports no more than a request that
// ended without an answer.
type capHitKey struct{}

func (b *capBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n == 0 {
			return 0, err
		}
		if b.hit != nil {
			b.hit.Store(true)
		}
		return 0, fmt.Errorf("the server's answer is over %d bytes, the most read of one answer: raise max_result_bytes of its [mcp.NAME] in kairo.toml if its results are meant to be that large", b.max)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
