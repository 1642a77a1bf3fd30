package console

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/jsonview"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/proc"
)

// maxChunkText bounds the text of one chunk frame: a process that writes
// megabytes at once is shown its tail's worth per frame, not buffered
// whole for every client.
const maxChunkText = 64 << 10

// writeTimeout bounds one write to a stream client: one that stops reading
// is dropped, not waited for.
const writeTimeout = 30 * time.Second

// errDropped ends the bus subscription of a client that was dropped.
var errDropped = errors.New("console: the stream client is too slow; dropped")

// hub forwards the output of the daemon's running processes to the stream
// clients. It is a proc.Sink on every process from its spawn to its exit:
// the console is the daemon's own part, and shows the operator what every
// process of the daemon writes, the agent's included, as `kairo attach`
// shows a client's. A sink never blocks the process: each client has a
// bounded queue, and one that overflows is dropped.
type hub struct {
	s *Server

	mu       sync.Mutex // guards clients, attached, stopped
	clients  map[*streamClient]struct{}
	attached map[string]*proc.Session // by process id
	stopped  bool
	sub      *bus.Subscription // kairo.process.*: spawns to attach to, exits to forget
	index    *bus.Subscription // >: the run index's (Server.runs)
}

func newHub(s *Server) *hub {
	return &hub{s: s, clients: map[*streamClient]struct{}{}, attached: map[string]*proc.Session{}}
}

// start follows the process events, then attaches to what runs already:
// a process spawned between the two is attached to once, by either.
func (h *hub) start() error {
	k := h.s.cfg.Kernel
	sub, err := k.Bus.Subscribe(h.s.ctx, "kairo.process.*", bus.SubscribeConfig{}, func(evs []abi.Event) error {
		for i := range evs {
			ev := &evs[i]
			var d struct {
				ProcessID string `msgpack:"processId"`
			}
			if msgpack.Unmarshal(ev.Data, &d) != nil || d.ProcessID == "" {
				continue
			}
			switch ev.Type {
			case abi.SubjectProcessSpawned:
				h.attach(d.ProcessID)
			case abi.SubjectProcessExited:
				h.mu.Lock()
				delete(h.attached, d.ProcessID)
				h.mu.Unlock()
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("the console cannot follow the processes: %w", err)
	}
	h.sub = sub
	// The run index follows the log, so that a read finds the newest
	// events indexed rather than decodes them; in no hurry, it is woken
	// once for what came within indexLinger.
	idx, err := k.Bus.Subscribe(h.s.ctx, ">", bus.SubscribeConfig{Linger: indexLinger}, h.s.runs.observe)
	if err != nil {
		sub.Close()
		return fmt.Errorf("the console cannot follow the log: %w", err)
	}
	h.index = idx
	for _, info := range k.Proc.List() {
		if info.Status == abi.ProcessRunning {
			h.attach(info.ID)
		}
	}
	return nil
}

func (h *hub) attach(id string) {
	s, ok := h.s.cfg.Kernel.Proc.Get(id)
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped || h.attached[id] != nil {
		return
	}
	h.attached[id] = s
	s.Attach(h)
}

// stop detaches from every process; Chunks fails from then on, which
// detaches from any it raced with.
func (h *hub) stop() {
	if h.sub != nil {
		h.sub.Close()
	}
	if h.index != nil {
		h.index.Close()
	}
	h.mu.Lock()
	h.stopped = true
	attached := h.attached
	h.attached = map[string]*proc.Session{}
	h.mu.Unlock()
	for _, s := range attached {
		s.Detach(h)
	}
}

// Chunks hands a process's output to every stream client, as chunk frames;
// it never waits for one.
func (h *hub) Chunks(cs []abi.StreamChunk) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return errors.New("console: stopped")
	}
	if len(h.clients) == 0 {
		return nil
	}
	for i := range cs {
		c := &cs[i]
		text, cut := c.Chunk, false
		if len(text) > maxChunkText {
			text, cut = text[len(text)-maxChunkText:], true
		}
		frame := chunkFrame(c, string(text), cut || c.Truncated)
		for cl := range h.clients {
			cl.offer(frame)
		}
	}
	return nil
}

func chunkFrame(c *abi.StreamChunk, text string, truncated bool) []byte {
	var b bytes.Buffer
	b.WriteString("event: chunk\ndata: ")
	b.Write(jsonview.Marshal(struct {
		ProcessID     string `json:"processId"`
		Stream        string `json:"stream"`
		Data          string `json:"data"`
		Seq           uint64 `json:"seq"`
		Truncated     bool   `json:"truncated,omitempty"`
		CorrelationID string `json:"correlationId,omitempty"`
	}{c.ProcessID, c.Stream, text, c.Seq, truncated, c.CorrelationID}))
	b.WriteString("\n\n")
	return b.Bytes()
}

func eventFrame(ev *abi.Event) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "event: kairo\nid: %d\ndata: ", ev.Seq)
	b.Write(jsonview.EventObject(ev))
	b.WriteString("\n\n")
	return b.Bytes()
}

func (h *hub) add(c *streamClient) {
	h.mu.Lock()
	h.clients[c] = struct{}{}
	h.mu.Unlock()
}

func (h *hub) remove(c *streamClient) {
	h.mu.Lock()
	delete(h.clients, c)
	h.mu.Unlock()
}

// streamClient is one /api/stream: the frames queued for it, bounded in
// bytes. Past the bound it is dropped whole — the page reloads from the
// log — rather than buffered without end or skipped silently.
type streamClient struct {
	mu      sync.Mutex
	q       [][]byte
	bytes   int
	max     int
	dropped bool
	wake    chan struct{}
	onDrop  func() // called once, when the client is dropped
}

func (c *streamClient) offer(frame []byte) bool {
	c.mu.Lock()
	ok, now := !c.dropped, false
	if ok {
		if c.bytes+len(frame) > c.max {
			c.dropped, c.q, c.bytes, ok, now = true, nil, 0, false, true
		} else {
			c.q = append(c.q, frame)
			c.bytes += len(frame)
		}
	}
	c.mu.Unlock()
	if now {
		c.onDrop()
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return ok
}

func (c *streamClient) take() ([][]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.q
	c.q, c.bytes = nil, 0
	return q, c.dropped
}

// stream serves Server-Sent Events: every event after from (or after the
// Last-Event-ID a reconnecting browser sends) and then each as it comes,
// as "event: kairo" with the sequence number as its id; the running
// processes' output as "event: chunk"; a comment every Heartbeat. A
// client that falls too far behind gets "event: dropped" and is closed.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("%d streams are open, the most the console serves; close a console tab and retry", cap(s.streams)))
		return
	}
	var opts bus.SubscribeConfig
	from := r.URL.Query().Get("from")
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		from = id
	}
	if from != "" {
		n, err := strconv.ParseUint(from, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("from %q: give the sequence number of the last event held (lastSeq of /api/events)", from))
			return
		}
		opts.FromSeq = n + 1
	}
	c := &streamClient{max: s.cfg.StreamBuffer, wake: make(chan struct{}, 1), onDrop: func() {
		// Said at once: the writer may wait on the client a while yet.
		s.log.Warn("the console dropped a stream client too slow to read: its page reloads from the log", "remote", r.RemoteAddr, "buffer", s.cfg.StreamBuffer)
	}}
	sub, err := s.cfg.Kernel.Bus.Subscribe(r.Context(), ">", opts, func(evs []abi.Event) error {
		for i := range evs {
			if !c.offer(eventFrame(&evs[i])) {
				return errDropped
			}
		}
		return nil
	})
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "subscribe to the log: "+err.Error())
		return
	}
	defer sub.Close()
	s.hub.add(c)
	defer s.hub.remove(c)

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) bool {
		rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write([]byte("retry: 2000\n\n")) {
		return
	}
	beat := time.NewTicker(s.cfg.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sub.Done():
			if !errors.Is(sub.Err(), errDropped) {
				return // the bus closed: the daemon stops
			}
		case <-beat.C:
			if !write([]byte(": heartbeat\n\n")) {
				return
			}
			continue
		case <-c.wake:
		}
		frames, dropped := c.take()
		var out bytes.Buffer
		for _, f := range frames {
			out.Write(f)
		}
		if dropped {
			out.WriteString("event: dropped\ndata: {\"error\":\"this stream fell too far behind; reload from /api/events\"}\n\n")
			write(out.Bytes())
			return
		}
		if out.Len() > 0 && !write(out.Bytes()) {
			return
		}
	}
}
