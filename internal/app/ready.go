package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/surgekit/surge/internal/store"
)

// databaseReady is readiness's database check: the database answers and still holds this
// deployment, the one the namespace is bound to. A PING alone answered "ok" for a database
// dropped and created again under the server (or migrated since by another deployment) while
// every query failed. The check reads the deployment id, one primary-key lookup, at most once
// per readyEvery: probes arriving together share one read, and a flood of probes costs the
// database one query a second.
type databaseReady struct {
	db    *store.DB
	want  string // this deployment
	every time.Duration

	mu  sync.Mutex
	at  time.Time // of the last read
	err error     // its outcome
}

// readyEvery is how long a readiness answer about the database is reused.
const readyEvery = time.Second

// errNotThisDeployment is the database's state when it holds another deployment, or none.
type errNotThisDeployment struct{ found string }

func (e errNotThisDeployment) Error() string {
	if e.found == "" {
		return "the database holds no deployment: it was replaced since this server started"
	}
	return fmt.Sprintf("the database holds deployment %s, not this server's: it was replaced since this server started", e.found)
}

// HealthState is what /readyz says of the database instead of "down".
func (errNotThisDeployment) HealthState() string { return "not this deployment" }

func (c *databaseReady) check(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < c.every {
		return c.err
	}
	id, err := c.db.DeploymentID(ctx)
	switch {
	case errors.Is(err, store.ErrNoDeploymentID):
		err = errNotThisDeployment{}
	case err == nil && id != c.want:
		err = errNotThisDeployment{found: id}
	}
	c.at, c.err = time.Now(), err
	return err
}
