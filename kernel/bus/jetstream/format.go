package jetstream

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/kairo-os/kairo/abi"
)

// The JetStream store's message: the events of one append, or of one part
// of it when they pass the server's maximum payload. Its data is a format
// byte, then each event's envelope (EncodeEnv) after its length as a
// uvarint. Its headers say which events it holds, so that a reader places a
// message among the others without decoding it.
const jsFormat byte = 1

// The headers of a message.
const (
	hdrFirst = "Kairo-Seq"    // seq of the message's first event
	hdrCount = "Kairo-Count"  // how many events it holds
	hdrTime  = "Kairo-Time"   // the latest time among its events, Unix ns
	hdrMsgID = "Kairo-Msg-Id" // its writer and number: a writer knows its message that landed after its append failed
)

// jsMaxSeq bounds the seqs a message may claim, far past any a store hands
// out, so that a message written to push them further cannot overflow them.
const jsMaxSeq = 1 << 53

// jsHeaderRoom is what a message's headers may take of the server's
// maximum payload; the envelopes get the rest.
const jsHeaderRoom = 1024

// errNotKairoMessage is a stream message without the store's headers or
// format: a stream of an earlier Kairo, or a stranger's message.
var errNotKairoMessage = errors.New("not a message of Kairo's event store")

// jsMessage is one message of the stream as the store reads or writes it.
type jsMessage struct {
	stream  uint64 // its stream sequence; 0 until stored
	subject string // the subject it was stored on, which names its writer
	first   uint64 // seq of its first event
	count   int
	maxTime int64  // Unix ns
	msgID   string // hdrMsgID
	data    []byte
	bad     error // set, and nothing else but stream and subject, for a message that is not Kairo's
}

// parseMessage reads a stored message's headers.
func parseMessage(stream uint64, subject string, hdr nats.Header, data []byte) (*jsMessage, error) {
	first, err1 := strconv.ParseUint(hdr.Get(hdrFirst), 10, 64)
	count, err2 := strconv.Atoi(hdr.Get(hdrCount))
	if err1 != nil || err2 != nil || first == 0 || count <= 0 || len(data) == 0 {
		return nil, errNotKairoMessage
	}
	if data[0] != jsFormat {
		return nil, errors.New("message format " + strconv.Itoa(int(data[0])) + " is not one this Kairo reads (" + strconv.Itoa(int(jsFormat)) + "): a later Kairo wrote it")
	}
	t, err := strconv.ParseInt(hdr.Get(hdrTime), 10, 64)
	if err != nil {
		t = math.MaxInt64 // unknown: a replay by time reads the message
	}
	if first > jsMaxSeq || uint64(count) > jsMaxSeq-first {
		return nil, errors.New("its header places its events past the seqs a store hands out")
	}
	return &jsMessage{stream: stream, subject: subject, first: first, count: count, maxTime: t, msgID: hdr.Get(hdrMsgID), data: data}, nil
}

// header is what the store publishes with m, expecting the stream's last
// sequence to be lastStream.
func (m *jsMessage) header(lastStream uint64) nats.Header {
	return nats.Header{
		hdrFirst:                      []string{strconv.FormatUint(m.first, 10)},
		hdrCount:                      []string{strconv.Itoa(m.count)},
		hdrTime:                       []string{strconv.FormatInt(m.maxTime, 10)},
		hdrMsgID:                      []string{m.msgID},
		"Nats-Expected-Last-Sequence": []string{strconv.FormatUint(lastStream, 10)},
	}
}

// last is the seq of m's last event.
func (m *jsMessage) last() uint64 { return m.first + uint64(m.count) - 1 }

// appendFrame adds one envelope to a message's data.
func appendFrame(data, env []byte) []byte {
	return append(binary.AppendUvarint(data, uint64(len(env))), env...)
}

// frameRoom is the most an envelope of n bytes adds to a message's data.
func frameRoom(n int) int { return binary.MaxVarintLen64 + n }

// envs calls fn with each envelope of m in order and its seq, until fn
// returns false.
func (m *jsMessage) envs(fn func(seq uint64, env []byte) bool) error {
	b := m.data[1:]
	seq := m.first
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return errors.New("an envelope runs past the end of the message")
		}
		if !fn(seq, b[k:k+int(n)]) {
			return nil
		}
		b = b[k+int(n):]
		seq++
	}
	if seq != m.first+uint64(m.count) {
		return errors.New("the message holds " + strconv.FormatUint(seq-m.first, 10) + " events, its header says " + strconv.Itoa(m.count))
	}
	return nil
}

// envID is the ID of an envelope. abi.AppendEvent writes it first, so it is
// read without decoding the rest; any other envelope is decoded.
func envID(env []byte) ([]byte, error) {
	if len(env) > 5 && env[0]&0xf0 == 0x80 && env[1] == 0xa2 && env[2] == 'i' && env[3] == 'd' {
		b := env[4:]
		switch c := b[0]; {
		case c&0xe0 == 0xa0:
			if n := int(c & 0x1f); len(b) > n {
				return b[1 : 1+n], nil
			}
		case c == 0xd9:
			if n := int(b[1]); len(b) > 1+n {
				return b[2 : 2+n], nil
			}
		}
	}
	var ev abi.Event
	if _, err := abi.DecodeEvent(env, &ev); err != nil {
		return nil, err
	}
	return []byte(ev.ID), nil
}
