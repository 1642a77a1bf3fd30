// Command publish dials the Kairo kernel ($KAIRO_SOCKET, else the socket of
// the data folder client.FindHome finds) and publishes one event: the
// smallest client, whose stripped size TestClientBinarySize measures.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/client"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer c.Close()
	res, err := c.Publish(ctx, abi.Event{Type: "skill.hello.said"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("stored at seq", res.Seq)
}
