// Command surge runs the flash-sale GraphQL server and its tools.
//
//	surge [serve] [flags]   run the server (the default subcommand)
//	surge reconcile [-fix] [-voucher id,...] [-json]
//	                        compare the seckill state in Redis with MySQL, and repair it
//	surge bench <scenario>  measure the cache, ids, locks and the flash sale (internal/bench)
//	surge schema            print the GraphQL schema (SDL), for client code generators
//
// With no configuration it runs on the embedded default: in-process Redis and a SQLite file
// in ./data, demo data seeded, dev mode. See docs/configuration.md for every variable and flag.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	gql "github.com/surgekit/surge/graph"
	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/internal/bench"
	"github.com/surgekit/surge/internal/telemetry"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	slog.SetDefault(log)
	args := os.Args[1:]
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		usage()
		return
	}
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = serve(args, log)
	case "reconcile":
		os.Exit(reconcile(args, os.Stdout, os.Stderr, log))
	case "bench":
		err = bench.Command(args)
	case "schema":
		err = printSchema(args, os.Stdout)
	case "help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "surge: unknown command %q\n\n", cmd)
		usage()
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		log.Error("surge failed", "err", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: surge [serve] [flags]
       surge reconcile [-fix] [-voucher id,...] [-json] [flags]
       surge bench <scenario> [flags]
       surge schema

  serve      run the GraphQL server (default); "surge serve -h" lists the flags
  reconcile  compare each seckill voucher's state in Redis with MySQL; -fix rebuilds the
             vouchers that disagree. Exit 0 all OK or fixed, 1 problems left, 2 usage or
             connection error. Needs SURGE_REDIS_ADDRS and SURGE_MYSQL_DSN; "surge reconcile -h"
  bench      measure the cache, ids and locks on a real Redis, load-test the flash sale
             (seckill, drain, http): "surge bench" lists the scenarios
  schema     print the GraphQL schema (SDL) the server serves, for client code generators
             (introspection is off in production)`)
}

// printSchema writes the served schema's SDL: what a dev server's introspection returns.
func printSchema(args []string, w io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("schema takes no arguments (redirect its output to a file)")
	}
	_, err := io.WriteString(w, gql.SDL())
	return err
}

// How the server's log is batched: a line waits at most logBatchInterval, and logBatchLimit
// bytes waiting are written at once.
const (
	logBatchInterval = 20 * time.Millisecond
	logBatchLimit    = 64 << 10
)

func serve(args []string, log *slog.Logger) error {
	start := time.Now()
	cfg, err := app.ParseConfig(args, nil)
	if err != nil {
		return err
	}
	// The log's lines go out in batches (the access log writes one per request): at most
	// logBatchInterval late, warnings and errors at once, everything before serve returns.
	logOut := telemetry.NewBatchWriter(os.Stderr, logBatchInterval, logBatchLimit)
	defer logOut.Close()
	log = cfg.Logger(logOut)
	slog.SetDefault(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	defer app.TuneGC(cfg, log)()

	a, err := app.New(ctx, cfg, app.Options{Logger: log})
	if err != nil {
		return err
	}
	defer a.Close()

	servers, err := listen(a, cfg)
	if err != nil {
		return err
	}
	errc := make(chan error, len(servers))
	for _, s := range servers {
		go func() { errc <- s.srv.Serve(s.ln) }()
	}

	store := "MySQL"
	if cfg.MySQLDSN == "" {
		store = "SQLite " + cfg.DataDir
	}
	redisDesc := "embedded Redis"
	if cfg.RealRedis() {
		redisDesc = "Redis " + cfg.RedisTarget()
	}
	ready := []any{"mode", cfg.Mode, "redis", redisDesc, "database", store, "seeded", a.Seeded,
		"startup", time.Since(start).Round(time.Millisecond), "addr", servers[0].ln.Addr().String(), "tracing", cfg.OTLPEndpoint != ""}
	if len(servers) > 1 {
		ready = append(ready, "admin_addr", servers[1].ln.Addr().String())
	}
	log.Info("surge ready", ready...)
	if cfg.Dev() {
		log.Info("dev mode: login codes are returned as devCode", "admin_phones", strings.Join(cfg.AdminPhones, ","))
	}
	fmt.Printf("surge: API at %s\n", baseURL(servers[0].ln.Addr()))
	fmt.Printf("surge: playground at %s\n", baseURL(servers[len(servers)-1].ln.Addr()))

	// A server whose namespace another deployment took over has stopped serving (the App
	// logged why); it drains and exits with an error, and a restart refuses to start until
	// its configuration is fixed.
	var halted error
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	case <-a.NamespaceLost():
		halted = a.NamespaceErr()
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	errs := []error{halted}
	for _, s := range servers {
		errs = append(errs, s.srv.Shutdown(sctx))
	}
	return errors.Join(errs...)
}

// listener is one HTTP server and the socket it serves.
type listener struct {
	srv *http.Server
	ln  net.Listener
}

// listen opens the main listener and, with Config.AdminAddr, the admin one (last).
func listen(a *app.App, cfg app.Config) ([]listener, error) {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.Addr, err)
	}
	servers := []listener{{httpServer(a.Handler, cfg), ln}}
	if a.AdminHandler != nil {
		adminLn, err := net.Listen("tcp", cfg.AdminAddr)
		if err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("listening on %s (admin): %w", cfg.AdminAddr, err)
		}
		servers = append(servers, listener{httpServer(a.AdminHandler, cfg), adminLn})
	}
	return servers, nil
}

// Connection limits of the HTTP server, beside the configured read and request timeouts.
const (
	idleTimeout    = 2 * time.Minute // a keep-alive connection with no request is closed then
	writeGrace     = 5 * time.Second // beyond reading and handling, to write the answer
	maxHeaderBytes = 128 << 10       // request line and headers: a GET carries its document there
)

// httpServer bounds every phase of a request: the client has cfg.ReadTimeout to send it (half
// of it for the headers), the handler cfg.RequestTimeout to answer, and the answer writeGrace
// more to go out. A WebSocket connection is exempt once upgraded (net/http clears the
// deadlines of a hijacked connection).
func httpServer(h http.Handler, cfg app.Config) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadTimeout / 2,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.ReadTimeout + cfg.RequestTimeout + writeGrace,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

func baseURL(addr net.Addr) string {
	host, port, _ := net.SplitHostPort(addr.String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}
