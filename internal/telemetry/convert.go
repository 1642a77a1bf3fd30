package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/kairo-os/kairo/manifests"
)

// Uploader sends spans in OTLP's own form: the OpenTelemetry SDK's OTLP
// client ([otlptrace.Client]), over HTTP or gRPC. The spans are made from
// events that already ended, with the ids and times the log holds, so
// they go to the client straight, not through a tracer.
type Uploader interface {
	UploadTraces(ctx context.Context, spans []*tracepb.ResourceSpans) error
	Stop(ctx context.Context) error
}

var _ Uploader = otlptrace.Client(nil)

// OTLP opens the client [telemetry] names: OTLP over HTTP or gRPC, with the
// headers given (their secret handles already read). It retries nothing
// itself: the caller retries from the log.
func OTLP(ctx context.Context, cfg manifests.TelemetryConfig, headers map[string]string) (Uploader, error) {
	u, err := url.Parse(cfg.OTLPEndpoint)
	if err != nil {
		return nil, fmt.Errorf("[telemetry] otlp_endpoint: %w", err)
	}
	const timeout = 10 * time.Second
	var c otlptrace.Client
	if cfg.Protocol() == manifests.OTLPGRPC {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(u.Host), otlptracegrpc.WithTimeout(timeout),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}), otlptracegrpc.WithHeaders(headers)}
		if u.Scheme == "http" {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		c = otlptracegrpc.NewClient(opts...)
	} else {
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
		c = otlptracehttp.NewClient(opts...)
	}
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("[telemetry] otlp_endpoint %s: %w", RedactURL(cfg.OTLPEndpoint), err)
	}
	return c, nil
}

// Resource is the service the traces are of, as OTLP resource attributes.
type Resource []attribute.KeyValue

// ServiceResource is the resource of service, at version, on host ("" on a
// store of one host).
func ServiceResource(service, version, host string) Resource {
	r := Resource{attribute.String("service.name", service), attribute.String("service.version", version)}
	if host != "" {
		r = append(r, attribute.String("service.instance.id", host))
	}
	return r
}

// scope names the instrumentation that made the spans.
var scope = &commonpb.InstrumentationScope{Name: "github.com/kairo-os/kairo/internal/telemetry"}

// toOTLP is spans in OTLP's form, of res.
func toOTLP(res Resource, spans []Span) []*tracepb.ResourceSpans {
	out := make([]*tracepb.Span, len(spans))
	for i := range spans {
		out[i] = spanOTLP(&spans[i])
	}
	return []*tracepb.ResourceSpans{{
		Resource:   &resourcepb.Resource{Attributes: keyValues(res)},
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: scope, Spans: out}},
	}}
}

func spanOTLP(s *Span) *tracepb.Span {
	kind := s.Kind
	if kind == trace.SpanKindUnspecified {
		kind = trace.SpanKindInternal
	}
	end := s.End
	if end.Before(s.Start) {
		end = s.Start
	}
	p := &tracepb.Span{
		TraceId: s.Trace[:], SpanId: s.ID[:], Name: s.Name,
		Kind:              tracepb.Span_SpanKind(kind), // the API's kinds are OTLP's numbers
		StartTimeUnixNano: uint64(s.Start.UnixNano()), EndTimeUnixNano: uint64(end.UnixNano()),
		Attributes: keyValues(s.Attrs),
	}
	if s.Parent.IsValid() {
		p.ParentSpanId = s.Parent[:]
	}
	if s.Status == codes.Error {
		p.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: s.Msg}
	}
	for _, l := range s.Links {
		tid, sid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		p.Links = append(p.Links, &tracepb.Span_Link{TraceId: tid[:], SpanId: sid[:], Attributes: keyValues(l.Attributes)})
	}
	return p
}

func keyValues(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	out := make([]*commonpb.KeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = &commonpb.KeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)}
	}
	return out
}

func anyValue(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.STRINGSLICE:
		ss := v.AsStringSlice()
		vals := make([]*commonpb.AnyValue, len(ss))
		for i, s := range ss {
			vals[i] = &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
		}
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vals}}}
	default:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.String()}}
	}
}

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
