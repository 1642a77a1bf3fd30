package llm

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// huge answers a non-streamed request with a completion whose content is n
// bytes, written a piece at a time as a real server would.
func huge(n int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"`)
		piece := strings.Repeat("a", 64<<10)
		for left := n; left > 0; left -= len(piece) {
			if _, err := io.WriteString(w, piece[:min(left, len(piece))]); err != nil {
				return // the client stopped reading
			}
		}
		io.WriteString(w, `"},"finish_reason":"stop"}]}`)
	}
}

// endless streams content deltas until the client hangs up.
func endless(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	chunk := fmt.Sprintf("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",%s}\n\n", delta(`{"content":"`+strings.Repeat("z", 4000)+`"}`, ""))
	for {
		if _, err := io.WriteString(w, chunk); err != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		default:
		}
	}
}

func heapMB() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc >> 20
}

// The attack of issue 15: an endpoint that answers 100 MB held the daemon's
// memory and the log. The body is read up to the cap and no further; the
// request fails at once (no retry), saying which cap; the control, an
// answer under the cap, comes back whole.
func TestResponseOverTheCap(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			h := huge(100 << 20)
			if stream {
				h = endless
			}
			e := newEndpoint(t, h)
			d := newDaemon(t)
			// A long timeout: the cap, not the timeout, must end the read.
			p, _ := testProvider(t, e, Config{Stream: stream, MaxResponseBytes: 1 << 20, Timeout: time.Minute, MaxRetries: 3, Bus: d.b})
			Register(d.k, p)
			before := heapMB()
			start := time.Now()
			_, aerr := d.chat(t, conversation("hi"))
			if aerr == nil || !strings.Contains(aerr.Message, "max_response_bytes") || !strings.Contains(aerr.Message, "1048576 bytes") {
				t.Fatalf("llm.chat = %v, want an error naming the cap", aerr)
			}
			if took := time.Since(start); took > 20*time.Second {
				t.Errorf("the read took %s: the cap did not end it", took)
			}
			if n := e.requests(); n != 1 {
				t.Errorf("%d requests: an answer over the cap is not worth a retry", n)
			}
			if after := heapMB(); after > before+32 {
				t.Errorf("heap %d MiB after, %d before", after, before)
			}
			evs := d.llmEventsOf(t)
			var rec abi.LLMResponse
			if len(evs) != 2 || msgpack.Unmarshal(evs[1].Data, &rec) != nil || rec.Error == nil || !strings.Contains(rec.Error.Message, "max_response_bytes") {
				t.Fatalf("recorded %d events, the response %+v", len(evs), rec)
			}
			if len(evs[1].Data) > 4<<10 {
				t.Errorf("the recorded response is %d bytes", len(evs[1].Data))
			}
		})
	}
}

func TestResponseUnderTheCap(t *testing.T) {
	e := newEndpoint(t, huge(300<<10), events(delta(`{"content":"fine"}`, "stop")))
	p, _ := testProvider(t, e, Config{MaxResponseBytes: 1 << 20})
	res, err := p.Chat(context.Background(), conversation("hi"))
	if err != nil || len(res.Message.Content) != 300<<10 {
		t.Fatalf("Chat = %d bytes, %v", len(res.Message.Content), err)
	}
	p, _ = testProvider(t, e, Config{Stream: true, MaxResponseBytes: 1 << 20})
	if res, err := p.Chat(context.Background(), conversation("hi")); err != nil || res.Message.Content != "fine" {
		t.Fatalf("streamed Chat = %+v, %v", res, err)
	}
}

// An answer under the cap but over what the log keeps of one reaches the
// caller whole; its record is cut and says so.
func TestRecordOfALargeAnswer(t *testing.T) {
	e := newEndpoint(t, huge(maxRecorded+1000))
	d := newDaemon(t)
	p, _ := testProvider(t, e, Config{Bus: d.b})
	Register(d.k, p)
	res, aerr := d.chat(t, conversation("hi"))
	if aerr != nil || len(res.Message.Content) != maxRecorded+1000 {
		t.Fatalf("llm.chat = %d bytes, %v", len(res.Message.Content), aerr)
	}
	evs := d.llmEventsOf(t)
	var rec abi.LLMResponse
	if len(evs) != 2 || msgpack.Unmarshal(evs[1].Data, &rec) != nil || rec.Result == nil {
		t.Fatalf("recorded %d events", len(evs))
	}
	if n := len(evs[1].Data); n > maxRecorded {
		t.Errorf("the record is %d bytes, over %d", n, maxRecorded)
	}
	if !strings.Contains(rec.Result.Message.Content, Truncated) {
		t.Errorf("the record does not say it was cut")
	}
}
