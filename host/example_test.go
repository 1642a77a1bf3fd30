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
)

// A Go program embeds Kairo: a daemon on a data folder of its own, on the
// embedded defaults. The program talks to it in process; any other client
// reaches it on its socket (d.Socket()).
func Example() {
	home, _ := os.MkdirTemp("", "kairo-example-")
	defer os.RemoveAll(home)

	d := host.New(host.Config{Home: home, Config: manifests.Default()})
	if err := d.Start(); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer d.Stop(ctx)

	c, err := d.Connect()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	res, err := c.Publish(ctx, abi.Event{Type: "app.order.created"})
	fmt.Println(res.Seq > 0, err)
	// Output: true <nil>
}
