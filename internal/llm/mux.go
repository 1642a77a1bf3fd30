package llm

import (
	"context"
	"sync"

	"github.com/kairo-os/kairo/abi"
)

// Mux is a Chatter that answers each request with the Chatter routed for its
// run loop, else with the default: the agent runtime replays one run loop
// (Route(id, replay)) while the others go on talking to the model.
type Mux struct {
	def Chatter
	mu  sync.RWMutex
	by  map[string]Chatter // by run loop (correlation) id
}

// NewMux returns a Mux that answers with def unless a run loop is routed;
// a nil def is Unconfigured.
func NewMux(def Chatter) *Mux {
	if def == nil {
		def = Unconfigured{}
	}
	return &Mux{def: def, by: map[string]Chatter{}}
}

// Route sends the requests of run loop runLoopID to c from now on; a nil c
// sends them back to the default.
func (m *Mux) Route(runLoopID string, c Chatter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c == nil {
		delete(m.by, runLoopID)
		return
	}
	m.by[runLoopID] = c
}

// Chat answers p with the Chatter of its run loop.
func (m *Mux) Chat(ctx context.Context, p abi.ChatParams) (abi.ChatResult, error) {
	m.mu.RLock()
	c, ok := m.by[p.CorrelationID]
	m.mu.RUnlock()
	if !ok {
		c = m.def
	}
	return c.Chat(ctx, p)
}
