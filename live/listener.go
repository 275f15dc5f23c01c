package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Publisher receives what a Listener hears. *Broker is one.
type Publisher interface {
	// Publish hands on one notification; it must not block.
	Publish(ev Event)
	// ResyncAll tells everyone to reload: notifications may have been missed.
	ResyncAll()
}

// ListenerConfig tunes a Listener; zero values take the defaults.
type ListenerConfig struct {
	// MinBackoff and MaxBackoff bound the wait before reconnecting after a lost
	// connection; it doubles after each failed attempt (defaults 250 ms and 10 s).
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// CheckEvery is how long a quiet connection waits before it is checked with a
	// ping, so that a silently dropped connection is noticed (default 30 s).
	CheckEvery time.Duration
	Logger     *slog.Logger
}

// Listener holds one connection of the shared pool that LISTENs on Channel and
// publishes every notification. After losing the connection (a database restart, a
// terminated backend, a network failure) it reconnects with backoff and asks every
// subscriber to resync, since notifications sent meanwhile are gone.
type Listener struct {
	pool *pgxpool.Pool
	pub  Publisher
	cfg  ListenerConfig

	mu    sync.Mutex
	pid   uint32
	ready chan struct{} // closed while listening
}

// NewListener returns a listener that publishes to pub once Run is called.
func NewListener(pool *pgxpool.Pool, pub Publisher, cfg ListenerConfig) *Listener {
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 250 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(10*time.Second, cfg.MinBackoff)
	}
	if cfg.CheckEvery <= 0 {
		cfg.CheckEvery = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Listener{pool: pool, pub: pub, cfg: cfg, ready: make(chan struct{})}
}

// Ready returns a channel that is closed while the listener is listening. After a
// lost connection, call it again for the next time.
func (l *Listener) Ready() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ready
}

// BackendPID is the server process of the listening connection, or 0 when there is
// none.
func (l *Listener) BackendPID() uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pid
}

func (l *Listener) setListening(pid uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pid = pid
	select {
	case <-l.ready:
		if pid == 0 {
			l.ready = make(chan struct{})
		}
	default:
		if pid != 0 {
			close(l.ready)
		}
	}
}

// Run listens until ctx ends, reconnecting whenever the connection is lost. It
// returns nil when ctx ends.
func (l *Listener) Run(ctx context.Context) error {
	backoff := l.cfg.MinBackoff
	connected := false
	for {
		err := l.listen(ctx, func() {
			if connected {
				// Whatever changed while we were away was not announced to us.
				l.pub.ResyncAll()
			}
			connected = true
			backoff = l.cfg.MinBackoff
		})
		if ctx.Err() != nil {
			return nil //nolint:nilerr // the listener was stopped: the connection's error is its consequence
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		l.cfg.Logger.WarnContext(ctx, "live status: lost the notification connection; reconnecting",
			"err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		backoff = min(backoff*2, l.cfg.MaxBackoff)
	}
}

// listen runs one connection: LISTEN, then publish notifications until an error.
func (l *Listener) listen(ctx context.Context, onListen func()) (err error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("error acquiring a connection: %w", err)
	}
	defer func() {
		if ctx.Err() != nil && !conn.Conn().IsClosed() {
			// Clean stop: leave the connection as we found it for the pool.
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			if _, uerr := conn.Exec(stopCtx, "UNLISTEN *"); uerr != nil {
				conn.Conn().Close(stopCtx)
			}
			cancel()
		} else if !conn.Conn().IsClosed() {
			// After an error its state is unknown: make the pool drop it.
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
		conn.Release()
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return fmt.Errorf("error listening on %s: %w", Channel, err)
	}
	l.setListening(conn.Conn().PgConn().PID())
	defer l.setListening(0)
	onListen()
	l.cfg.Logger.DebugContext(ctx, "live status: listening", "channel", Channel)

	for {
		waitCtx, cancel := context.WithTimeout(ctx, l.cfg.CheckEvery)
		n, err := conn.Conn().WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			// Quiet for a while: make sure the connection is still there.
			pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = conn.Ping(pingCtx)
			cancel()
			if err != nil {
				return fmt.Errorf("error checking the listening connection: %w", err)
			}
			continue
		default:
			return fmt.Errorf("error waiting for notifications: %w", err)
		}
		ev, err := ParseNotification(n.Payload)
		if err != nil {
			l.cfg.Logger.WarnContext(ctx, "live status: ignoring a notification", "err", err)
			continue
		}
		l.pub.Publish(ev)
	}
}
