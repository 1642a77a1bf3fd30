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
	"github.com/kairo-os/kairo/sdk/client"
)

// A Go program embeds Kairo: a daemon on a data folder of its own, on the
// embedded defaults, which any client reaches on its socket.
func Example() {
	home, _ := os.MkdirTemp("", "kairo-example-")
	defer os.RemoveAll(home)

	d := host.New(host.Config{Home: home, Config: manifests.Default()})
	if err := d.Start(); err != nil {
		log.Fatal(err)
	}
	defer d.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.Socket())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	res, err := c.Publish(ctx, abi.Event{Type: "app.order.created"})
	fmt.Println(res.Seq > 0, err)
	// Output: true <nil>
}
