package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/store"
)

// A namespace is bound to one deployment, that is one database (store.DB.DeploymentID): two
// deployments under one namespace would share caches, sale state, locks and ids, and write
// each other's orders into their databases. The binding is one key, <ns>:deployment, holding
// the deployment id. It has no TTL (one key per namespace, it does not grow) so that a
// deployment stopped for a while keeps its namespace; another one takes it over only when told
// to (Config.TakeOverNamespace).
const deploymentKey = "deployment"

// namespaceCallTimeout bounds each check of the binding by the running server.
const namespaceCallTimeout = 2 * time.Second

// NamespaceTakenError is the refusal of a server whose database is not the one its namespace
// is bound to.
type NamespaceTakenError struct {
	Namespace string
	BoundTo   string // the deployment id the namespace is bound to
	Own       string // this server's deployment id
	Database  string // this server's database, for the operator
	// Running is set when the server found the namespace taken while it served.
	Running bool
}

func (e *NamespaceTakenError) Error() string {
	if e.Running {
		return fmt.Sprintf("namespace %q was taken over by deployment %s; this server's database (%s) is deployment %s: "+
			"this server stops serving (its order consumer is stopped, requests are refused) rather than mix the two deployments' data",
			e.Namespace, e.BoundTo, e.Database, e.Own)
	}
	return fmt.Sprintf("namespace %q is bound to deployment %s, another database; this server's database (%s) is deployment %s: "+
		"give each deployment its own SURGE_NAMESPACE, or, if deployment %s is gone for good, start this server once with "+
		"SURGE_TAKE_OVER_NAMESPACE=%s (this deletes every key of the namespace)",
		e.Namespace, e.BoundTo, e.Database, e.Own, e.BoundTo, e.BoundTo)
}

// namespaceGuard is the running server's side of the binding.
type namespaceGuard struct {
	lost     chan struct{} // closed when another deployment holds the namespace
	lostOnce sync.Once
	err      atomic.Pointer[NamespaceTakenError]
	rebound  prometheus.Counter
	taken    prometheus.Gauge
	stop     func()
}

func (a *App) bindingKey() string { return a.Config.Namespace + ":" + deploymentKey }

// bindNamespace binds the namespace to this deployment unless it is bound already, and
// returns the deployment it is bound to; created reports that this call bound it.
func (a *App) bindNamespace(ctx context.Context) (owner string, created bool, err error) {
	key := a.bindingKey()
	if created, err = a.Redis.SetNX(ctx, key, a.Deployment, 0).Result(); err != nil {
		return "", false, fmt.Errorf("binding namespace %q in Redis: %w", a.Config.Namespace, err)
	}
	if created {
		return a.Deployment, true, nil
	}
	if owner, err = a.Redis.Get(ctx, key).Result(); errors.Is(err, redis.Nil) {
		return a.bindNamespace(ctx) // deleted in between (a flush): bind it again
	} else if err != nil {
		return "", false, fmt.Errorf("reading the binding of namespace %q: %w", a.Config.Namespace, err)
	}
	return owner, false, nil
}

// claimNamespace binds the namespace to this deployment at start, or refuses to start when
// another deployment holds it, unless Config.TakeOverNamespace names that deployment: the
// namespace is then bound to this one and every other key under it deleted, since the other
// deployment's cached rows, sale state and queued orders are not this database's.
func (a *App) claimNamespace(ctx context.Context) error {
	owner, _, err := a.bindNamespace(ctx)
	if err != nil {
		return err
	}
	takeOver := a.Config.TakeOverNamespace
	if owner == a.Deployment {
		if takeOver != "" {
			a.Log.Warn("SURGE_TAKE_OVER_NAMESPACE is set but the namespace is bound to this deployment already: remove the setting",
				"namespace", a.Config.Namespace, "deployment", a.Deployment)
		}
		return nil
	}
	if takeOver != owner {
		return &NamespaceTakenError{Namespace: a.Config.Namespace, BoundTo: owner, Own: a.Deployment, Database: a.databaseName()}
	}
	// Bound first, so that the other deployment's servers still running stop (guardNamespace)
	// rather than write on.
	if err := a.Redis.Set(ctx, a.bindingKey(), a.Deployment, 0).Err(); err != nil {
		return fmt.Errorf("taking namespace %q over: %w", a.Config.Namespace, err)
	}
	n, err := a.purgeNamespace(ctx)
	if err != nil {
		return fmt.Errorf("taking namespace %q over: deleting its keys: %w", a.Config.Namespace, err)
	}
	a.Log.Warn("namespace taken over: it is bound to this deployment, the other deployment's keys are deleted; remove SURGE_TAKE_OVER_NAMESPACE",
		"namespace", a.Config.Namespace, "deployment", a.Deployment, "from", owner, "keys_deleted", n)
	return nil
}

// purgeNamespace deletes every key under the namespace but the binding, on every master.
func (a *App) purgeNamespace(ctx context.Context) (int64, error) {
	// SCAN's pattern is a glob: a namespace may hold *, ? or [ (validNamespace allows them),
	// which must match only themselves, not other deployments' keys.
	pattern := globEscaper.Replace(a.Config.Namespace) + ":*"
	keep := a.bindingKey()
	var deleted atomic.Int64
	purge := func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, pattern, 1000).Iterator()
		pipe := node.Pipeline()
		for iter.Next(ctx) {
			if k := iter.Val(); k != keep {
				pipe.Unlink(ctx, k) // one key a command: keys of one node may lie in different slots
				deleted.Add(1)
			}
			if pipe.Len() >= 1000 {
				if _, err := pipe.Exec(ctx); err != nil {
					return err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	var err error
	switch c := a.Redis.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, purge)
	case *redis.Client:
		err = purge(ctx, c)
	default:
		err = fmt.Errorf("unexpected Redis client %T", a.Redis)
	}
	return deleted.Load(), err
}

var globEscaper = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)

// databaseName names this server's database for an operator: host and database, or the
// SQLite file; never the user or password.
func (a *App) databaseName() string {
	if a.Config.MySQLDSN == "" {
		return "SQLite in " + a.Config.DataDir
	}
	cfg, err := mysql.ParseDSN(a.Config.MySQLDSN)
	if err != nil {
		return "MySQL"
	}
	return "MySQL " + cfg.Addr + "/" + cfg.DBName
}

// guardNamespace checks the binding every Config.NamespaceCheckInterval while the server runs.
// A binding Redis lost (a flush, a restart without persistence) is bound again to this
// deployment: all its servers agree, the first one wins. A binding to another deployment (one
// that took the namespace over, or that started first after Redis lost it) makes this server
// stop: its order consumer stops at once, requests and readiness answer 503, and NamespaceLost
// is closed (surge serve then exits). Mixing two deployments' data is worse than not serving.
func (a *App) guardNamespace(registry prometheus.Registerer) {
	g := &namespaceGuard{
		lost: make(chan struct{}),
		rebound: prometheus.NewCounter(prometheus.CounterOpts{Name: "surge_namespace_rebound_total",
			Help: "Times this server bound its namespace again after Redis had lost the binding."}),
		taken: prometheus.NewGauge(prometheus.GaugeOpts{Name: "surge_namespace_taken",
			Help: "1 once another deployment holds this server's namespace: the server has stopped serving."}),
	}
	registry.MustRegister(g.rebound, g.taken)
	a.namespace = g
	done, stopped := make(chan struct{}), make(chan struct{})
	g.stop = sync.OnceFunc(func() { close(done); <-stopped })
	go func() {
		defer close(stopped)
		t := time.NewTicker(a.Config.NamespaceCheckInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), namespaceCallTimeout)
			owner, created, err := a.bindNamespace(ctx)
			cancel()
			switch {
			case err != nil:
				// Redis unreachable: readiness reports it; the binding is checked again next time.
				a.Log.Debug("checking the namespace's binding", "err", err)
			case created:
				g.rebound.Inc()
				a.Log.Warn("the namespace's binding was gone (Redis lost its data): bound again to this deployment",
					"namespace", a.Config.Namespace, "deployment", a.Deployment)
			case owner != a.Deployment:
				a.loseNamespace(owner)
				return
			}
		}
	}()
	a.closers = append(a.closers, func() error { g.stop(); return nil })
}

// loseNamespace stops this server's use of a namespace another deployment now holds.
func (a *App) loseNamespace(owner string) {
	g := a.namespace
	g.lostOnce.Do(func() {
		err := &NamespaceTakenError{Namespace: a.Config.Namespace, BoundTo: owner, Own: a.Deployment, Database: a.databaseName(), Running: true}
		g.err.Store(err)
		g.taken.Set(1)
		a.Log.Error(err.Error(), "namespace", a.Config.Namespace, "deployment", a.Deployment, "taken_by", owner)
		if a.stopConsumer != nil {
			a.stopConsumer() // it would write the other deployment's queued orders into this database
		}
		close(g.lost)
	})
}

// NamespaceLost is closed when another deployment has taken this server's namespace over:
// the server has stopped serving and should exit (NamespaceErr says why). Never closed for an
// App built by Connect.
func (a *App) NamespaceLost() <-chan struct{} {
	if a.namespace == nil {
		return nil
	}
	return a.namespace.lost
}

// NamespaceErr is why the server stopped serving (a *NamespaceTakenError), or nil.
func (a *App) NamespaceErr() error {
	if a.namespace == nil {
		return nil
	}
	if err := a.namespace.err.Load(); err != nil {
		return err
	}
	return nil
}

// checkNamespace is the tools' check (Connect): a namespace bound to another deployment is
// refused, so that `surge reconcile -fix` never rebuilds one deployment's sale state from
// another's database. A tool binds nothing.
func (a *App) checkNamespace(ctx context.Context) error {
	own, err := a.DB.DeploymentID(ctx)
	if errors.Is(err, store.ErrNoDeploymentID) {
		return nil // a database no server has migrated yet: nothing to compare
	} else if err != nil {
		return err
	}
	owner, err := a.Redis.Get(ctx, a.bindingKey()).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading the binding of namespace %q: %w", a.Config.Namespace, err)
	}
	if owner != own {
		return &NamespaceTakenError{Namespace: a.Config.Namespace, BoundTo: owner, Own: own, Database: a.databaseName()}
	}
	return nil
}
