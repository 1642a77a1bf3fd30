package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sdk/client"
)

// clientSocket is the socket a client command dials: $KAIRO_SOCKET, else the
// one kairo.toml in the data folder (clientHome) names, else kernel.sock
// there — the same rule `kairo up` follows, so the two meet.
func clientSocket() (string, error) {
	if p := os.Getenv("KAIRO_SOCKET"); p != "" {
		return p, nil
	}
	home := clientHome().dir
	cfg, err := manifests.Load(filepath.Join(home, "kairo.toml"))
	if err != nil {
		return "", err
	}
	return cfg.SocketPath(home), nil
}

// dial connects to the kernel, with a message that says what to do when it
// is not running.
func dial(ctx context.Context) (*client.Client, error) {
	// Inside a sandbox, the kernel connection the skill was handed.
	if c, ok, err := client.DialEnv(); ok {
		return c, err
	}
	path, err := clientSocket()
	if err != nil {
		return nil, err
	}
	return dialPath(ctx, path)
}

// dialPath is dial for a socket the caller has already looked up.
func dialPath(ctx context.Context, path string) (*client.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := client.Dial(dctx, path)
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
		return nil, fmt.Errorf("the kernel is not running: nothing listens on %s.\nStart it with `kairo up` (with the same KAIRO_HOME), or point KAIRO_SOCKET at a running kernel's socket", path)
	case errors.Is(err, syscall.EACCES):
		return nil, fmt.Errorf("no permission to connect to %s: the kernel's socket belongs to another user", path)
	}
	return nil, err
}

// callKernel dials the kernel, makes one call and hangs up; its error is
// fit for the terminal: it names the command the person typed (cmd, "kairo
// plugins"), not the method's wire name.
func callKernel(ctx context.Context, cmd, method string, params, result any) error {
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Call(ctx, method, params, result); err != nil {
		return callError(cmd, err)
	}
	return nil
}

// callError turns a failed call into a message for the terminal.
func callError(what string, err error) error {
	var ae *abi.Error
	switch {
	case errors.As(err, &ae):
		return fmt.Errorf("%s: %s", what, ae.Message)
	case errors.Is(err, client.ErrClosed):
		return fmt.Errorf("%s: lost the connection to the kernel (did it stop?): %v", what, err)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: interrupted", what)
	}
	return fmt.Errorf("%s: %w", what, err)
}
