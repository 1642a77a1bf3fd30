// Command server is the MCP server internal/mcp's tests run over stdio, built
// from the official SDK. Its flags make it misbehave the ways real servers
// do when they are asked to stop, or when they list or answer too much.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kairo-os/kairo/internal/mcp/internal/testserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	ignoreEOF := flag.Bool("ignore-stdin-eof", false, "keep running after stdin closes")
	ignoreTerm := flag.Bool("ignore-term", false, "ignore SIGTERM")
	pageSize := flag.Int("page-size", 0, "tools per tools/list page")
	child := flag.Bool("child", false, "be a child that ignores SIGTERM and sleeps")
	var named []string
	flag.Func("tool", "add a tool `NAME` that says its name (repeatable)", func(name string) error {
		named = append(named, name)
		return nil
	})
	big := flag.Bool("big", false, "add the tool big, which answers as many bytes as asked")
	flag.Parse()

	if *ignoreTerm || *child {
		signal.Ignore(syscall.SIGTERM)
	}
	if *child {
		sleep()
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s := testserver.New(testserver.Config{PageSize: *pageSize, Process: true, Child: []string{exe, "-child"}, Named: named, Big: *big})
	err = s.Run(context.Background(), &mcp.StdioTransport{})
	fmt.Fprintln(os.Stderr, "server: stdin ended:", err)
	if *ignoreEOF {
		sleep()
	}
}

// sleep never returns (a bare select{} would be taken for a deadlock).
func sleep() {
	for {
		time.Sleep(time.Hour)
	}
}
