package jetstream

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// processCluster is three nats-servers with JetStream, each in a process
// of its own (this test binary, TestFailoverNodeChild), so that a node can
// be killed with SIGKILL: an in-process server's Shutdown hands its
// streams' leadership over first, which a crashed node never does.
type processCluster struct {
	t     testing.TB
	mu    sync.Mutex
	procs [3]*osexec.Cmd
	env   [3][]string
	ports [3]int
	nc    *nats.Conn // the test's own connection, for stream info
	js    jetstream.JetStream
}

// startProcessCluster starts the three nodes and waits until the cluster
// answers JetStream requests; each is killed at the end of the test.
func startProcessCluster(t testing.TB) *processCluster {
	t.Helper()
	ports := freePorts(t, 6)
	routes := make([]string, 3)
	for i := range routes {
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[3+i])
	}
	c := &processCluster{t: t}
	dir := t.TempDir()
	for i := range c.procs {
		c.ports[i] = ports[i]
		c.env[i] = append(os.Environ(),
			"KAIRO_TEST_NODE=n"+strconv.Itoa(i),
			"KAIRO_TEST_NODE_PORT="+strconv.Itoa(ports[i]),
			"KAIRO_TEST_NODE_CLUSTER_PORT="+strconv.Itoa(ports[3+i]),
			"KAIRO_TEST_NODE_ROUTES="+strings.Join(routes, ","),
			"KAIRO_TEST_NODE_DIR="+filepath.Join(dir, "n"+strconv.Itoa(i)))
	}
	t.Cleanup(c.shutdown)
	for i := range c.procs {
		c.start(i)
	}
	var err error
	if c.nc, err = nats.Connect(c.url(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if c.js, err = jetstream.New(c.nc); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a JetStream meta leader", 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := c.js.AccountInfo(ctx)
		return err == nil
	})
	return c
}

// start starts node i (again) on its ports and directory, and waits until
// it serves clients.
func (c *processCluster) start(i int) {
	c.t.Helper()
	cmd := osexec.Command(os.Args[0], "-test.run=^TestFailoverNodeChild$", "-test.count=1")
	cmd.Env = c.env[i]
	out, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		r := bufio.NewScanner(out)
		for r.Scan() {
			if l := r.Text(); strings.HasPrefix(l, "ready") || strings.HasPrefix(l, "error") {
				ready <- l
			}
		}
		close(ready)
	}()
	select {
	case l := <-ready:
		if l != "ready" {
			cmd.Process.Kill()
			cmd.Wait()
			c.t.Fatalf("node %d: %s", i, l)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		c.t.Fatalf("node %d was not ready within 20 s", i)
	}
	c.mu.Lock()
	c.procs[i] = cmd
	c.mu.Unlock()
}

// kill kills node i with SIGKILL and waits until it is gone.
func (c *processCluster) kill(i int) {
	c.mu.Lock()
	cmd := c.procs[i]
	c.procs[i] = nil
	c.mu.Unlock()
	if cmd != nil {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
}

func (c *processCluster) shutdown() {
	if c.nc != nil {
		c.nc.Close()
	}
	for i := range c.procs {
		c.kill(i)
	}
}

// url is the client URLs of the three nodes.
func (c *processCluster) url() string {
	urls := make([]string, len(c.ports))
	for i, p := range c.ports {
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	return strings.Join(urls, ",")
}

// streamLeader is the index of the node that leads stream, as the stream's
// info says within 200 ms, or -1; a node named not is not taken for the
// leader (it was killed, and the info may be stale).
func (c *processCluster) streamLeader(stream string, not int) int {
	info, ok := c.streamInfo(stream)
	if !ok || info.Cluster == nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimPrefix(info.Cluster.Leader, "n"))
	if err != nil || n < 0 || n > 2 || n == not {
		return -1
	}
	return n
}

func (c *processCluster) streamInfo(stream string) (*jetstream.StreamInfo, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	st, err := c.js.Stream(ctx, stream)
	if err != nil {
		return nil, false
	}
	return st.CachedInfo(), true
}

// replicasCurrent reports whether the stream's leader says every replica
// is current.
func (c *processCluster) replicasCurrent(stream string) bool {
	info, ok := c.streamInfo(stream)
	if !ok || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
		return false
	}
	for _, r := range info.Cluster.Replicas {
		if !r.Current || r.Offline {
			return false
		}
	}
	return true
}

// A node of processCluster: a nats-server in this process, until it is
// killed.
func TestFailoverNodeChild(t *testing.T) {
	name := os.Getenv("KAIRO_TEST_NODE")
	if name == "" {
		t.Skip("run by processCluster")
	}
	port, _ := strconv.Atoi(os.Getenv("KAIRO_TEST_NODE_PORT"))
	cport, _ := strconv.Atoi(os.Getenv("KAIRO_TEST_NODE_CLUSTER_PORT"))
	var routes []*url.URL
	for _, r := range strings.Split(os.Getenv("KAIRO_TEST_NODE_ROUTES"), ",") {
		u, err := url.Parse(r)
		if err != nil {
			fmt.Println("error", err)
			return
		}
		routes = append(routes, u)
	}
	srv, err := server.NewServer(&server.Options{
		ServerName: name,
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   os.Getenv("KAIRO_TEST_NODE_DIR"),
		NoSigs:     true,
		NoLog:      true,
		MaxPayload: bus.MaxEventData + 64<<10,
		Cluster:    server.ClusterOpts{Name: "kairo-test", Host: "127.0.0.1", Port: cport},
		Routes:     routes,
	})
	if err != nil {
		fmt.Println("error", err)
		return
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		fmt.Println("error not ready within 10 s")
		return
	}
	fmt.Println("ready")
	time.Sleep(10 * time.Minute) // until killed
}
