package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/store"
	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// runReconcile runs the built binary's reconcile subcommand with env (plus PATH and HOME) and
// returns its exit code, stdout and stderr.
func runReconcile(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(surgeBinary(t), append([]string{"reconcile"}, args...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running surge reconcile: %v", err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// The reconcile subcommand through the real binary, on real Redis (single node and Cluster)
// and MariaDB: exit 0 when Redis agrees with the database, 1 when it does not, -fix repairs,
// 2 for usage and connection errors.
func TestReconcileSubcommand(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		dsn := testenv.MySQL(t)
		db, err := store.OpenMySQL(dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		if err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		typ := db.Ent.ShopType.Create().SetName("t").SetSort(1).SaveX(ctx)
		shop := db.Ent.Shop.Create().SetName("s").SetTypeID(typ.ID).SetLongitude(0).SetLatitude(0).SetImages([]string{}).SaveX(ctx)
		v := db.Ent.Voucher.Create().SetShopID(shop.ID).SetTitle("v").SetPayValue(1).SetActualValue(2).
			SetKind("SECKILL").SetStock(10).SetBeginAt(time.Now().Add(-time.Hour)).SetEndAt(time.Now().Add(time.Hour)).
			SaveX(ctx).ID
		var users []int
		for i := range 3 {
			users = append(users, db.Ent.User.Create().SetPhone(testenv.Phone()[:10]+strconv.Itoa(i)).SetNickname("u").SaveX(ctx).ID)
		}
		ns := "reconcile-cli" + testenv.Phone()
		testenv.CleanupKeys(t, rdb, ns+":*")
		svc, err := seckill.New(db.Ent, rdb, seckill.Options{
			Namespace: ns, Dialect: db.Dialect, RateLimit: seckill.RateLimit{PerSecond: -1},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = svc.Close() })
		if err := svc.Warm(ctx, v); err != nil {
			t.Fatal(err)
		}
		// Two orders admitted, not persisted (no consumer runs): not a problem.
		for _, u := range users[:2] {
			if _, err := svc.Grab(ctx, u, v); err != nil {
				t.Fatal(err)
			}
		}
		addrs := testenv.RedisAddr()
		if _, ok := rdb.(*redis.ClusterClient); ok {
			addrs = strings.Join(testenv.ClusterAddrs(), ",")
		}
		env := []string{"SURGE_REDIS_ADDRS=" + addrs, "SURGE_MYSQL_DSN=" + dsn, "SURGE_NAMESPACE=" + ns}
		vid := strconv.Itoa(v)

		// Agreement: the default selection (a fresh database) and -json.
		code, out, errOut := runReconcile(t, env)
		if code != 0 || !strings.Contains(out, vid) || !strings.Contains(out, "OK") {
			t.Fatalf("clean: exit %d\n%s%s", code, out, errOut)
		}
		t.Logf("clean:\n%s", out)
		code, out, errOut = runReconcile(t, env, "-json", "-voucher", vid)
		var doc struct {
			OK       bool `json:"ok"`
			Vouchers []struct {
				VoucherID  int      `json:"voucher_id"`
				Result     string   `json:"result"`
				RedisStock *int64   `json:"redis_stock"`
				Queued     int64    `json:"queued"`
				Problems   []string `json:"problems"`
			} `json:"vouchers"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
			t.Fatalf("-json: exit %d, %v\n%s%s", code, err, out, errOut)
		}
		if r := doc.Vouchers; !doc.OK || len(r) != 1 || r[0].VoucherID != v || r[0].Result != "OK" ||
			r[0].RedisStock == nil || *r[0].RedisStock != 8 || r[0].Queued != 2 {
			t.Fatalf("-json: %s", out)
		}

		// Redis stock altered: exit 1, reported; -fix repairs (exit 0, FIXED); then OK.
		k := seckill.KeysOf(seckill.KeyPrefix(ns, seckill.DefaultPrefix), v)
		rdb.Set(ctx, k.Stock, 50, 0)
		code, out, errOut = runReconcile(t, env, "-voucher", vid)
		if code != 1 || !strings.Contains(out, "PROBLEM") || !strings.Contains(out, "Redis stock 50, expected 8") {
			t.Fatalf("stock altered: exit %d\n%s%s", code, out, errOut)
		}
		t.Logf("problem:\n%s", out)
		if n, _ := rdb.Get(ctx, k.Stock).Int(); n != 50 {
			t.Fatalf("without -fix the stock changed to %d", n)
		}
		code, out, errOut = runReconcile(t, env, "-fix", "-voucher", vid)
		if code != 0 || !strings.Contains(out, "FIXED") {
			t.Fatalf("-fix: exit %d\n%s%s", code, out, errOut)
		}
		t.Logf("fixed:\n%s", out)
		if n, _ := rdb.Get(ctx, k.Stock).Int(); n != 8 {
			t.Fatalf("after -fix the Redis stock is %d, want 8", n)
		}
		if code, out, errOut = runReconcile(t, env, "-voucher", vid); code != 0 {
			t.Fatalf("after -fix: exit %d\n%s%s", code, out, errOut)
		}
		if a, err := svc.Grab(ctx, users[2], v); err != nil || a.Status != seckill.StatusQueued {
			t.Fatalf("grab after -fix: %+v %v", a, err)
		}

		// A problem -fix cannot repair: exit 1 with -fix.
		if code, out, errOut = runReconcile(t, env, "-fix", "-voucher", "999999999"); code != 1 || !strings.Contains(out, "no seckill voucher") {
			t.Fatalf("unknown voucher with -fix: exit %d\n%s%s", code, out, errOut)
		}

		// Usage and connection errors: exit 2.
		for _, c := range []struct {
			name string
			env  []string
			args []string
			want string
		}{
			{"embedded default", nil, nil, "SURGE_REDIS_ADDRS"},
			{"bad voucher id", env, []string{"-voucher", "abc"}, "not a voucher id"},
			{"unknown flag", env, []string{"-nope"}, "-nope"},
			{"stray argument", env, []string{vid}, "unexpected argument"},
			{"Redis down", []string{"SURGE_REDIS_ADDRS=127.0.0.1:1", "SURGE_MYSQL_DSN=" + dsn}, nil, "Redis"},
			{"bad namespace", append(env[:2:2], "SURGE_NAMESPACE={x}"), nil, "namespace"},
		} {
			code, out, errOut := runReconcile(t, c.env, c.args...)
			if code != 2 || !strings.Contains(errOut, c.want) {
				t.Errorf("%s: exit %d, stderr %q (want 2 and %q); stdout %q", c.name, code, errOut, c.want, out)
			}
		}
	})
}

// surge -h lists the subcommands, reconcile among them; surge reconcile -h its flags.
func TestReconcileHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}} {
		cmd := exec.Command(surgeBinary(t), args...)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "surge reconcile [-fix] [-voucher id,...] [-json]") {
			t.Errorf("surge %v: %v\n%s", args, err, out)
		}
	}
	code, _, errOut := runReconcile(t, nil, "-h")
	for _, f := range []string{"-fix", "-voucher", "-json", "-redis-addrs", "-mysql-dsn", "-namespace", "Exit status"} {
		if code != 0 || !strings.Contains(errOut, f) {
			t.Errorf("surge reconcile -h: exit %d, help lacks %s:\n%s", code, f, errOut)
		}
	}
}
