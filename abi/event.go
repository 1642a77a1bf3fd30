package abi

import (
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// Event is the envelope of everything on the bus. Its field names follow
// CloudEvents where the two overlap. The msgpack tags name the wire keys; the
// hand-written codec below produces and accepts exactly those keys, because the
// envelope is on every hot path (publish, store, push) and reflection costs
// several times more.
type Event struct {
	// ID is unique and time-ordered (a UUIDv7 when the bus assigns it).
	// Publishing an ID that is already stored is a no-op.
	ID string `msgpack:"id"`
	// Type is the subject, NATS-style: "kairo.process.exited".
	Type string `msgpack:"type"`
	// Source names the publisher: "cli", "plugin/rule-policy", "kernel".
	Source string `msgpack:"source,omitempty"`
	// Time is when the event happened; the bus sets it when it is zero.
	Time time.Time `msgpack:"time"`
	// Data is the payload, itself MsgPack.
	Data msgpack.RawMessage `msgpack:"data,omitempty"`
	// CorrelationID ties the event to its run loop (intent).
	CorrelationID string `msgpack:"correlationId,omitempty"`
	// CausationID is the ID of the event that caused this one.
	CausationID string `msgpack:"causationId,omitempty"`
	// Seq is the store sequence number, assigned on append; 0 before.
	Seq uint64 `msgpack:"seq,omitempty"`
	// Host names the kairo that published the event, when several share
	// one store (a JetStream cluster); empty on a store of one host.
	Host string `msgpack:"host,omitempty"`
}

var (
	_ msgpack.CustomEncoder = (*Event)(nil)
	_ msgpack.CustomDecoder = (*Event)(nil)
)

// EncodeMsgpack writes the event as [AppendEvent] does. The receiver is a
// value so that events held by value inside other types encode too.
func (e Event) EncodeMsgpack(enc *msgpack.Encoder) error {
	return enc.Encode(msgpack.RawMessage(AppendEvent(nil, &e)))
}

// DecodeMsgpack reads an event map in any key order. Unknown keys are skipped
// so a newer peer may add fields; a known key with the wrong type is an error
// that names the key.
func (e *Event) DecodeMsgpack(dec *msgpack.Decoder) error {
	raw, err := dec.DecodeRaw() // a fresh copy, so the event may alias it
	if err != nil {
		return fmt.Errorf("event: %w", err)
	}
	_, err = DecodeEvent(raw, e)
	return err
}
