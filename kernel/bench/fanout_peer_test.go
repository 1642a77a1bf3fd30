package bench

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/kairo-os/kairo/abi"
)

// fanoutNATS is BenchmarkFanoutMemory's peer: NATS core publish/subscribe
// on an embedded server, a publisher and a kairo.> subscriber each on a
// connection of its own, no persistence (a core subscription holds nothing
// a subscriber missed). The connections are in-process (nats.go's
// InProcessServer, a net.Pipe) or over loopback TCP, which on two cores
// ran 1.4–2× faster: net.Pipe hands over each write synchronously.
type fanoutNATS struct {
	srv      *server.Server
	pub, sub *nats.Conn
	msg      []byte
	got      atomic.Int64
	want     atomic.Int64
	all      chan struct{}
	failed   chan error
}

// newFanoutNATS starts the server and subscribes; each message is the
// envelope a Kairo event with data is stored as.
func newFanoutNATS(b *testing.B, data []byte, tcp bool) *fanoutNATS {
	// No slow-consumer bound within reach: a round's messages all fit.
	srv, err := server.NewServer(&server.Options{DontListen: !tcp, Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true, MaxPending: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		b.Fatal("embedded nats-server not ready")
	}
	p := &fanoutNATS{srv: srv, all: make(chan struct{}, 1), failed: make(chan error, 1)}
	p.msg = abi.AppendEvent(nil, &abi.Event{ID: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", Type: "kairo.bench.event", Source: "kairo", Time: time.Now(), Data: data})
	onErr := nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case p.failed <- err:
		default:
		}
	})
	if p.pub, err = p.connect(tcp, onErr); err != nil {
		p.close()
		b.Fatal(err)
	}
	if p.sub, err = p.connect(tcp, onErr); err != nil {
		p.close()
		b.Fatal(err)
	}
	s, err := p.sub.Subscribe("kairo.>", func(*nats.Msg) {
		if p.got.Add(1) >= p.want.Load() {
			select {
			case p.all <- struct{}{}:
			default:
			}
		}
	})
	if err == nil {
		err = s.SetPendingLimits(-1, -1)
	}
	if err == nil {
		err = p.sub.Flush() // the server has the subscription
	}
	if err != nil {
		p.close()
		b.Fatal(err)
	}
	return p
}

// round publishes n messages and returns the rate at which the subscriber
// received them.
func (p *fanoutNATS) round(b *testing.B, n int) float64 {
	p.want.Add(int64(n))
	start := time.Now()
	for range n {
		if err := p.pub.Publish("kairo.bench.event", p.msg); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-p.all:
	case err := <-p.failed:
		b.Fatalf("nats: %v after %d of %d messages", err, p.got.Load(), p.want.Load())
	case <-time.After(time.Minute):
		b.Fatalf("nats: %d of %d messages after a minute", p.got.Load(), p.want.Load())
	}
	elapsed := time.Since(start)
	if got, want := p.got.Load(), p.want.Load(); got != want {
		b.Fatalf("nats subscriber received %d messages, want %d", got, want)
	}
	return float64(n) / elapsed.Seconds()
}

func (p *fanoutNATS) close() {
	if p.pub != nil {
		p.pub.Close()
	}
	if p.sub != nil {
		p.sub.Close()
	}
	p.srv.Shutdown()
	p.srv.WaitForShutdown()
}

func (p *fanoutNATS) connect(tcp bool, o nats.Option) (*nats.Conn, error) {
	if tcp {
		return nats.Connect(p.srv.ClientURL(), o)
	}
	return nats.Connect("", nats.InProcessServer(p.srv), o)
}
