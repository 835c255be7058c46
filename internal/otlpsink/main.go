// Command otlpsink is a minimal OpenTelemetry trace receiver for tests: a real OTLP/HTTP
// server (POST /v1/traces, protobuf or JSON bodies, gzip or not) that decodes each export
// request with the OTLP protobuf definitions (go.opentelemetry.io/proto/otlp) and prints
// every span it received as one JSON line on stdout. Its first stdout line is
//
//	otlpsink: listening on http://HOST:PORT
//
// It is a module of its own so that the root module never depends on it.
package main

import (
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sync"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// maxBody bounds one export request.
const maxBody = 32 << 20

// Span is one received span as printed.
type Span struct {
	Service    string            `json:"service"`
	TraceID    string            `json:"trace_id"`
	SpanID     string            `json:"span_id"`
	ParentID   string            `json:"parent_span_id,omitempty"`
	Name       string            `json:"name"`
	Kind       string            `json:"kind"`
	StartNanos uint64            `json:"start_unix_nano"`
	EndNanos   uint64            `json:"end_unix_nano"`
	Status     string            `json:"status,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
	Events     []string          `json:"events,omitempty"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	out := &printer{enc: json.NewEncoder(os.Stdout)}
	fmt.Printf("otlpsink: listening on http://%s\n", ln.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", out.export)
	log.Fatal(http.Serve(ln, mux))
}

type printer struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (p *printer) export(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	contentType := r.Header.Get("Content-Type")
	switch contentType {
	case "application/x-protobuf":
		err = proto.Unmarshal(body, &req)
	case "application/json":
		err = protojson.Unmarshal(body, &req)
	default:
		http.Error(w, "unsupported content type "+contentType, http.StatusUnsupportedMediaType)
		return
	}
	if err != nil {
		http.Error(w, "decoding the export request: "+err.Error(), http.StatusBadRequest)
		return
	}
	p.print(&req)
	reply, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	if contentType == "application/json" {
		reply, _ = protojson.Marshal(&collectortrace.ExportTraceServiceResponse{})
	}
	w.Header().Set("Content-Type", contentType)
	_, _ = w.Write(reply)
}

func readBody(r *http.Request) ([]byte, error) {
	var body io.Reader = http.MaxBytesReader(nil, r.Body, maxBody)
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(body)
		if err != nil {
			return nil, err
		}
		defer gz.Close()
		body = io.LimitReader(gz, maxBody)
	}
	return io.ReadAll(body)
}

func (p *printer) print(req *collectortrace.ExportTraceServiceRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := attributes(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				_ = p.enc.Encode(convert(service, s))
			}
		}
	}
}

func convert(service string, s *tracepb.Span) Span {
	out := Span{
		Service: service, TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
		Name: s.GetName(), Kind: s.GetKind().String(), StartNanos: s.GetStartTimeUnixNano(), EndNanos: s.GetEndTimeUnixNano(),
		Attributes: attributes(s.GetAttributes()),
	}
	if len(s.GetParentSpanId()) > 0 {
		out.ParentID = hex.EncodeToString(s.GetParentSpanId())
	}
	if s.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_UNSET {
		out.Status = s.GetStatus().GetCode().String()
	}
	for _, e := range s.GetEvents() {
		out.Events = append(out.Events, e.GetName())
	}
	return out
}

func attributes(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch {
		case v.GetStringValue() != "":
			m[kv.GetKey()] = v.GetStringValue()
		default:
			b, _ := protojson.Marshal(v)
			m[kv.GetKey()] = string(b)
		}
	}
	return m
}
