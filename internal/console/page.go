package console

import (
	"bytes"
	"html/template"
	"net/http"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/jsonview"
)

// pageTemplate is index.html, which the daemon serves with its first
// paint drawn in (page); its other files are served as they are.
var pageTemplate = template.Must(template.ParseFS(assets, "index.html"))

// pageData fills pageTemplate.
type pageData struct {
	Rendered   bool // the rows and their read are in the page
	ManyAgents bool
	Older      bool // the log holds events before the read's
	Loops      template.HTML
	Others     template.HTML
	Messages   template.HTML
	// FirstRead is GET /api/events?limit=10000&outside=300's answer and
	// FirstAgents GET /api/agents's, as the script's data.
	FirstRead   template.JS
	FirstAgents template.JS
}

// page serves index.html with the rows of the page's first read drawn in:
// the read app.js makes first (the window of MaxEventsLimit events, the
// newest pageOthers of those outside run loops), folded as app.js folds
// it, and the read itself for the script. It is served behind the same
// checks as the API, which answers the same read, and never kept by the
// browser. When the read fails the page comes without rows, and the
// script reads and says why.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	began := time.Now()
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	var data pageData
	pg, last, err := s.readEvents(r, MaxEventsLimit, 0, pageOthers)
	if err == nil {
		data = s.firstPaint(r, pg, last)
	} else {
		s.log.Debug("console: the page's first read failed; the script reads again", "err", err)
	}
	var out bytes.Buffer
	if err := pageTemplate.Execute(&out, data); err != nil {
		writeError(w, http.StatusInternalServerError, "the console's page: "+err.Error())
		return
	}
	h.Set("Server-Timing", serverTiming(began))
	w.Write(out.Bytes())
}

// firstPaint draws the rows of a read, newest first as events answers it.
func (s *Server) firstPaint(r *http.Request, pg *eventPage, last uint64) pageData {
	evs := pg.newestFirst()
	var agents []jsonview.Agent
	var res abi.AgentsResult
	if err := s.call(r.Context(), s.sess, abi.MethodAgentList, nil, &res); err == nil {
		agents = jsonview.Each(res.Agents, jsonview.NewAgent)
	}
	fp := newFirstPaint(len(agents) > 1)
	folded := make([]*jsValue, 0, len(evs))
	for i := len(evs) - 1; i >= 0; i-- {
		v, err := parseJS(evs[i])
		if err != nil {
			return pageData{} // not the script's read: the script reads
		}
		folded = append(folded, v)
	}
	fp.foldAll(folded)
	return pageData{
		Rendered:    true,
		ManyAgents:  len(agents) > 1,
		Older:       len(folded) > 0 && folded[0].get("seq").number() > 1,
		Loops:       fp.loops.children(),
		Others:      fp.others.children(),
		Messages:    fp.messages.children(),
		FirstRead:   scriptData(eventsJSON(evs, last, pg.omitted)),
		FirstAgents: scriptData(jsonview.Marshal(map[string][]jsonview.Agent{"agents": jsonview.OrEmpty(agents)})),
	}
}

// scriptData is JSON fit to stand in a script element as data: a "<" can
// stand only inside a string there, where \u003c means the same, so no
// "</script" or "<!--" ends or changes the element.
func scriptData(j []byte) template.JS {
	return template.JS(bytes.ReplaceAll(j, []byte("<"), []byte(`\u003c`)))
}
