package host_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sandbox"
)

// A Go program embeds Kairo: a daemon on a data folder of its own, on the
// embedded defaults. The program talks to it in process; any other client
// reaches it on its socket (d.Socket()). Its main starts with the sandbox
// helper's hook, as here: the daemon confines each process it spawns by
// starting the program itself as the helper (unless kairo-sandbox lies
// beside it). This package's tests call the hook in TestMain.
func Example() {
	if sandbox.IsHelper() {
		sandbox.HelperMain() // confine this process and exec the target; never returns
	}
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
	res, err := c.Publish(ctx, abi.Event{Type: "app.order.created"})
	fmt.Println(res.Seq > 0, err)

	p, err := c.Spawn(ctx, abi.SpawnParams{Argv: []string{"echo", "hi"}})
	if err != nil {
		log.Fatal(err)
	}
	end, err := p.Wait(ctx)
	fmt.Printf("%s %d %q %v\n", end.Status, *end.ExitCode, p.Stdout(), err)
	// Output:
	// true <nil>
	// exited 0 "hi\n" <nil>
}
