package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/kairo-os/kairo/manifests"
)

// OTLP opens the exporter [telemetry] names: OTLP over HTTP or gRPC, with
// the headers given (their secret handles already read). It retries
// nothing itself: the caller retries from the log.
func OTLP(ctx context.Context, cfg manifests.TelemetryConfig, headers map[string]string) (sdktrace.SpanExporter, error) {
	u, err := url.Parse(cfg.OTLPEndpoint)
	if err != nil {
		return nil, fmt.Errorf("[telemetry] otlp_endpoint: %w", err)
	}
	const timeout = 10 * time.Second
	if cfg.Protocol() == manifests.OTLPGRPC {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(u.Host), otlptracegrpc.WithTimeout(timeout),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}), otlptracegrpc.WithHeaders(headers)}
		if u.Scheme == "http" {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	p := u.Path
	if p == "" || p == "/" {
		p = "/v1/traces"
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(u.Host), otlptracehttp.WithURLPath(p),
		otlptracehttp.WithTimeout(timeout), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
		otlptracehttp.WithHeaders(headers)}
	if u.Scheme == "http" {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	return otlptracehttp.New(ctx, opts...)
}

// Resource is the service the traces are of.
func Resource(service, version, host string) *resource.Resource {
	attrs := []attribute.KeyValue{attribute.String("service.name", service), attribute.String("service.version", version)}
	if host != "" {
		attrs = append(attrs, attribute.String("service.instance.id", host))
	}
	return resource.NewSchemaless(attrs...)
}

// converter makes the SDK's read-only spans of our Span values, through a tracer
// whose ids are the ones the builder derived.
type converter struct {
	tracer trace.Tracer
	done   *[]sdktrace.ReadOnlySpan
}

func newConverter(res *resource.Resource) *converter {
	done := new([]sdktrace.ReadOnlySpan)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithIDGenerator(givenIDs{}),
		sdktrace.WithSpanProcessor(collector{done}),
	)
	return &converter{tracer: tp.Tracer("github.com/kairo-os/kairo/internal/telemetry"), done: done}
}

// convert returns the SDK's spans of spans. Not safe for concurrent use.
func (c *converter) convert(spans []Span) []sdktrace.ReadOnlySpan {
	*c.done = make([]sdktrace.ReadOnlySpan, 0, len(spans))
	for i := range spans {
		s := &spans[i]
		ctx := context.WithValue(context.Background(), idsKey{}, ids{s.Trace, s.ID})
		if s.Parent.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: s.Trace, SpanID: s.Parent, TraceFlags: trace.FlagsSampled, Remote: true}))
		}
		kind := s.Kind
		if kind == trace.SpanKindUnspecified {
			kind = trace.SpanKindInternal
		}
		_, sp := c.tracer.Start(ctx, s.Name, trace.WithTimestamp(s.Start), trace.WithSpanKind(kind),
			trace.WithAttributes(s.Attrs...), trace.WithLinks(s.Links...))
		if s.Status == codes.Error {
			sp.SetStatus(codes.Error, s.Msg)
		}
		end := s.End
		if end.Before(s.Start) {
			end = s.Start
		}
		sp.End(trace.WithTimestamp(end))
	}
	out := *c.done
	*c.done = nil
	return out
}

type idsKey struct{}

type ids struct {
	trace trace.TraceID
	span  trace.SpanID
}

// givenIDs hands the tracer the ids the context carries.
type givenIDs struct{}

func (givenIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	v, _ := ctx.Value(idsKey{}).(ids)
	return v.trace, v.span
}

func (givenIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	v, _ := ctx.Value(idsKey{}).(ids)
	return v.span
}

// collector keeps each span as it ends.
type collector struct{ done *[]sdktrace.ReadOnlySpan }

func (c collector) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c collector) OnEnd(s sdktrace.ReadOnlySpan)                   { *c.done = append(*c.done, s) }
func (c collector) Shutdown(context.Context) error                  { return nil }
func (c collector) ForceFlush(context.Context) error                { return nil }

// RedactURL is u without anything after the host, for messages.
func RedactURL(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		rest := u[i+3:]
		if j := strings.IndexAny(rest, "/?#"); j >= 0 {
			rest = rest[:j]
		}
		return u[:i+3] + rest
	}
	return u
}
