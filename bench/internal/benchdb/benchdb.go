// Package benchdb gives the benchmark programs a fresh, migrated database of their
// own on a PostgreSQL server, dropped when they are done.
package benchdb

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"dubstudio/internal/testdb"
	"dubstudio/migrations"
	"dubstudio/studio"
)

// Server returns the server the tests use (TEST_DATABASE_URL or its default).
func Server() string { return testdb.ServerURL() }

// DB is a database made for one benchmark run.
type DB struct {
	URL  string
	Pool *pgxpool.Pool
	name string
	srv  string
	keep bool
}

// Fresh creates a database on serverURL, applies the migrations and connects to it.
// keep leaves it in place at Close, for inspection.
func Fresh(ctx context.Context, serverURL, prefix string, keep bool, logger *slog.Logger) (*DB, error) {
	admin, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", serverURL, err)
	}
	defer admin.Close(ctx)
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, err
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, err
	}
	u.Path = "/" + name
	db := &DB{URL: u.String(), name: name, srv: serverURL, keep: keep}
	db.Pool, err = studio.Connect(ctx, db.URL)
	if err == nil {
		err = migrations.Apply(ctx, db.Pool, logger)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Close closes the pool and drops the database (unless kept).
func (db *DB) Close() {
	if db.Pool != nil {
		db.Pool.Close()
	}
	if db.keep {
		fmt.Fprintln(os.Stderr, "kept database", db.name)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, db.srv)
	if err != nil {
		return
	}
	defer admin.Close(ctx)
	_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db.name+" WITH (FORCE)")
}
