package jetstream

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
)

// IsUnreachable reports whether err says the store could not be reached:
// no connection to a NATS server, no answer from the stream within the
// store's timeout, or a cluster without a leader for it. Such an append
// may be retried with the same IDs once the store is back; Append's
// errors of this kind match [bus.ErrUnreachable].
func IsUnreachable(err error) bool {
	for _, target := range []error{
		nats.ErrConnectionClosed, nats.ErrConnectionReconnecting, nats.ErrDisconnected,
		nats.ErrReconnectBufExceeded, nats.ErrNoServers, nats.ErrTimeout, nats.ErrNoResponders,
		nats.ErrStaleConnection,
		jetstream.ErrNoStreamResponse, jetstream.ErrAsyncPublishTimeout, jetstream.ErrTooManyStalledMsgs,
		context.DeadlineExceeded,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == jsClusterNotAvailable
}

// jsClusterNotAvailable is the server's "JetStream system temporarily
// unavailable": the cluster has no quorum for the request.
const jsClusterNotAvailable = 10008

// Append stores evs (see appendEvents) and marks an error that says the
// cluster could not be reached with [bus.ErrUnreachable], for the bus to
// take the store for away rather than refusing the events.
func (s *Store) Append(evs []*abi.Event, envs [][]byte, dup []bool) error {
	err := s.appendEvents(evs, envs, dup)
	if err != nil && IsUnreachable(err) {
		return &unreachableError{err}
	}
	return err
}

// unreachableError is an append's error that IsUnreachable recognises: its
// text and chain are the server's, and it matches [bus.ErrUnreachable].
type unreachableError struct{ err error }

func (e *unreachableError) Error() string        { return e.err.Error() }
func (e *unreachableError) Unwrap() error        { return e.err }
func (e *unreachableError) Is(target error) bool { return target == bus.ErrUnreachable }
