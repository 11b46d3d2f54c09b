package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracingOn reports whether the standard OpenTelemetry environment asks
// for traces: an OTLP endpoint named, the SDK not disabled, and the traces
// exporter not "none".
func tracingOn(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// openTracing returns the tracer provider of run, mcp and acp: spans sent
// over OTLP/HTTP to the endpoint the standard environment names
// (OTEL_EXPORTER_OTLP_ENDPOINT, …_TRACES_ENDPOINT, …_HEADERS, read by the
// exporter), or nil when it names none. closeFn flushes what is left, for
// at most 5 seconds, and reports spans that could not be sent on stderr.
func openTracing(ctx context.Context, stderr io.Writer) (tp trace.TracerProvider, closeFn func(), err error) {
	if !tracingOn(os.Getenv) {
		return nil, func() {}, nil
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		p := os.Getenv(name)
		if p == "" {
			continue
		}
		if p != "http/protobuf" {
			return nil, nil, usagef("%s is %s, but offstage sends traces over OTLP/HTTP with protobuf only: point the endpoint at the collector's HTTP port (usually 4318) and unset %s, or set it to http/protobuf", name, p, name)
		}
		break // the traces' own setting wins over the general one
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := os.Getenv(name); v != "" {
			if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, nil, usagef("%s=%q is not an http:// or https:// URL: give the collector's OTLP/HTTP address, such as http://localhost:4318", name, v)
			}
		}
	}
	// The exporter's failures (a collector away) go to stderr as
	// offstage's warnings, at most once a minute, not as Go log lines
	// into a conversation.
	var mu sync.Mutex
	var last time.Time
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) < time.Minute {
			return
		}
		last = time.Now()
		fmt.Fprintf(stderr, "offstage: warning: traces could not be sent to %s (said at most once a minute): %v\n", endpointOf(os.Getenv), err)
	}))
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, usagef("cannot export traces to %s: %v", endpointOf(os.Getenv), err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.version", version())}
	if os.Getenv("OTEL_SERVICE_NAME") == "" {
		attrs = append(attrs, attribute.String("service.name", "offstage"))
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil {
		res = resource.Default()
	}
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return provider, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := provider.Shutdown(ctx); err != nil {
			fmt.Fprintf(stderr, "offstage: warning: the last traces were not all sent to %s: %v\n", endpointOf(os.Getenv), err)
		}
	}, nil
}

func endpointOf(getenv func(string) string) string {
	if e := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); e != "" {
		return e
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
}
