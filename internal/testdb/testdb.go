// Package testdb gives each test its own migrated PostgreSQL database.
//
// The first call in a test binary creates (once per migration set, shared by all
// packages) a template database with every migration applied; each test then gets a
// fresh copy made with CREATE DATABASE ... TEMPLATE, which is fast, and drops it when
// the test ends. Tests can commit, LISTEN and run River against their copy without
// seeing each other.
//
// TEST_DATABASE_URL names the server (default postgres://root@127.0.0.1:5432/test).
package testdb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"dubstudio/migrations"
)

// DefaultURL is used when TEST_DATABASE_URL is not set.
const DefaultURL = "postgres://root@127.0.0.1:5432/test?sslmode=disable"

// ServerURL returns the URL of the test server's administrative database.
func ServerURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

var (
	templateOnce sync.Once
	templateName string
	errTemplate  error
)

// URL creates a fresh migrated database for t and returns its URL. The database is
// dropped when t ends.
func URL(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	templateOnce.Do(func() { templateName, errTemplate = ensureTemplate(ctx) })
	if errTemplate != nil {
		t.Fatalf("test database template: %v", errTemplate)
	}
	name := "dubstudio_t_" + randomHex(6)
	admin, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		t.Fatalf("connecting to the test server: %v (is PostgreSQL running? set TEST_DATABASE_URL)", err)
	}
	defer admin.Close(ctx)
	// Concurrent copies of one template can collide on its lock: retry briefly.
	for attempt := 0; ; attempt++ {
		_, err = admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, templateName))
		if err == nil || attempt == 50 || !strings.Contains(err.Error(), "being accessed by other users") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("creating test database: %v", err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, ServerURL())
		if err != nil {
			return
		}
		defer c.Close(ctx)
		c.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)) //nolint:errcheck
	})
	return withDatabase(ServerURL(), name)
}

// Pool creates a fresh migrated database for t and returns a pool on it, closed when t
// ends (before the database is dropped).
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), URL(t))
	if err != nil {
		t.Fatalf("opening test pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func ensureTemplate(ctx context.Context) (string, error) {
	all, err := migrations.All()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, m := range all {
		h.Write([]byte(m.Name))
		h.Write([]byte(m.SQL))
	}
	name := "dubstudio_tmpl_" + hex.EncodeToString(h.Sum(nil))[:12]

	admin, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		return "", fmt.Errorf("connecting to the test server: %w", err)
	}
	defer admin.Close(ctx)
	// One process at a time builds templates; the others wait and reuse them.
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(4242424242)"); err != nil {
		return "", err
	}
	defer admin.Exec(ctx, "SELECT pg_advisory_unlock(4242424242)") //nolint:errcheck

	var ready bool
	err = admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)", name).Scan(&ready)
	if err != nil || ready {
		return name, err
	}
	admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)) //nolint:errcheck
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	pool, err := pgxpool.New(ctx, withDatabase(ServerURL(), name))
	if err != nil {
		return "", err
	}
	err = migrations.Apply(ctx, pool, slog.New(slog.DiscardHandler))
	pool.Close()
	if err != nil {
		return "", err
	}
	_, err = admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s WITH IS_TEMPLATE true", name))
	return name, err
}

func withDatabase(serverURL, db string) string {
	u, err := url.Parse(serverURL)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + db
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
