package studio

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Connect opens the one pgx pool a process uses; gorm and River both run on it.
func Connect(ctx context.Context, databaseURL string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("error parsing DATABASE_URL: %w", err)
	}
	if cfg.MaxConns < 10 {
		cfg.MaxConns = 10
	}
	cfg.HealthCheckPeriod = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("error opening database pool: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("error connecting to %s: %w", redact(&cfg.ConnConfig.Config), err)
	}
	return pool, nil
}

func redact(c *pgconn.Config) string {
	return fmt.Sprintf("postgres://%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

// Store reads and writes the domain in Postgres. It is the only holder of the
// database handle; services call its methods and own no SQL.
type Store struct {
	db   *gorm.DB
	pool *pgxpool.Pool
	// LineChanged, when set, runs inside the transaction of every change to a line
	// (the workflow engine uses it to queue or cancel renders atomically).
	LineChanged LineChangedFunc
}

// LineChangedFunc is called with the transaction, the line before (nil for a new line)
// and after (nil for a deleted line) each change.
type LineChangedFunc func(ctx context.Context, tx *gorm.DB, before, after *Line) error

// NewStore wraps pool in gorm. No AutoMigrate: the schema comes from migrations.
func NewStore(pool *pgxpool.Pool) (*Store, error) {
	sqlDB := stdlib.OpenDBFromPool(pool)
	db, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		TranslateError:         false,
	})
	if err != nil {
		return nil, fmt.Errorf("error opening gorm: %w", err)
	}
	return &Store{db: db, pool: pool}, nil
}

// Pool returns the shared pgx pool (for River and LISTEN).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// DB returns the gorm handle for packages that extend the store with their own
// tables (workflow). Web handlers never use it.
func (s *Store) DB() *gorm.DB { return s.db }

// Tx runs fn in a transaction.
func (s *Store) Tx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return s.db.WithContext(ctx).Transaction(fn)
}

// TxPgx runs fn in a transaction on the pool itself, for work that goes through
// pgx directly: the worker moving a line on to fitting (and inserting its fit job
// with River's pgx driver, where one is needed), without gorm's and database/sql's
// layers on the way.
func (s *Store) TxPgx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

func notFound(err error, what string) error {
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return err
}

// Setting returns an application setting, or "" when unset.
func (s *Store) Setting(ctx context.Context, key string) (string, error) {
	var v string
	err := s.db.WithContext(ctx).Raw("SELECT value FROM app_settings WHERE key = ?", key).Scan(&v).Error
	return v, err
}

// SetSetting stores an application setting.
func (s *Store) SetSetting(ctx context.Context, key, value string) error {
	return s.db.WithContext(ctx).Exec(`INSERT INTO app_settings (key, value) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = now()`, key, value).Error
}
