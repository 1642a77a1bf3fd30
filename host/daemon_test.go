package host_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sdk/client"
)

// A daemon up on the embedded defaults serves exactly abi.Methods: a
// method registered without its constant, or a constant no part serves,
// fails here. Ready returns once Start has; a second daemon on the same
// home is refused with who holds it, and the first serves on.
func TestDaemonMethodsAndLock(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	cfg := manifests.Default()
	d := host.New(host.Config{Home: home, Config: cfg})
	ready := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		ready <- d.Ready(ctx)
	}()
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	if err := <-ready; err != nil {
		t.Fatalf("Ready: %v", err)
	}
	// Up, it says so to clients: kernel.ping answers ready.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ping abi.PingResult
	if err := c.Call(ctx, abi.MethodKernelPing, nil, &ping); err != nil || !ping.Ready {
		t.Fatalf("kernel.ping of a started daemon = %+v, %v; want ready", ping, err)
	}
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	want := slices.Clone(abi.Methods)
	slices.Sort(want)
	if got := d.Methods(); !slices.Equal(got, want) {
		t.Fatalf("the daemon serves\n  %v\nabi.Methods lists\n  %v", got, want)
	}

	second := host.New(host.Config{Home: home, Config: cfg})
	if err := second.Start(); err == nil || !strings.Contains(err.Error(), "another `kairo up` is running on "+home) {
		t.Fatalf("a second daemon on the home: %v", err)
	}
	if _, err := os.Stat(d.Socket()); err != nil {
		t.Fatalf("the first daemon's socket after the refusal: %v", err)
	}
	if err := d.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if d.Kernel().Ready() {
		t.Fatal("a stopped daemon's kernel still says it is ready")
	}
	if err := d.Stop(context.Background()); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
}
