package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// httpMetrics count requests by route, method and status, and their latency: from the first
// byte the handler sees to the last it writes, reading, parsing and validating included.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
}

// httpLatencyBuckets reach past the default request timeout (5 s).
var httpLatencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "surge_http_requests_total", Help: "HTTP requests by route (the pattern that served them, or unmatched), method and status.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "surge_http_request_duration_seconds", Help: "HTTP request latency, reading, parsing, validating and writing included (WebSocket connections excluded).",
			Buckets: httpLatencyBuckets,
		}, []string{"route", "method"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "surge_http_requests_in_flight", Help: "HTTP requests being served, open WebSocket connections included.",
		}),
	}
	reg.MustRegister(m.requests, m.duration, m.inFlight)
	return m
}

func (m *httpMetrics) observe(route, method string, status int, took time.Duration) {
	method = methodLabel(method)
	m.requests.WithLabelValues(route, method, statusLabel(status)).Inc()
	if status != http.StatusSwitchingProtocols { // a WebSocket's time is its connection's life
		m.duration.WithLabelValues(route, method).Observe(took.Seconds())
	}
}

// statusLabels are the status codes as label values, made once rather than per request.
var statusLabels = func() (labels [600]string) {
	for code := range labels {
		labels[code] = strconv.Itoa(code)
	}
	return labels
}()

func statusLabel(code int) string {
	if code >= 0 && code < len(statusLabels) {
		return statusLabels[code]
	}
	return strconv.Itoa(code)
}

// methodLabel keeps the method label to a fixed set: a client picks the method.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodHead, http.MethodOptions:
		return method
	}
	return "other"
}
