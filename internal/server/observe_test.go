package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkObserve is what the observation middleware costs a request with tracing off:
// bare (the route table alone), with metrics and a request id, and with the access log too
// (text and JSON, written to io.Discard).
func BenchmarkObserve(b *testing.B) {
	answer := []byte(`{"data":{"seckillVoucher":{"orderId":"81604378625","status":"QUEUED"}}}`)
	routes := http.NewServeMux()
	routes.Handle("/query", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	cases := map[string]http.Handler{"bare": routes}
	for name, log := range map[string]*slog.Logger{
		"metrics":        nil,
		"accesslog-text": slog.New(slog.NewTextHandler(io.Discard, nil)),
		"accesslog-json": slog.New(slog.NewJSONHandler(io.Discard, nil)),
	} {
		opts := Options{Registry: prometheus.NewRegistry(), Logger: log, Observability: Observability{AccessLog: log != nil}}
		opts.setDefaults()
		cases[name] = newObserver(&opts).wrap(routes)
	}
	for _, name := range []string{"bare", "metrics", "accesslog-text", "accesslog-json"} {
		h := cases[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(100) // as many requests at once as BenchmarkSeckillOverHTTP
			cpu := processCPU()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := httptest.NewRequest(http.MethodPost, "/query", strings.NewReader(`{}`))
					r.RemoteAddr = "10.0.0.1:50000"
					h.ServeHTTP(httptest.NewRecorder(), r)
				}
			})
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the CPU time this process has used, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
