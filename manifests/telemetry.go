package manifests

import (
	"fmt"
	"net/textproto"
	"net/url"
	"strings"

	"github.com/kairo-os/kairo/kernel/secrets"
)

// TelemetryConfig is the [telemetry] table: the run loops as OpenTelemetry
// traces, made from the log, and the daemon's health as Prometheus
// metrics. Both are off by default.
type TelemetryConfig struct {
	// OTLPEndpoint is the OTLP receiver the traces go to: the base URL of
	// an OTLP/HTTP receiver ("http://127.0.0.1:4318"; the path
	// /v1/traces is added unless it names one) or the address of an
	// OTLP/gRPC one ("http://127.0.0.1:4317" with OTLPProtocol "grpc").
	// "https" uses TLS. "" (the default) turns tracing off.
	OTLPEndpoint string `toml:"otlp_endpoint"`
	// OTLPProtocol is "http/protobuf" (the default) or "grpc", as
	// OTEL_EXPORTER_OTLP_PROTOCOL spells them.
	OTLPProtocol string `toml:"otlp_protocol"`
	// OTLPHeaders are sent with every export, for the receiver's auth: a
	// value "secret:NAME" is read from the secret store at start and
	// masked like every secret.
	OTLPHeaders map[string]string `toml:"otlp_headers"`
	// ServiceName is the traces' service.name, default "kairo".
	ServiceName string `toml:"service_name"`
	// MaxBacklog bounds how far behind the log's head the export may
	// fall, in events (default 100000): past it, while the receiver is
	// down, the oldest are passed by and counted. Nothing within it is
	// lost: the export resumes from the log.
	MaxBacklog int `toml:"max_backlog"`
	// MetricsListen serves /metrics for Prometheus, "127.0.0.1:9464";
	// "" (the default) turns it off. Port 0 picks a free port.
	MetricsListen string `toml:"metrics_listen"`
	// AllowRemote lets MetricsListen be an address other machines reach.
	AllowRemote bool `toml:"allow_remote"`
}

// The OTLP protocols.
const (
	OTLPHTTP = "http/protobuf"
	OTLPGRPC = "grpc"
)

// DefaultMaxBacklog is [telemetry] max_backlog's default.
const DefaultMaxBacklog = 100_000

// maxOTLPHeaders bounds [telemetry] otlp_headers.
const maxOTLPHeaders = 32

// Backlog is MaxBacklog, or its default.
func (c TelemetryConfig) Backlog() int {
	if c.MaxBacklog <= 0 {
		return DefaultMaxBacklog
	}
	return c.MaxBacklog
}

// Service is ServiceName, or "kairo".
func (c TelemetryConfig) Service() string {
	if c.ServiceName == "" {
		return "kairo"
	}
	return c.ServiceName
}

// Protocol is OTLPProtocol, or OTLPHTTP.
func (c TelemetryConfig) Protocol() string {
	if c.OTLPProtocol == "" {
		return OTLPHTTP
	}
	return c.OTLPProtocol
}

func (c *TelemetryConfig) validate() []*Error {
	var errs []*Error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{Key: "telemetry." + key, Msg: fmt.Sprintf(format, args...)})
	}
	switch c.OTLPProtocol {
	case "", OTLPHTTP, OTLPGRPC:
	default:
		bad("otlp_protocol", "%q is not a protocol; write %q or %q", c.OTLPProtocol, OTLPHTTP, OTLPGRPC)
	}
	if c.OTLPEndpoint != "" {
		u, err := url.Parse(c.OTLPEndpoint)
		switch {
		case err != nil || u.Host == "":
			bad("otlp_endpoint", "%q is not a URL; write the receiver's, such as \"http://127.0.0.1:4318\" (OTLP/HTTP) or \"http://127.0.0.1:4317\" with otlp_protocol = \"grpc\"", c.OTLPEndpoint)
		case u.Scheme != "http" && u.Scheme != "https":
			bad("otlp_endpoint", "%q: the scheme %q is neither http nor https; write \"http://HOST:PORT\", or \"https://HOST:PORT\" for TLS", c.OTLPEndpoint, u.Scheme)
		case u.User != nil:
			bad("otlp_endpoint", "%q holds a user and password, which would be logged; put them in otlp_headers, as \"secret:NAME\"", c.OTLPEndpoint)
		case c.Protocol() == OTLPGRPC && u.Path != "" && u.Path != "/":
			bad("otlp_endpoint", "%q: an OTLP/gRPC endpoint has no path; write \"%s://%s\"", c.OTLPEndpoint, u.Scheme, u.Host)
		}
	} else if len(c.OTLPHeaders) > 0 {
		bad("otlp_endpoint", "is empty, so otlp_headers have nothing to go to; set the receiver's URL, such as \"http://127.0.0.1:4318\"")
	}
	if len(c.OTLPHeaders) > maxOTLPHeaders {
		bad("otlp_headers", "%d headers, over the %d allowed", len(c.OTLPHeaders), maxOTLPHeaders)
	}
	for name, v := range c.OTLPHeaders {
		if name == "" || textproto.CanonicalMIMEHeaderKey(name) == "" || strings.ContainsAny(name, " \t\r\n:") {
			bad("otlp_headers", "%q is not a header name", name)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			bad("otlp_headers."+name, "holds a line break or NUL, which a header may not")
		}
		if secret, ok := strings.CutPrefix(v, "secret:"); ok {
			if err := secrets.ValidName(secret); err != nil {
				bad("otlp_headers."+name, "%v", err)
			}
		}
	}
	if c.MaxBacklog < 0 {
		bad("max_backlog", "%d: write a number of events, or leave it out for %d", c.MaxBacklog, DefaultMaxBacklog)
	}
	if c.ServiceName != "" && (len(c.ServiceName) > 128 || strings.ContainsAny(c.ServiceName, "\r\n\x00")) {
		bad("service_name", "%q: a service name is one line of at most 128 bytes", c.ServiceName)
	}
	errs = append(errs, validateListen("telemetry.metrics_listen", "telemetry", c.MetricsListen, c.AllowRemote, "9464")...)
	return errs
}
