package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"

	"entgo.io/ent/dialect"
)

// The deployment's identity lives in its own database, so every server of one deployment
// shares it without configuration and two deployments (two databases) never do. Sessions and
// login codes record it (internal/auth). The table is plain SQL beside ent's schema: ent's
// migration never drops a table it does not know.
const (
	settingsTable    = "surge_settings"
	deploymentIDName = "deployment_id"
	deploymentIDSize = 16 // random bytes: 128 bits, no two deployments draw the same
)

// createSettings is the same statement in both dialects.
const createSettings = "CREATE TABLE IF NOT EXISTS " + settingsTable +
	" (name VARCHAR(64) NOT NULL PRIMARY KEY, value VARCHAR(255) NOT NULL)"

// ErrNoDeploymentID means the database was never migrated by a version that records one.
var ErrNoDeploymentID = errors.New("store: the database has no deployment id: run the server once to migrate it")

// ensureDeploymentID creates the settings table and, once per database, a random deployment
// id. Servers migrating at the same moment race harmlessly: the first insert wins, the others
// are ignored.
func (d *DB) ensureDeploymentID(ctx context.Context) error {
	if _, err := d.SQL.ExecContext(ctx, createSettings); err != nil {
		return fmt.Errorf("store: creating %s: %w", settingsTable, err)
	}
	b := make([]byte, deploymentIDSize)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("store: random deployment id: %w", err)
	}
	insert := "INSERT IGNORE INTO "
	if d.Dialect == dialect.SQLite {
		insert = "INSERT OR IGNORE INTO "
	}
	if _, err := d.SQL.ExecContext(ctx, insert+settingsTable+" (name, value) VALUES (?, ?)", deploymentIDName, hex.EncodeToString(b)); err != nil {
		return fmt.Errorf("store: recording the deployment id: %w", err)
	}
	return nil
}

// DeploymentID returns the deployment's identity, created by Migrate.
func (d *DB) DeploymentID(ctx context.Context) (string, error) {
	var id string
	err := d.SQL.QueryRowContext(ctx, "SELECT value FROM "+settingsTable+" WHERE name = ?", deploymentIDName).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNoDeploymentID
	}
	if err != nil {
		return "", fmt.Errorf("store: reading the deployment id: %w", err)
	}
	return id, nil
}
