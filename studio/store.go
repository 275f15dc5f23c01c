package studio

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

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
	return fmt.Sprintf("postgres://%s@%s/%s", c.User, net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))), c.Database)
}

// Store reads and writes the domain in Postgres. It is the only holder of the
// database handle; services call its methods and own no SQL.
//
// Its SQL runs through gorm on pgx's database/sql driver, all of it written with
// gorm's ? placeholders. A callback that must write in one of the store's
// transactions (inserting River jobs) is given that transaction as a *sql.Tx: the one
// transaction type that leaves the store, the one gorm runs on and River's
// database/sql driver inserts on.
type Store struct {
	db   *gorm.DB
	pool *pgxpool.Pool
	// LineChanged, when set, runs inside the transaction of every change to a line
	// (the workflow engine uses it to queue or cancel renders atomically).
	LineChanged LineChangedFunc
	// GapsChanged, when set, runs inside the transaction of every change to a
	// project's slots (an edit, a split, a merge, an import), after the line's own
	// LineChanged: the workflow engine fits again the takes whose borrowed tails the
	// change ran into (OverrunTakes).
	GapsChanged GapsChangedFunc
	// Limits bound a line's length and an export's programme (zero fields: the defaults).
	Limits Limits
	// blobGCLocked, a tests' hook, runs after the blob collector has locked a batch.
	blobGCLocked func(sums []string)
}

// LineChangedFunc is called with the transaction, the line before (nil for a new line)
// and after (nil for a deleted line) each change.
type LineChangedFunc func(ctx context.Context, tx *sql.Tx, before, after *Line) error

// GapsChangedFunc is called with the transaction and the project whose slots changed;
// lineIDs, when not empty, are the only lines to look at (CheckOverrun).
type GapsChangedFunc func(ctx context.Context, tx *sql.Tx, projectID int64, lineIDs []int64) error

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

// Pool returns the shared pgx pool, for River's worker client and LISTEN; the
// store's own SQL goes through gorm.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// inTx runs fn in a transaction.
func (s *Store) inTx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return s.db.WithContext(ctx).Transaction(fn)
}

// sqlTx returns the database/sql transaction that a gorm transaction runs on, for a
// callback that writes in it.
func sqlTx(tx *gorm.DB) (*sql.Tx, error) {
	t, ok := tx.Statement.ConnPool.(*sql.Tx)
	if !ok {
		return nil, errors.New("studio: not inside a database/sql transaction")
	}
	return t, nil
}

// onTx returns a gorm handle on tx, a transaction the store handed to a callback
// (sqlTx), for a store method that the callback calls to write in it.
func (s *Store) onTx(ctx context.Context, tx *sql.Tx) *gorm.DB {
	db := s.db.Session(&gorm.Session{Context: ctx})
	db.Statement.ConnPool = tx
	return db
}

// queryRow runs q, a query of at most one row, and scans its columns into dest:
// gorm writes the statement, database/sql scans plain values, and no model is
// reflected on (the render's hot paths). No row is sql.ErrNoRows.
func queryRow(db *gorm.DB, q string, args []any, dest ...any) error {
	tx := db.Raw(q, args...)
	row := tx.Row()
	if tx.Error != nil {
		return tx.Error
	}
	return row.Scan(dest...)
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
