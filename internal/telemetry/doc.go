// Package telemetry holds what the server tells its operators besides its answers: the log
// handler (text or JSON, each line carrying the request id and trace id of its request), the
// request record the HTTP middleware shares with the layers below it, OpenTelemetry tracing
// exported over OTLP/HTTP (with spans for Redis commands and SQL statements made on behalf of
// a traced request), and the connection pool statistics of the Redis clients.
//
// Tracing is off unless an OTLP endpoint is configured; then nothing here is installed at
// all, so the server pays for none of it.
package telemetry
