package jetstream

import "time"

// DefaultTimeout is Config.Timeout's default: how long
// an append waits for the cluster's acknowledgement before the bus takes
// the store for away. A healthy cluster answers in milliseconds; the wait
// is what an append in flight when a stream's leader dies costs before
// the bus notices, so failover is the cluster's election plus at most
// this (BenchmarkFailover). It was 10 s, which made publishing resume 11 s
// after a leader was killed though the cluster had a new one after 5.
const DefaultTimeout = 2 * time.Second

// DefaultReconnectWait is Config.ReconnectWait's
// default: a client tries the other servers of its URL at once, and a
// server it lost again after this. Shorter than nats.go's 2 s, so that a
// single server that restarts is reached again within a second.
const DefaultReconnectWait = 500 * time.Millisecond
