package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpHTTP posts spans to an OTLP/HTTP receiver, protobuf-encoded: the otlptrace.Client behind
// the exporter. It stands in for go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp,
// whose configuration package imports all of gRPC and its gateway (about a hundred packages,
// some 14 s of the 5½ minutes of CPU a cold build of the server takes) for options an HTTP
// exporter never uses. It reads the same variables: OTEL_EXPORTER_OTLP_[TRACES_]HEADERS,
// OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT (milliseconds, 10 s by default) and
// OTEL_EXPORTER_OTLP_[TRACES_]COMPRESSION (gzip or none), and retries the answers a receiver
// gives when busy (429, 502, 503, 504) or a failed connection, with backoff, within the
// timeout.
type otlpHTTP struct {
	url     string
	headers map[string]string
	gzip    bool
	timeout time.Duration
	client  *http.Client
}

// Retry pauses of an export: doubling from the first, at most the last, or what the
// receiver's Retry-After asks.
const (
	otlpFirstRetry = 500 * time.Millisecond
	otlpMaxRetry   = 5 * time.Second
)

// newOTLPHTTP configures a client for endpoint (the full URL spans are posted to) from the
// environment (getenv).
func newOTLPHTTP(endpoint string, getenv func(string) string) (*otlpHTTP, error) {
	c := &otlpHTTP{url: endpoint, timeout: 10 * time.Second, client: &http.Client{}}
	signal := func(name string) string { // the TRACES_ variable wins over the general one
		if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_" + name)); v != "" {
			return v
		}
		return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + name))
	}
	var err error
	if c.headers, err = parseOTLPHeaders(signal("HEADERS")); err != nil {
		return nil, err
	}
	if v := signal("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_TIMEOUT: %q is not a positive number of milliseconds", v)
		}
		c.timeout = time.Duration(ms) * time.Millisecond
	}
	switch v := signal("COMPRESSION"); v {
	case "", "none":
	case "gzip":
		c.gzip = true
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_COMPRESSION: %q is not gzip or none", v)
	}
	return c, nil
}

// parseOTLPHeaders reads "key1=value1,key2=value2", values URL-encoded (the OTLP exporter
// specification's format).
func parseOTLPHeaders(s string) (map[string]string, error) {
	headers := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		key := strings.TrimSpace(k)
		value, err := url.PathUnescape(strings.TrimSpace(v))
		if !ok || key == "" || err != nil {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_HEADERS: %q is not key=value", pair)
		}
		headers[key] = value
	}
	return headers, nil
}

func (c *otlpHTTP) Start(context.Context) error { return nil }

func (c *otlpHTTP) Stop(context.Context) error {
	c.client.CloseIdleConnections()
	return nil
}

// UploadTraces posts one export request. TracesData has the wire format of the collector's
// ExportTraceServiceRequest (both are `repeated ResourceSpans resource_spans = 1`), which
// spares the collector package and its gRPC service stubs.
func (c *otlpHTTP) UploadTraces(ctx context.Context, spans []*tracepb.ResourceSpans) error {
	body, err := proto.Marshal(&tracepb.TracesData{ResourceSpans: spans})
	if err != nil {
		return err
	}
	if c.gzip {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		_, _ = w.Write(body)
		if err := w.Close(); err != nil {
			return err
		}
		body = b.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	pause := otlpFirstRetry
	for {
		wait, err := c.post(ctx, body)
		if err == nil || wait < 0 {
			return err
		}
		if wait == 0 {
			wait = pause
			pause = min(2*pause, otlpMaxRetry)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %v)", err, context.Cause(ctx))
		case <-time.After(wait):
		}
	}
}

// post sends body once. On failure wait says whether to retry: -1 never, 0 after the
// backoff's pause, else after the receiver's Retry-After.
func (c *otlpHTTP) post(ctx context.Context, body []byte) (wait time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return -1, err
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if c.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return -1, err
		}
		return 0, err // refused, reset: the receiver may be restarting
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return 0, nil
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusBadGateway,
		resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusGatewayTimeout:
		err := fmt.Errorf("OTLP receiver %s answered %s", c.url, resp.Status)
		if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
			return time.Duration(s) * time.Second, err
		}
		return 0, err
	}
	return -1, errors.New(strings.TrimSpace(fmt.Sprintf("OTLP receiver %s answered %s: %s", c.url, resp.Status, bytes.TrimSpace(msg))))
}
