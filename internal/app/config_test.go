package app

import (
	"database/sql"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/internal/store"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig(nil, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Embedded() || !c.Dev() || !c.Seed || !c.Introspection || c.Addr != "127.0.0.1:8080" || c.DataDir != "./data" {
		t.Fatalf("embedded defaults: %+v", c)
	}
	if !reflect.DeepEqual(c.AdminPhones, []string{DevAdminPhone}) {
		t.Fatalf("dev admin phones = %v", c.AdminPhones)
	}
	if c.StockThrottle != 200*time.Millisecond {
		t.Fatalf("stock throttle = %v, want 200ms", c.StockThrottle)
	}
	if c.SeckillClaimIdle != 30*time.Second {
		t.Fatalf("seckill claim idle = %v, want 30s", c.SeckillClaimIdle)
	}
	if c, err := ParseConfig(nil, envOf(map[string]string{"SURGE_SECKILL_CLAIM_IDLE": "500ms"})); err != nil || c.SeckillClaimIdle != 500*time.Millisecond {
		t.Fatalf("SURGE_SECKILL_CLAIM_IDLE=500ms: %v %v", c.SeckillClaimIdle, err)
	}
	if c, err := ParseConfig(nil, envOf(map[string]string{"SURGE_SECKILL_CLAIM_IDLE": "0"})); err == nil {
		t.Fatalf("SURGE_SECKILL_CLAIM_IDLE=0 accepted: %v", c.SeckillClaimIdle)
	}
	if c, err := ParseConfig([]string{"-stock-throttle", "0"}, envOf(map[string]string{"SURGE_STOCK_THROTTLE": "1s"})); err != nil || c.StockThrottle != 0 {
		t.Fatalf("-stock-throttle 0: %v %v", c.StockThrottle, err)
	}

	c, err = ParseConfig(nil, envOf(map[string]string{"SURGE_MYSQL_DSN": "u:p@tcp(h:3306)/d", "SURGE_REDIS_ADDRS": "a:1, b:2 ,c:3"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Dev() || c.Seed || c.Introspection || len(c.AdminPhones) != 0 {
		t.Fatalf("real services must default to production without dev conveniences: %+v", c)
	}
	if !reflect.DeepEqual(c.RedisAddrs, []string{"a:1", "b:2", "c:3"}) {
		t.Fatalf("redis addrs = %v", c.RedisAddrs)
	}
}

// The protections of issue 12 have safe defaults, and production's send limits are on.
func TestParseConfigProtectionDefaults(t *testing.T) {
	prod := envOf(map[string]string{"SURGE_MYSQL_DSN": "u:p@tcp(h:3306)/d", "SURGE_REDIS_ADDRS": "a:1"})
	c, err := ParseConfig(nil, prod)
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxTokens != 2000 || c.MaxNesting != 32 || c.MaxFields != 500 || c.RequestTimeout != 5*time.Second || c.ReadTimeout != 10*time.Second {
		t.Fatalf("limits: %+v", c)
	}
	if c.SessionCache != time.Second || c.SessionSlide != time.Minute || c.SessionMaxAge != 24*time.Hour {
		t.Fatalf("session cache %v, slide %v, max age %v", c.SessionCache, c.SessionSlide, c.SessionMaxAge)
	}
	if _, err := ParseConfig([]string{"-session-cache", "-1s"}, prod); err == nil {
		t.Fatal("a negative session-cache was accepted")
	}
	if c.LoginSendRateIP != (auth.Rate{Count: 20, Window: time.Hour}) || c.LoginSendRateGlobal != (auth.Rate{Count: 1000, Window: time.Minute}) || c.TrustedProxyHeader != "" {
		t.Fatalf("production send limits: %+v %+v %q", c.LoginSendRateIP, c.LoginSendRateGlobal, c.TrustedProxyHeader)
	}
	if c.LoginSendRateNew != (auth.Rate{Count: 200, Window: time.Minute}) {
		t.Fatalf("production send limit for new phones: %+v", c.LoginSendRateNew)
	}
	if c, _ := ParseConfig(nil, envOf(nil)); !c.LoginSendRateIP.Off() || !c.LoginSendRateGlobal.Off() || !c.LoginSendRateNew.Off() {
		t.Fatalf("dev mode send limits: %+v %+v %+v", c.LoginSendRateIP, c.LoginSendRateGlobal, c.LoginSendRateNew)
	}
	c, err = ParseConfig([]string{"-login-send-rate-ip", "5/30s", "-login-send-rate-global", "off", "-trusted-proxy-header", "X-Real-IP"}, prod)
	if err != nil || c.LoginSendRateIP != (auth.Rate{Count: 5, Window: 30 * time.Second}) || !c.LoginSendRateGlobal.Off() || c.TrustedProxyHeader != "X-Real-IP" {
		t.Fatalf("explicit send limits: %+v %+v %q %v", c.LoginSendRateIP, c.LoginSendRateGlobal, c.TrustedProxyHeader, err)
	}
}

func TestParseConfigFlagsWinOverEnv(t *testing.T) {
	c, err := ParseConfig([]string{"-addr", "127.0.0.1:9", "-mode", "dev", "-seed=false"},
		envOf(map[string]string{"SURGE_ADDR": ":1", "SURGE_MODE": "production", "SURGE_MYSQL_DSN": "x:y@/z"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:9" || !c.Dev() || c.Seed {
		t.Fatalf("flags did not win: %+v", c)
	}
}

func TestParseConfigRejectsBadValues(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
	}{
		"bad mode":      {env: map[string]string{"SURGE_MODE": "staging"}},
		"bad bool":      {env: map[string]string{"SURGE_SEED": "maybe"}},
		"zero depth":    {args: []string{"-max-depth", "0"}},
		"stray arg":     {args: []string{"extra"}},
		"unknown flag":  {args: []string{"-nope"}},
		"bad introspec": {args: []string{"-introspection", "2"}},
		"neg throttle":  {env: map[string]string{"SURGE_STOCK_THROTTLE": "-1s"}},
		"zero tokens":   {env: map[string]string{"SURGE_MAX_TOKENS": "0"}},
		"no timeout":    {args: []string{"-request-timeout", "0s"}},
		"rate no slash": {env: map[string]string{"SURGE_LOGIN_SEND_RATE_IP": "20"}},
		"rate zero":     {env: map[string]string{"SURGE_LOGIN_SEND_RATE_GLOBAL": "0/1m"}},
		"rate window":   {env: map[string]string{"SURGE_LOGIN_SEND_RATE_IP": "5/soon"}},
		"new rate":      {env: map[string]string{"SURGE_LOGIN_SEND_RATE_NEW": "5"}},
		"no max age":    {args: []string{"-session-max-age", "0s"}},
	} {
		if _, err := ParseConfig(tc.args, envOf(tc.env)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseConfigPools(t *testing.T) {
	c, err := ParseConfig(nil, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.MySQLMaxConns != store.DefaultMaxConns || c.RedisPoolSize != 0 {
		t.Fatalf("pool defaults: mysql %d, redis %d", c.MySQLMaxConns, c.RedisPoolSize)
	}
	gc := c
	c, err = ParseConfig([]string{"-redis-pool-size", "50"}, envOf(map[string]string{"SURGE_MYSQL_MAX_CONNS": "12", "SURGE_REDIS_POOL_SIZE": "7"}))
	if err != nil || c.MySQLMaxConns != 12 || c.RedisPoolSize != 50 {
		t.Fatalf("pools from env and flags: mysql %d, redis %d, %v", c.MySQLMaxConns, c.RedisPoolSize, err)
	}
	if gc.GCMinHeapMB != 128 {
		t.Fatalf("gc floor default %d MiB", gc.GCMinHeapMB)
	}
	if c, err = ParseConfig(nil, envOf(map[string]string{"SURGE_GC_MIN_HEAP_MB": "0"})); err != nil || c.GCMinHeapMB != 0 {
		t.Fatalf("gc floor off: %d, %v", c.GCMinHeapMB, err)
	}
	for _, bad := range []map[string]string{{"SURGE_MYSQL_MAX_CONNS": "0"}, {"SURGE_REDIS_POOL_SIZE": "-1"}, {"SURGE_GC_MIN_HEAP_MB": "-1"}, {"SURGE_GC_MIN_HEAP_MB": "64MiB"}} {
		if _, err := ParseConfig(nil, envOf(bad)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// One namespace starts every key (issue 12, item 1): "surge" by default, validated, and the
// old per-part prefixes still separate deployments (as the namespace), with a warning.
func TestParseConfigNamespace(t *testing.T) {
	c, err := ParseConfig(nil, envOf(nil))
	if err != nil || c.Namespace != "surge" || len(c.Warnings) != 0 {
		t.Fatalf("default namespace %q, warnings %v, %v", c.Namespace, c.Warnings, err)
	}
	c, err = ParseConfig([]string{"-namespace", "prod-eu"}, envOf(map[string]string{"SURGE_NAMESPACE": "x"}))
	if err != nil || c.Namespace != "prod-eu" {
		t.Fatalf("-namespace: %q %v", c.Namespace, err)
	}
	if c.SeckillKeyPrefix() != "prod-eu:seckill" {
		t.Fatalf("seckill key prefix %q", c.SeckillKeyPrefix())
	}
	for _, bad := range []string{"a{b", "b}", "a b", ":a", "a:", "tab\tx", strings.Repeat("n", 65)} {
		if _, err := ParseConfig(nil, envOf(map[string]string{"SURGE_NAMESPACE": bad})); err == nil {
			t.Errorf("namespace %q accepted", bad)
		}
	}
	if _, err := ParseConfig([]string{"-namespace", "a:b.c-d_e"}, envOf(nil)); err != nil {
		t.Errorf("inner colons refused: %v", err)
	}
	for name, tc := range map[string]struct {
		env  map[string]string
		want string
	}{
		"seckill prefix":    {map[string]string{"SURGE_SECKILL_PREFIX": "blue"}, "blue"},
		"cache prefix":      {map[string]string{"SURGE_CACHE_PREFIX": "green"}, "green"},
		"both":              {map[string]string{"SURGE_SECKILL_PREFIX": "blue", "SURGE_CACHE_PREFIX": "green"}, "blue"},
		"namespace as well": {map[string]string{"SURGE_SECKILL_PREFIX": "blue", "SURGE_NAMESPACE": "red"}, "red"},
	} {
		c, err := ParseConfig(nil, envOf(tc.env))
		if err != nil || c.Namespace != tc.want || len(c.Warnings) == 0 {
			t.Errorf("%s: namespace %q, warnings %v, %v; want %q and a deprecation warning", name, c.Namespace, c.Warnings, err, tc.want)
		}
	}
	if _, err := ParseConfig(nil, envOf(map[string]string{"SURGE_SECKILL_PREFIX": "a b"})); err == nil {
		t.Error("an invalid old prefix accepted as the namespace")
	}
}

// Issue 13, item 1: allowed origins. Dev lets a local front-end dev server in; production
// none; "*" never with credentials; an origin must be scheme://host[:port].
func TestParseConfigCORS(t *testing.T) {
	prod := map[string]string{"SURGE_MYSQL_DSN": "u:p@tcp(h:3306)/d", "SURGE_REDIS_ADDRS": "a:1"}
	with := func(extra map[string]string) (Config, error) {
		m := map[string]string{}
		for k, v := range prod {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return ParseConfig(nil, envOf(m))
	}
	if c, err := ParseConfig(nil, envOf(nil)); err != nil || !reflect.DeepEqual(c.CORSOrigins, devCORSOrigins) || c.CORSCredentials {
		t.Fatalf("dev CORS defaults: %v %v %v", c.CORSOrigins, c.CORSCredentials, err)
	}
	c, err := with(nil)
	if err != nil || len(c.CORSOrigins) != 0 || c.CORSMaxAge != 10*time.Minute {
		t.Fatalf("production CORS defaults: %v %v %v", c.CORSOrigins, c.CORSMaxAge, err)
	}
	c, err = with(map[string]string{"SURGE_CORS_ORIGINS": "https://app.example.com, https://*.example.com,http://localhost:*", "SURGE_CORS_CREDENTIALS": "true"})
	if err != nil || len(c.CORSOrigins) != 3 || !c.CORSCredentials {
		t.Fatalf("a list with credentials: %v %v %v", c.CORSOrigins, c.CORSCredentials, err)
	}
	if _, err := with(map[string]string{"SURGE_CORS_ORIGINS": "*"}); err != nil {
		t.Fatalf("* without credentials: %v", err)
	}
	for _, bad := range []map[string]string{
		{"SURGE_CORS_ORIGINS": "*", "SURGE_CORS_CREDENTIALS": "true"},
		{"SURGE_CORS_ORIGINS": "app.example.com"},
		{"SURGE_CORS_ORIGINS": "https://app.example.com/"},
		{"SURGE_CORS_ORIGINS": "ftp://app.example.com"},
		{"SURGE_CORS_ORIGINS": "https://[app.example.com"},
		{"SURGE_CORS_CREDENTIALS": "maybe"},
		{"SURGE_CORS_MAX_AGE": "-1s"},
	} {
		if c, err := with(bad); err == nil {
			t.Errorf("%v accepted: %v", bad, c.CORSOrigins)
		}
	}
}

// Issue 23, item 7: a glob that matches any site is "*" in disguise, so with credentials it is
// refused at start as "*" is; globs within one domain, and literal hosts, stay allowed.
func TestParseConfigCORSGlobsWithCredentials(t *testing.T) {
	prod := map[string]string{"SURGE_MYSQL_DSN": "u:p@tcp(h:3306)/d", "SURGE_REDIS_ADDRS": "a:1", "SURGE_CORS_CREDENTIALS": "true"}
	parse := func(origins string) error {
		env := map[string]string{"SURGE_CORS_ORIGINS": origins}
		for k, v := range prod {
			env[k] = v
		}
		_, err := ParseConfig(nil, envOf(env))
		return err
	}
	for _, bad := range []string{
		"https://*,http://*", "https://*", "http://*:*", "https://*.com", "https://*example.com",
		"https://app.example.com,https://*", "https://*.*", "https://x*.com", "https://*.example.com.*",
	} {
		err := parse(bad)
		if err == nil || !strings.Contains(err.Error(), "credentials") {
			t.Errorf("SURGE_CORS_ORIGINS=%s with credentials: %v, want a refusal naming credentials", bad, err)
		}
		if err := parse(bad); err != nil && strings.Contains(bad, ",") && !strings.Contains(err.Error(), "*") {
			t.Errorf("%s: the error does not name the pattern: %v", bad, err)
		}
	}
	for _, ok := range []string{
		"https://app.example.com", "https://*.example.com", "https://pr-*.preview.example.com", "http://localhost:*",
		"http://127.0.0.1:*", "https://*.example.co.uk:8443",
	} {
		if err := parse(ok); err != nil {
			t.Errorf("SURGE_CORS_ORIGINS=%s with credentials: %v", ok, err)
		}
	}
	// Issue 33, item 3: a glob over a public suffix matches any site registered under it.
	for _, bad := range []string{"https://*.co.uk", "https://*.com.cn", "https://*.github.io", "https://pr-*.vercel.app", "https://*.CO.UK"} {
		err := parse(bad)
		if err == nil || !strings.Contains(err.Error(), "public suffix") || !strings.Contains(err.Error(), bad) {
			t.Errorf("SURGE_CORS_ORIGINS=%s with credentials: %v, want a refusal naming the pattern and the public suffix", bad, err)
		}
	}
	for _, ok := range []string{"https://*.example.co.uk", "https://*.surgekit.github.io", "https://*.shop.com.cn"} {
		if err := parse(ok); err != nil {
			t.Errorf("SURGE_CORS_ORIGINS=%s with credentials: %v", ok, err)
		}
	}
	// Without credentials a broad glob is what it says: any origin, no cookies.
	delete(prod, "SURGE_CORS_CREDENTIALS")
	if err := parse("https://*,http://*"); err != nil {
		t.Errorf("broad globs without credentials: %v", err)
	}
}

// Issue 23, item 7: dev mode hands out login codes, so it listens on loopback and answers only
// for loopback host names unless told otherwise; production listens everywhere and answers any
// host unless SURGE_ALLOWED_HOSTS lists them.
func TestParseConfigListenAndAllowedHosts(t *testing.T) {
	prod := map[string]string{"SURGE_MYSQL_DSN": "u:p@tcp(h:3306)/d", "SURGE_REDIS_ADDRS": "a:1"}
	c, err := ParseConfig(nil, envOf(nil))
	if err != nil || c.Addr != "127.0.0.1:8080" || !reflect.DeepEqual(c.AllowedHosts, []string{"localhost", "127.0.0.1", "[::1]"}) || len(c.Warnings) != 0 {
		t.Fatalf("dev: addr %q, allowed hosts %v, warnings %v, %v", c.Addr, c.AllowedHosts, c.Warnings, err)
	}
	c, err = ParseConfig(nil, envOf(prod))
	if err != nil || c.Addr != ":8080" || len(c.AllowedHosts) != 0 {
		t.Fatalf("production: addr %q, allowed hosts %v, %v", c.Addr, c.AllowedHosts, err)
	}
	// Dev told to listen everywhere: it does, keeps checking the Host, and warns.
	c, err = ParseConfig([]string{"-addr", ":9090"}, envOf(nil))
	if err != nil || c.Addr != ":9090" || len(c.AllowedHosts) != 3 || len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "SURGE_ALLOWED_HOSTS") {
		t.Fatalf("dev on :9090: addr %q, allowed hosts %v, warnings %v, %v", c.Addr, c.AllowedHosts, c.Warnings, err)
	}
	c, err = ParseConfig(nil, envOf(map[string]string{"SURGE_ADDR": "0.0.0.0:8080", "SURGE_ALLOWED_HOSTS": "dev.lan, *.dev.lan,[::1]"}))
	if err != nil || !reflect.DeepEqual(c.AllowedHosts, []string{"dev.lan", "*.dev.lan", "[::1]"}) || len(c.Warnings) != 0 {
		t.Fatalf("dev with its hosts: %v, warnings %v, %v", c.AllowedHosts, c.Warnings, err)
	}
	prod["SURGE_ALLOWED_HOSTS"] = "api.example.com,*.api.example.com"
	if c, err := ParseConfig(nil, envOf(prod)); err != nil || len(c.AllowedHosts) != 2 {
		t.Fatalf("production hosts: %v, %v", c.AllowedHosts, err)
	}
	for _, bad := range []string{"https://api.example.com", "api.example.com:443", "api.example.com/x", "[a-", "user@host", "1::2::3"} {
		prod["SURGE_ALLOWED_HOSTS"] = bad
		if _, err := ParseConfig(nil, envOf(prod)); err == nil || !strings.Contains(err.Error(), "SURGE_ALLOWED_HOSTS") {
			t.Errorf("SURGE_ALLOWED_HOSTS=%s: %v, want an error naming the variable", bad, err)
		}
	}
}

// Issue 13, items 2 and 3: APQ on by default (24 h, 32 KiB), no trusted documents, batches off.
func TestParseConfigPersistedAndBatches(t *testing.T) {
	c, err := ParseConfig(nil, envOf(nil))
	if err != nil || !c.APQ || c.APQTTL != 24*time.Hour || c.APQMaxBytes != 32<<10 || c.TrustedDocuments != "" || c.BatchMax != 0 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	c, err = ParseConfig([]string{"-apq=false", "-batch-max", "5", "-trusted-documents", "m.json"}, envOf(map[string]string{"SURGE_APQ_TTL": "1h"}))
	if err != nil || c.APQ || c.APQTTL != time.Hour || c.BatchMax != 5 || c.TrustedDocuments != "m.json" {
		t.Fatalf("set: %+v %v", c, err)
	}
	for _, bad := range []map[string]string{{"SURGE_BATCH_MAX": "-1"}, {"SURGE_APQ_TTL": "0s"}, {"SURGE_APQ_MAX_BYTES": "-5"}, {"SURGE_APQ": "sometimes"}} {
		if _, err := ParseConfig(nil, envOf(bad)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestParseConfigBadVariablesAreFatal: a SURGE_* value that does not parse stops the server
// with a message naming the variable and the value; it used to fall back to the default
// silently (SURGE_SECKILL_CLAIM_IDLE=30 ran with 30s, SURGE_MAX_DEPTH=ten with 10).
func TestParseConfigBadVariablesAreFatal(t *testing.T) {
	_, err := ParseConfig(nil, envOf(map[string]string{"SURGE_SECKILL_CLAIM_IDLE": "30"}))
	if want := `SURGE_SECKILL_CLAIM_IDLE: "30" is not a duration (e.g. 30s)`; err == nil || err.Error() != want {
		t.Fatalf("SURGE_SECKILL_CLAIM_IDLE=30: %v, want %s", err, want)
	}
	for k, v := range map[string]string{
		"SURGE_MYSQL_MAX_CONNS":           "many",
		"SURGE_REDIS_POOL_SIZE":           "1.5",
		"SURGE_MAX_COMPLEXITY":            "3k",
		"SURGE_MAX_DEPTH":                 "ten",
		"SURGE_MAX_TOKENS":                "2e3",
		"SURGE_MAX_NESTING":               "x",
		"SURGE_MAX_FIELDS":                "x",
		"SURGE_REQUEST_TIMEOUT":           "5",
		"SURGE_READ_TIMEOUT":              "10",
		"SURGE_WS_MAX_SUBSCRIPTIONS":      "x",
		"SURGE_WS_MAX_CONNECTIONS_PER_IP": "x",
		"SURGE_CORS_MAX_AGE":              "600",
		"SURGE_APQ_TTL":                   "1d",
		"SURGE_APQ_MAX_BYTES":             "32KiB",
		"SURGE_BATCH_MAX":                 "x",
		"SURGE_SECKILL_RATE":              "fast",
		"SURGE_STOCK_THROTTLE":            "200",
		"SURGE_TRACE_SAMPLE_RATIO":        "half",
		"SURGE_SEED":                      "yes please",
		"SURGE_SECKILL_CONSUMER":          "on",
		"SURGE_CORS_CREDENTIALS":          "y",
		"SURGE_APQ":                       "enabled",
		"SURGE_ACCESS_LOG":                "verbose",
		"SURGE_INTROSPECTION":             "2",
		"SURGE_LOGIN_SEND_RATE_IP":        "20 per hour",
		"SURGE_REDIS_ADDRS":               "redis-2",
		"SURGE_ADDR":                      "8080",
		"SURGE_ADMIN_ADDR":                "localhost",
		"SURGE_ADMIN_PHONES":              "1380000000O",
	} {
		_, err := ParseConfig(nil, envOf(map[string]string{k: v}))
		if err == nil || !strings.Contains(err.Error(), k) || !strings.Contains(err.Error(), v) {
			t.Errorf("%s=%s: %v, want an error naming both", k, v, err)
		}
	}
}

// Replica-acknowledged admission is off by default; on, it is passed to the seckill service;
// values that could never be acknowledged, or that would outlast the Redis client's read, are
// refused at start.
func TestParseConfigReplicaAcks(t *testing.T) {
	prod := map[string]string{"SURGE_MYSQL_DSN": "u:p@tcp(h:3306)/d", "SURGE_REDIS_ADDRS": "a:1"}
	with := func(kv ...string) func(string) string {
		m := map[string]string{}
		for k, v := range prod {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return envOf(m)
	}
	c, err := ParseConfig(nil, with())
	if err != nil || c.SeckillReplicaAcks != 0 || c.SeckillReplicaAckTimeout != 500*time.Millisecond {
		t.Fatalf("defaults: %d acks, timeout %v, %v", c.SeckillReplicaAcks, c.SeckillReplicaAckTimeout, err)
	}
	c, err = ParseConfig([]string{"-seckill-replica-ack-timeout", "250ms"}, with("SURGE_SECKILL_REPLICA_ACKS", "1"))
	if err != nil || c.SeckillReplicaAcks != 1 || c.SeckillReplicaAckTimeout != 250*time.Millisecond {
		t.Fatalf("on: %d acks, timeout %v, %v", c.SeckillReplicaAcks, c.SeckillReplicaAckTimeout, err)
	}
	sqlDB, err := sql.Open("mysql", "u:p@tcp(127.0.0.1:1)/d") // never connects
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	a := &App{Config: c, DB: &store.DB{Dialect: "mysql", SQL: sqlDB}}
	if o := a.SeckillOptions(); o.ReplicaAcks != 1 || o.ReplicaAckTimeout != 250*time.Millisecond {
		t.Fatalf("seckill options: %d acks, timeout %v", o.ReplicaAcks, o.ReplicaAckTimeout)
	}
	for name, tc := range map[string]struct {
		args []string
		env  func(string) string
		want string
	}{
		"negative":     {env: with("SURGE_SECKILL_REPLICA_ACKS", "-1"), want: "negative"},
		"embedded":     {env: envOf(map[string]string{"SURGE_SECKILL_REPLICA_ACKS": "1"}), want: "embedded"},
		"sync":         {env: with("SURGE_SECKILL_REPLICA_ACKS", "1", "SURGE_SECKILL_STRATEGY", "sync"), want: "lua"},
		"zero timeout": {args: []string{"-seckill-replica-ack-timeout", "0s"}, env: with("SURGE_SECKILL_REPLICA_ACKS", "1"), want: "SURGE_SECKILL_REPLICA_ACK_TIMEOUT"},
		"past read":    {env: with("SURGE_SECKILL_REPLICA_ACKS", "1", "SURGE_SECKILL_REPLICA_ACK_TIMEOUT", "800ms"), want: "read timeout"},
	} {
		if _, err := ParseConfig(tc.args, tc.env); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}

// A master watched by Sentinel is given by its Sentinels and name; half a
// Sentinel configuration, or one with Redis addresses too, is refused with the settings named.
func TestParseConfigSentinel(t *testing.T) {
	c, err := ParseConfig(nil, envOf(map[string]string{"SURGE_MYSQL_DSN": "u:p@tcp(h:3306)/d",
		"SURGE_REDIS_SENTINELS": "s1:26379, s2:26379", "SURGE_REDIS_MASTER": " mymaster ", "SURGE_REDIS_SENTINEL_PASSWORD": "pw"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Embedded() || c.Dev() || !c.RealRedis() || !reflect.DeepEqual(c.RedisSentinels, []string{"s1:26379", "s2:26379"}) ||
		c.RedisMaster != "mymaster" || c.RedisSentinelPassword != "pw" || len(c.RedisAddrs) != 0 {
		t.Fatalf("sentinel config: %+v", c)
	}
	if got := c.RedisTarget(); got != "master mymaster of Sentinels s1:26379,s2:26379" {
		t.Errorf("RedisTarget = %q", got)
	}
	c, err = ParseConfig([]string{"-redis-sentinels", "s1:1", "-redis-master", "m"}, envOf(nil))
	if err != nil || c.RedisMaster != "m" || c.Embedded() {
		t.Fatalf("flags: %+v %v", c, err)
	}
	for _, bad := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"SURGE_REDIS_SENTINELS": "s1:1"}, "-redis-master (SURGE_REDIS_MASTER)"},
		{map[string]string{"SURGE_REDIS_MASTER": "m"}, "-redis-sentinels (SURGE_REDIS_SENTINELS)"},
		{map[string]string{"SURGE_REDIS_SENTINELS": "s1:1", "SURGE_REDIS_MASTER": "m", "SURGE_REDIS_ADDRS": "a:1"}, "both set"},
		{map[string]string{"SURGE_REDIS_SENTINELS": "s1", "SURGE_REDIS_MASTER": "m"}, "not a host:port"},
	} {
		if _, err := ParseConfig(nil, envOf(bad.env)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: err = %v, want one saying %q", bad.env, err, bad.want)
		}
	}
}
