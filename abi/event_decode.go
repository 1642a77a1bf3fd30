package abi

import "time"

// DecodeEvent decodes one MsgPack-encoded event from the front of b and
// returns what follows it. It is the envelope's only decoder (DecodeMsgpack
// calls it) and the replay hot path: strings and Data alias b instead of
// being copied one by one, so b must not be modified afterwards. Hand the
// function a buffer of its own, as the store and the IPC reader do.
func DecodeEvent(b []byte, ev *Event) ([]byte, error) {
	*ev = Event{}
	return readMap(b, "event", func(key string, b []byte) (rest []byte, err error) {
		switch key {
		case "id":
			ev.ID, rest, err = readStr(b)
		case "type":
			ev.Type, rest, err = readStr(b)
		case "source":
			ev.Source, rest, err = readStr(b)
		case "time":
			ev.Time, rest, err = readTime(b)
			if ev.Time.IsZero() {
				ev.Time = time.Time{} // as msgpack decodes it: UTC, not time.Unix's Local
			}
		case "data":
			ev.Data, rest, err = readRaw(b)
		case "correlationId":
			ev.CorrelationID, rest, err = readStr(b)
		case "causationId":
			ev.CausationID, rest, err = readStr(b)
		case "seq":
			ev.Seq, rest, err = readUint(b)
		case "host":
			ev.Host, rest, err = readStr(b)
		default:
			_, rest, err = skip(b, 0)
		}
		return rest, err
	})
}
