package abi

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Request calls one kernel method. ID is chosen by the client and echoed in
// the [Response]; requests may be pipelined and answered out of order.
type Request struct {
	ID     uint64             `msgpack:"id"`
	Method string             `msgpack:"method"`
	Params msgpack.RawMessage `msgpack:"params,omitempty"`
}

// Response answers the [Request] with the same ID: Result on success, Error
// otherwise. ID is 0 when the kernel could not read the request's ID.
type Response struct {
	ID     uint64             `msgpack:"id"`
	Result msgpack.RawMessage `msgpack:"result,omitempty"`
	Error  *Error             `msgpack:"error,omitempty"`
}

// EventPacket pushes one event to a subscription (or a replay) the client
// opened; Subscription is the ID the kernel returned for it.
type EventPacket struct {
	Subscription uint64 `msgpack:"sub"`
	Event        Event  `msgpack:"event"`
}

// StreamChunk pushes process output on the live path; it never enters the bus.
type StreamChunk struct {
	ProcessID     string `msgpack:"processId"`
	Stream        string `msgpack:"stream"`   // "stdout" or "stderr"
	Seq           uint64 `msgpack:"seq"`      // per process and stream, from 1
	Encoding      string `msgpack:"encoding"` // "utf8" (valid UTF-8 text) or "binary"
	Chunk         []byte `msgpack:"chunk"`
	Truncated     bool   `msgpack:"truncated,omitempty"`
	CorrelationID string `msgpack:"correlationId,omitempty"`
}

// [Error] codes. A client branches on Code; Message is for people and says
// what was wrong and what to do.
const (
	CodeBadFrame         = "bad_frame"
	CodeBadRequest       = "bad_request"
	CodeUnknownMethod    = "unknown_method"
	CodeInvalidParams    = "invalid_params"
	CodePermissionDenied = "permission_denied"
	CodeNotFound         = "not_found"
	CodeUnavailable      = "unavailable"
	CodeInternal         = "internal"
)

// Error is a failed call.
type Error struct {
	Code    string `msgpack:"code"`
	Message string `msgpack:"message"`
}

// Error is the code and the message, as "code: message".
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf builds an [*Error] with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
