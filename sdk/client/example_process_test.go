package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host"
	"github.com/kairo-os/kairo/manifests"
)

// A program runs a command through the kernel — sandboxed, as every
// process is — waits for it and reads what it printed: no msgpack by
// hand, the params and results are abi's. The daemon here is embedded
// (host.New, then Connect); client.Dial reaches one that `kairo up` runs.
// The program's main starts with the sandbox helper's hook (see TestMain).
func ExampleClient_Spawn() {
	home, _ := os.MkdirTemp("", "kairo-example-")
	defer os.RemoveAll(home)
	d := host.New(host.Config{Home: home, Config: manifests.Default()})
	if err := d.Start(); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer d.Stop(ctx)
	c, err := d.Connect()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	p, err := c.Spawn(ctx, abi.SpawnParams{Argv: []string{"sh", "-c", "echo hello; echo world; echo 'no such file' >&2; exit 3"}})
	if err != nil {
		log.Fatal(err)
	}
	end, err := p.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(end.Status, *end.ExitCode)
	fmt.Printf("stdout %q\nstderr %q\n", p.Stdout(), p.Stderr())
	// Output:
	// exited 3
	// stdout "hello\nworld\n"
	// stderr "no such file\n"
}
