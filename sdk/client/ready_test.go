package client_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/ipc"
	"github.com/kairo-os/kairo/sdk/client"
)

// WaitReady waits for the kernel's ready flag, not for the socket: it
// blocks while the daemon is starting, returns once it is up, and fails
// when the daemon goes away instead.
func TestWaitReady(t *testing.T) {
	b := bus.New(bus.NewMemoryStore(0), bus.Config{})
	defer b.Close()
	k := kernel.New(b, kernel.Config{})
	srv, err := ipc.Listen(k, ipc.Config{Path: filepath.Join(t.TempDir(), "kernel.sock")})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// Serving, not ready: the wait runs out.
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	err = c.WaitReady(short)
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitReady on a kernel not ready = %v, want the deadline", err)
	}

	// Ready while it waits: it returns, not before.
	go func() {
		time.Sleep(100 * time.Millisecond)
		k.SetReady(true)
	}()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	if !k.Ready() {
		t.Fatal("WaitReady returned before the kernel was ready")
	}
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady on a ready kernel: %v", err)
	}

	// Stopping: not ready, then gone; the wait fails, and not by ctx.
	k.SetReady(false)
	go func() {
		time.Sleep(100 * time.Millisecond)
		srv.Close()
	}()
	err = c.WaitReady(ctx)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("WaitReady while the kernel stops = %v (ctx %v), want the connection's error", err, ctx.Err())
	}
}
