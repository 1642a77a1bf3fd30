package abi

// AppendEvent appends ev's MsgPack encoding to dst: a map with the keys of
// the [Event] tags, empty optional fields left out. It is the envelope's only
// encoder (EncodeMsgpack calls it) and what the store and the socket write.
func AppendEvent(dst []byte, ev *Event) []byte {
	n := 3
	for _, s := range [...]string{ev.Source, ev.CorrelationID, ev.CausationID, ev.Host} {
		if s != "" {
			n++
		}
	}
	if len(ev.Data) > 0 {
		n++
	}
	if ev.Seq != 0 {
		n++
	}
	dst = append(dst, 0x80|byte(n)) // n <= 9: a fixmap
	dst = appendStr(appendStr(dst, "id"), ev.ID)
	dst = appendStr(appendStr(dst, "type"), ev.Type)
	if ev.Source != "" {
		dst = appendStr(appendStr(dst, "source"), ev.Source)
	}
	dst = appendTime(appendStr(dst, "time"), ev.Time)
	if len(ev.Data) > 0 {
		dst = append(appendStr(dst, "data"), ev.Data...)
	}
	if ev.CorrelationID != "" {
		dst = appendStr(appendStr(dst, "correlationId"), ev.CorrelationID)
	}
	if ev.CausationID != "" {
		dst = appendStr(appendStr(dst, "causationId"), ev.CausationID)
	}
	if ev.Seq != 0 {
		dst = appendUint(appendStr(dst, "seq"), ev.Seq)
	}
	if ev.Host != "" {
		dst = appendStr(appendStr(dst, "host"), ev.Host)
	}
	return dst
}
