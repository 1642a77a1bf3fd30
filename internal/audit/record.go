package audit

import (
	"encoding/hex"
	"strconv"
	"strings"
)

// Record types this package reads (include/uapi/linux/audit.h).
const (
	typeSyscall        = 1300 // AUDIT_SYSCALL: the system call an event happened in
	typeEOE            = 1320 // AUDIT_EOE: the end of a multi-record event
	typeSeccomp        = 1326 // AUDIT_SECCOMP: a seccomp filter's verdict was logged
	typeLandlockAccess = 1423 // AUDIT_LANDLOCK_ACCESS: Landlock refused an access
	typeLandlockDomain = 1424 // AUDIT_LANDLOCK_DOMAIN: a Landlock domain's life
)

// record is one audit record: its type, the event it belongs to and its
// fields in order.
type record struct {
	typ    uint16
	stamp  string // "SEC.MS", the event's time
	serial uint64 // the event's serial; records of one event share it
	fields []field
}

type field struct{ key, value string }

// get is the value of the first field named key, and whether there is one.
func (r *record) get(key string) (string, bool) {
	for _, f := range r.fields {
		if f.key == key {
			return f.value, true
		}
	}
	return "", false
}

// int is the decimal value of the field named key; def when it is missing
// or not a number.
func (r *record) int(key string, def int) int {
	v, ok := r.get(key)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return def
	}
	return n
}

// parseRecord parses the text of a record of type typ:
//
//	audit(1764140000.123:456): key=value key="quoted" key=2F6869
//
// Values are as the kernel wrote them: quotes stay, hex stays (value
// decodes a string field). The kernel writes a string it does not trust
// (a path, a command name) in double quotes when it holds no space,
// quote or control character, and in hex otherwise, so no value holds a
// space and the fields split on spaces.
func parseRecord(typ uint16, text string) (record, bool) {
	r := record{typ: typ}
	text = strings.TrimRight(text, "\x00\n")
	rest, ok := strings.CutPrefix(text, "audit(")
	if !ok {
		return r, false
	}
	head, rest, ok := strings.Cut(rest, "):")
	if !ok {
		return r, false
	}
	stamp, serial, ok := strings.Cut(head, ":")
	if !ok {
		return r, false
	}
	n, err := strconv.ParseUint(serial, 10, 64)
	if err != nil {
		return r, false
	}
	r.stamp, r.serial = stamp, n
	for _, tok := range strings.Fields(rest) {
		k, v, ok := strings.Cut(tok, "=")
		if !ok {
			continue
		}
		r.fields = append(r.fields, field{k, v})
	}
	return r, true
}

// value is a string field's value as the process saw it: unquoted, or
// decoded from hex. A value in neither form ("(null)", "?", "<too_long>")
// is returned as it is.
func value(raw string) string {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		return raw[1 : len(raw)-1]
	}
	if len(raw) >= 2 && len(raw)%2 == 0 && isHex(raw) {
		if b, err := hex.DecodeString(raw); err == nil {
			if len(b) > 0 && b[0] == 0 {
				// An abstract unix socket's name starts with a NUL;
				// it is written "@name", as ss and netstat do.
				return "@" + strings.TrimRight(string(b[1:]), "\x00")
			}
			return string(b)
		}
	}
	return raw
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'F' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
