package e2e_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/testenv"
)

// TestTracesReachAnOTLPReceiver runs `surge serve` on real Redis and MariaDB with
// SURGE_OTLP_ENDPOINT pointing at a real OTLP/HTTP receiver process (internal/otlpsink, which
// decodes the protobuf export requests), and a sample ratio of 0, so that only requests whose
// W3C traceparent says "sampled" are recorded. A shop read (a cache miss: Redis, then MySQL)
// must arrive as one trace under the caller's span: the HTTP server span, the GraphQL
// operation span beneath it, and Redis and SQL spans beneath that; a request without a
// traceparent, or with an unsampled one, records nothing; the JSON access-log line of the
// traced request carries its request id and trace id.
func TestTracesReachAnOTLPReceiver(t *testing.T) {
	sink := testenv.StartOTLPSink(t)
	vars := productionVars(t, testenv.Phone())
	vars["SURGE_OTLP_ENDPOINT"] = sink.Endpoint
	vars["SURGE_TRACE_SAMPLE_RATIO"] = "0"
	vars["SURGE_LOG_FORMAT"] = "json"
	vars["OTEL_BSP_SCHEDULE_DELAY"] = "50" // ms between exports (the SDK's default is 5 s)
	p := startSurge(t, vars)
	shop := firstShop(t, p)

	traceID, callerSpan := randomHex(16), randomHex(8)
	read := gqlBody(`query ShopPage($id: ID!) { shop(id: $id) { id name } }`, map[string]any{"id": shop})
	if a := p.post(read, "traceparent", "00-"+traceID+"-"+callerSpan+"-01", "X-Request-Id", "traced-"+traceID); a.status != http.StatusOK || a.code() != "" {
		t.Fatalf("traced read: %v", a)
	}
	byID := func(spans []testenv.Span) map[string]testenv.Span {
		m := map[string]testenv.Span{}
		for _, s := range spans {
			if s.TraceID == traceID {
				m[s.SpanID] = s
			}
		}
		return m
	}
	// under reports whether span descends from ancestor within the trace.
	under := func(trace map[string]testenv.Span, span testenv.Span, ancestor string) bool {
		for id := span.ParentID; id != ""; id = trace[id].ParentID {
			if id == ancestor {
				return true
			}
		}
		return false
	}
	var httpSpan, opSpan testenv.Span
	var redisSpans, sqlSpans int
	sink.WaitFor(t, 15*time.Second, func(spans []testenv.Span) bool {
		trace := byID(spans)
		redisSpans, sqlSpans = 0, 0
		for _, s := range trace {
			switch {
			case s.Kind == "SPAN_KIND_SERVER":
				httpSpan = s
			case s.Attributes["graphql.operation.name"] != "":
				opSpan = s
			}
		}
		for _, s := range trace {
			if opSpan.SpanID == "" || !under(trace, s, opSpan.SpanID) {
				continue
			}
			switch s.Attributes["db.system.name"] {
			case "redis":
				redisSpans++
			case "mysql":
				sqlSpans++
			}
		}
		return httpSpan.SpanID != "" && opSpan.SpanID != "" && redisSpans > 0 && sqlSpans > 0
	})
	if httpSpan.ParentID != callerSpan || httpSpan.Name != "POST /query" || httpSpan.Service != "surge" ||
		httpSpan.Attributes["http.route"] != "/query" || httpSpan.Attributes["http.response.status_code"] != `{"intValue":"200"}` {
		t.Errorf("HTTP span: %+v; want a child of the caller's span %s named POST /query, route /query, status 200", httpSpan, callerSpan)
	}
	if opSpan.ParentID != httpSpan.SpanID || opSpan.Name != "query ShopPage" || opSpan.Attributes["graphql.operation.type"] != "query" {
		t.Errorf("GraphQL span: %+v; want query ShopPage, a child of the HTTP span %s", opSpan, httpSpan.SpanID)
	}
	if !strings.Contains(strings.Join(opSpan.Events, " "), "graphql.validate") {
		t.Errorf("GraphQL span events %v: want graphql.validate (its parse and validation are part of it)", opSpan.Events)
	}
	t.Logf("trace %s: HTTP span, GraphQL span, %d Redis and %d SQL spans beneath it", traceID, redisSpans, sqlSpans)

	// Not recorded: no traceparent (the ratio is 0), or a caller that did not sample.
	for _, header := range [][]string{
		{"X-Request-Id", "untraced"},
		{"traceparent", "00-" + randomHex(16) + "-" + randomHex(8) + "-00"},
	} {
		if a := p.post(read, header...); a.status != http.StatusOK {
			t.Fatalf("untraced read: %v", a)
		}
	}
	marker := randomHex(16)
	if a := p.post(read, "traceparent", "00-"+marker+"-"+randomHex(8)+"-01"); a.status != http.StatusOK {
		t.Fatalf("marker read: %v", a)
	}
	spans := sink.WaitFor(t, 15*time.Second, func(spans []testenv.Span) bool {
		for _, s := range spans {
			if s.TraceID == marker && s.Kind == "SPAN_KIND_SERVER" {
				return true
			}
		}
		return false
	})
	for _, s := range spans {
		if s.TraceID != traceID && s.TraceID != marker {
			t.Errorf("span of an unsampled request recorded: %+v", s)
		}
	}

	// The access log line of the traced request names its request id and trace id.
	var found bool
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			t.Fatalf("a log line is not JSON: %s", sc.Text())
		}
		if line["msg"] == "request" && line["request_id"] == "traced-"+traceID {
			found = true
			if line["trace_id"] != traceID || line["route"] != "/query" || line["operation"] != "query ShopPage" || line["status"] != float64(200) {
				t.Errorf("access log line %v: want trace_id %s, route /query, operation query ShopPage, status 200", line, traceID)
			}
		}
	}
	if !found {
		t.Errorf("no access log line with request_id traced-%s in:\n%s", traceID, tail(p.stderr.String(), 4<<10))
	}
}
