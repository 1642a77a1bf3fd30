package audit

import "time"

// assembler gathers records into events by their serial and reports the
// refusals of each event once it ended: at its AUDIT_EOE record, or when
// no record of it came for a while (an event outside a system call, such
// as a seccomp verdict or a domain's end, has no EOE). It does not end an
// event when a later serial shows up: the records of events on other CPUs
// interleave with a system call's, whose SYSCALL record — the refused
// process's uid — comes last, at the call's exit.
type assembler struct {
	max      int
	onDenial func(Denial)
	pending  map[uint64]*pendingEvent
	order    []uint64           // serials of pending, oldest first
	domains  map[string]*domain // Landlock domains seen allocated
}

type pendingEvent struct {
	event
	last time.Time // when its latest record came
}

// domain is what a Landlock domain's allocation record said: the process
// that made it — the sandbox's helper, which became the tree's first
// process.
type domain struct{ pid int }

// maxDomains bounds the domains remembered; a domain is forgotten when
// the kernel says it was freed.
const maxDomains = 4096

func newAssembler(max int, onDenial func(Denial)) *assembler {
	return &assembler{max: max, onDenial: onDenial, pending: map[uint64]*pendingEvent{}, domains: map[string]*domain{}}
}

// add files rec with its event, which it ends if rec is its EOE. Past max
// events gathering, the oldest ends as it is.
func (a *assembler) add(rec record, now time.Time) {
	p := a.pending[rec.serial]
	if p == nil {
		if rec.typ == typeEOE {
			return // the end of an event none of whose records mattered
		}
		for len(a.order) >= a.max {
			a.end(a.order[0])
		}
		p = &pendingEvent{event: event{serial: rec.serial}}
		a.pending[rec.serial] = p
		a.order = append(a.order, rec.serial)
	}
	p.last = now
	if rec.typ == typeEOE {
		a.end(rec.serial)
		return
	}
	p.records = append(p.records, rec)
}

// oldest is when the record came that the oldest pending event last got;
// zero when none is pending.
func (a *assembler) oldest() time.Time {
	if len(a.order) == 0 {
		return time.Time{}
	}
	return a.pending[a.order[0]].last
}

// flush ends every event whose latest record came before cutoff; all of
// them when cutoff is zero.
func (a *assembler) flush(cutoff time.Time) {
	for len(a.order) > 0 {
		p := a.pending[a.order[0]]
		if !cutoff.IsZero() && !p.last.Before(cutoff) {
			return
		}
		a.end(a.order[0])
	}
}

// end removes the event of serial from the pending ones and reports its
// refusals.
func (a *assembler) end(serial uint64) {
	p := a.pending[serial]
	if p == nil {
		return
	}
	delete(a.pending, serial)
	for i, s := range a.order {
		if s == serial {
			a.order = append(a.order[:i], a.order[i+1:]...)
			break
		}
	}
	a.noteDomains(&p.event)
	for _, d := range p.denials() {
		if d.UID < 0 {
			d.UID = uidOf(d.PID)
		}
		if dom := a.domains[d.Domain]; dom != nil {
			d.DomainPID = dom.pid
		}
		a.onDenial(d)
	}
}

// noteDomains remembers the domains e's records say were allocated and
// forgets those freed.
func (a *assembler) noteDomains(e *event) {
	for i := range e.records {
		rec := &e.records[i]
		if rec.typ != typeLandlockDomain {
			continue
		}
		id, _ := rec.get("domain")
		switch status, _ := rec.get("status"); status {
		case "allocated":
			if len(a.domains) >= maxDomains {
				for k := range a.domains { // any one: they are all old by now
					delete(a.domains, k)
					break
				}
			}
			a.domains[id] = &domain{pid: rec.int("pid", 0)}
		case "deallocated":
			delete(a.domains, id)
		}
	}
}
