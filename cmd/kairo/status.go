package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/jsonview"
	"github.com/kairo-os/kairo/sdk/client"
)

func runPing(ctx context.Context, args []string) error {
	f := newFlags("ping", "kairo ping [-c N]", "Measure round trips to the kernel (kernel.ping).")
	count := f.Int("c", 1, "send `N` pings, one a second")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	path, err := clientSocket()
	if err != nil {
		return err
	}
	c, err := dialPath(ctx, path)
	if err != nil {
		return err
	}
	defer c.Close()
	for i := 0; i < *count; i++ {
		if i > 0 {
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return nil
			}
		}
		rtt, err := c.Ping(ctx)
		if err != nil {
			return callError("ping", err)
		}
		fmt.Printf("pong from %s: time=%v\n", path, rtt.Round(time.Microsecond))
	}
	return nil
}

// statusJSON is the --json form of kairo status, the console's too.
type statusJSON = jsonview.Status

func runStatus(ctx context.Context, args []string) error {
	f := newFlags("status", "kairo status [--json]", `
Show the running kernel's version, methods and counters (kernel.introspect
and system.get_metrics), and the data folder this client found it by:
$KAIRO_HOME, else ./.kairo if a kernel listens there, else the one the
user's running kernel named in $XDG_RUNTIME_DIR/kairo/current (or the
cache folder's kairo/current), else ./.kairo.`)
	asJSON := f.Bool("json", false, "print one JSON object")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	home, from, path, err := statusTarget()
	if err != nil {
		return err
	}
	c, err := dialPath(ctx, path)
	if err != nil {
		return err
	}
	defer c.Close()
	var in abi.IntrospectResult
	if err := c.Call(ctx, abi.MethodKernelIntrospect, nil, &in); err != nil {
		return callError("kairo status", err)
	}
	var m abi.Metrics
	if err := c.Call(ctx, abi.MethodSystemMetrics, nil, &m); err != nil {
		return callError("kairo status", err)
	}
	var ping abi.PingResult
	if err := c.Call(ctx, abi.MethodKernelPing, nil, &ping); err != nil {
		return callError("kairo status", err)
	}
	if *asJSON {
		s := jsonview.NewStatus(home, from, path, in, m, ping)
		fmt.Printf("%s\n", marshalJSON(s))
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	state := "ready"
	if !ping.Ready {
		state = "starting or stopping: the socket serves, the plugins or the agent are not up"
	}
	fmt.Fprintf(w, "kernel\t%s (ABI %d), up %v, %s\n", in.Version, in.ABIVersion, m.Uptime.Round(time.Second), state)
	switch from {
	case "KAIRO_SOCKET":
		fmt.Fprintf(w, "home\tnone looked up: KAIRO_SOCKET names the socket\n")
	case "pointer":
		fmt.Fprintf(w, "home\t%s (found through %s)\n", termLine(home), termLine(client.PointerPath()))
	case "KAIRO_HOME":
		fmt.Fprintf(w, "home\t%s (KAIRO_HOME)\n", termLine(home))
	default:
		fmt.Fprintf(w, "home\t%s (in the current folder)\n", termLine(home))
	}
	fmt.Fprintf(w, "socket\t%s\n", termLine(path))
	if in.Host != "" {
		fmt.Fprintf(w, "host\t%s (its name among the hosts sharing the store)\n", termLine(in.Host))
	}
	fmt.Fprintf(w, "store\t%s, last seq %d\n", m.Store, m.LastSeq)
	if !m.StoreFullSince.IsZero() {
		fmt.Fprintf(w, "\tREFUSING WRITES: its disk is full since %s (%v ago), %d events refused; reads and subscriptions work; free space and it resumes\n",
			m.StoreFullSince.Local().Format(time.TimeOnly), time.Since(m.StoreFullSince).Round(time.Second), m.StoreRefused)
	}
	if !m.StoreUnreachableSince.IsZero() {
		fmt.Fprintf(w, "\tREFUSING WRITES: it cannot be reached since %s (%v ago), %d events refused; processes run on; it resumes once the store answers\n",
			m.StoreUnreachableSince.Local().Format(time.TimeOnly), time.Since(m.StoreUnreachableSince).Round(time.Second), m.StoreUnreachableRefused)
	}
	fmt.Fprintf(w, "events\t%d published, %d duplicates, %d delivered, %d catch-ups\n", m.Published, m.Duplicates, m.Delivered, m.CatchUps)
	fmt.Fprintf(w, "clients\t%d connections, %d subscriptions, %d requests, %d bad frames\n", m.Connections, m.Subscriptions, m.Requests, m.BadFrames)
	fmt.Fprintf(w, "runtime\t%d goroutines, %s heap\n", m.Goroutines, humanBytes(m.HeapBytes))
	fmt.Fprintf(w, "methods\t%s\n", termLine(strings.Join(in.Methods, ", ")))
	return w.Flush()
}

// statusTarget is the data folder kairo status reports on, absolute, how
// it was found (statusJSON.HomeFrom), and the socket it dials.
func statusTarget() (home, from, sock string, err error) {
	if p := os.Getenv("KAIRO_SOCKET"); p != "" {
		return "", "KAIRO_SOCKET", p, nil
	}
	h := clientHome()
	if home, err = filepath.Abs(h.dir); err != nil {
		return "", "", "", err
	}
	if sock, err = homeSocket(h.dir); err != nil {
		return "", "", "", err
	}
	return home, h.from, sock, nil
}

func runVersion(ctx context.Context, args []string) error {
	f := newFlags("version", "kairo version [--json]", "Print kairo's version, the ABI version it speaks, and the Go version it was built with.")
	asJSON := f.Bool("json", false, "print one JSON object")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	if *asJSON {
		fmt.Printf("%s\n", marshalJSON(struct {
			Version    string `json:"version"`
			ABIVersion int    `json:"abiVersion"`
			Go         string `json:"go"`
			Platform   string `json:"platform"`
		}{version, abi.Version, runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH}))
		return nil
	}
	fmt.Printf("kairo %s (ABI %d, %s %s/%s)\n", version, abi.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// humanBytes is n in the largest binary unit that leaves at least 1, with
// one decimal: "95.9 MiB", not "98259KiB".
func humanBytes(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, u := float64(n), 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}
