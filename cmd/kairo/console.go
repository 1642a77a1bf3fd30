package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"

	"github.com/kairo-os/kairo/abi"
)

func runConsole(ctx context.Context, args []string) error {
	f := newFlags("console", "kairo console [--print]", `
Print the address of the running daemon's console — its web page, with the
token that lets a browser in — and open it in a browser when there is one
(xdg-open, with $DISPLAY or $WAYLAND_DISPLAY set). The page takes the token
from the address into a cookie and drops it from the address bar.

The console is off by default; turn it on in kairo.toml:

  [console]
  listen = "127.0.0.1:8765"

The token is in $KAIRO_HOME/console.token: whoever holds it acts as you.`)
	printOnly := f.Bool("print", false, "only print the address; open no browser")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	var res abi.ConsoleURLResult
	if err := callKernel(ctx, abi.MethodConsoleURL, nil, &res); err != nil {
		return err
	}
	fmt.Println(res.URL)
	if *printOnly || (os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "") {
		return nil
	}
	open, err := exec.LookPath("xdg-open")
	if err != nil {
		return nil // no browser to open: the address is printed
	}
	cmd := exec.Command(open, res.URL)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "kairo: could not open a browser (%v); open the address above\n", err)
		return nil
	}
	// xdg-open hands the address to the browser; kairo need not wait.
	return cmd.Process.Release()
}
