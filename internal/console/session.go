package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/jsonview"
	"github.com/kairo-os/kairo/kernel"
)

// session is the console's door into the kernel: its calls act for the
// operator who holds the token, as the operator's own CLI would (the same
// uid, the source operator/UID on what it publishes), and its Caller names
// the console in the log ("operator console pid P (uid U)").
type session struct {
	ctx    context.Context
	caller kernel.Caller
}

func newSession(ctx context.Context) *session {
	return &session{ctx: ctx, caller: kernel.Caller{
		Kind: kernel.KindOperator, Name: "console",
		UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), PID: int32(pid),
	}}
}

func (s *session) Caller() kernel.Caller                { return s.caller }
func (s *session) Context() context.Context             { return s.ctx }
func (s *session) PushEvents(uint64, []abi.Event) error { return nil }
func (s *session) EndStream(uint64, *abi.Error) error   { return nil }

// PushChunks drops the output of a process the session attached to to
// signal it: the streams get output from the hub's own sink.
func (s *session) PushChunks([]abi.StreamChunk) error { return nil }

// call invokes method for sess with params (MsgPack-encoded; nil for
// none) and decodes its result into result.
func (s *Server) call(ctx context.Context, sess kernel.Session, method string, params, result any) error {
	var raw msgpack.RawMessage
	if params != nil {
		b, err := msgpack.Marshal(params)
		if err != nil {
			return abi.Errorf(abi.CodeInternal, "%s: encode params: %v", method, err)
		}
		raw = b
	}
	res, aerr := s.cfg.Kernel.Invoke(ctx, method, &kernel.Call{Session: sess, Params: raw})
	if aerr != nil {
		return aerr
	}
	if result != nil {
		if err := msgpack.Unmarshal(res, result); err != nil {
			return abi.Errorf(abi.CodeInternal, "%s: decode result: %v", method, err)
		}
	}
	return nil
}

// writeJSON answers v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(jsonview.Marshal(v))
	w.Write([]byte("\n"))
}

// writeError answers {"error": msg}: what was wrong and what to do.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, struct {
		Error string `json:"error"`
	}{msg})
}

// writeCallError answers a failed kernel call with the HTTP status of its
// code and the kernel's message.
func writeCallError(w http.ResponseWriter, method string, err error) {
	var ae *abi.Error
	if !errors.As(err, &ae) {
		writeError(w, http.StatusInternalServerError, method+": "+err.Error())
		return
	}
	status := http.StatusInternalServerError
	switch ae.Code {
	case abi.CodeInvalidParams, abi.CodeBadRequest:
		status = http.StatusBadRequest
	case abi.CodePermissionDenied:
		status = http.StatusForbidden
	case abi.CodeNotFound:
		status = http.StatusNotFound
	case abi.CodeUnavailable:
		status = http.StatusServiceUnavailable
	}
	writeError(w, status, method+": "+ae.Message)
}

// readJSON decodes the body of r into v, or answers why it cannot.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "the body is over 64 KiB")
			return false
		}
		writeError(w, http.StatusBadRequest, "the body is not the JSON this endpoint takes: "+err.Error())
		return false
	}
	return true
}
