package abi

import "strings"

// scopeSep ends the scope of a client-chosen id. No source holds it:
// sources are a principal kind, "/", and a name of [a-z0-9_-] (or, for
// the host, "PART/NAME"), or "operator/UID".
const scopeSep = ":"

// ScopeEventID returns the id under which an event that source publishes
// is stored when its publisher chose id: "SOURCE:ID", or id itself when
// it is in source's scope already (the id a publish answered). An empty
// id stays empty, for the bus to choose. It refuses an id whose scoped
// form is longer than [MaxIDLen], and a source that holds the
// separator (no two sources could then be told apart).
//
// Why ids are scoped: the bus drops an event whose id is stored already,
// so whoever stores an id first owns it. The kernel relies on that for
// events it must store once however often they are delivered, and
// derives their ids from what they are about: an approval's request is
// "ap-ACTION" (or "ap-ACTION-rerun"), its decision that id and
// "-decided"; the bus's reports of messages it skipped are
// "store-skipped-N" and "store-gap-A-B". Every other id the kernel, the
// bus, the host and the agent choose is a UUIDv7, whose next value a
// reader of the log can guess within a millisecond. A client that could
// store one of those ids first would have the kernel's event dropped as
// its duplicate: a skill that published "ap-X-decided" made the
// operator's approval of ap-X a no-op. So events.publish and a plugin's
// publish store an id a principal chose in the publisher's scope, the
// operator's included: ids with no scope are the kernel's alone, and two
// principals that choose one id store two events. A client's retry with
// the id it chose, or with the scoped id it was answered, is still a
// duplicate of its first publish. See
// docs/RATIONALE.md#an-id-names-its-writer.
func ScopeEventID(source, id string) (string, error) {
	if id == "" {
		return "", nil
	}
	if source == "" || strings.Contains(source, scopeSep) {
		return "", Errorf(CodeInvalidParams, "event.id %q: the publisher %q cannot name its events' ids (its source is empty or holds %q); leave the id empty", id, source, scopeSep)
	}
	if err := CheckLen("event.id", id, MaxIDLen, "MaxIDLen"); err != nil {
		return "", Errorf(CodeInvalidParams, "%v", err)
	}
	scope := source + scopeSep
	if strings.HasPrefix(id, scope) {
		return id, nil
	}
	if len(scope)+len(id) > MaxIDLen {
		return "", Errorf(CodeInvalidParams, "event.id has %d bytes: stored in its publisher's scope, %q and the id, it would be over its bound of %d (abi.MaxIDLen); choose an id of at most %d bytes", len(id), scope, MaxIDLen, MaxIDLen-len(scope))
	}
	return scope + id, nil
}
