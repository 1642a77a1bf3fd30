// Package client connects Go programs — binary skills, UIs, scripts — to a
// running Kairo kernel over its Unix socket ($KAIRO_SOCKET, else
// $KAIRO_HOME/kernel.sock).
//
// It is the public name of the kernel's own IPC client: the implementation
// lives beside the server in kernel/ipc so both share one frame codec.
package client

import (
	"context"

	"github.com/kairo-os/kairo/kernel/ipc"
)

// Client is a connection to the kernel, safe for concurrent use.
type Client = ipc.Client

// Subscription receives the events of a subscription.
type Subscription = ipc.Subscription

// ErrClosed is returned by calls after the connection to the kernel ended.
var ErrClosed = ipc.ErrClientClosed

// Dial connects to the kernel socket at path; "" means SocketPath().
func Dial(ctx context.Context, path string) (*Client, error) { return ipc.Dial(ctx, path) }

// SocketPath is the socket a client dials by default.
func SocketPath() string { return ipc.SocketPath() }
