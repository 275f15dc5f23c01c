package studio

import (
	"context"
	"encoding/json"
	"gorm.io/gorm"
	"time"
)

// WorkerInfo is a worker process as it registers itself.
type WorkerInfo struct {
	Name        string
	Host        string
	PID         int             `gorm:"column:pid"`
	Engines     Flags           `gorm:"type:text[]"`
	GPUs        json.RawMessage `gorm:"column:gpus"`
	Concurrency int
	StartedAt   time.Time
	HeartbeatAt time.Time
	// Silence is how long ago the heartbeat was, by the database's clock (the
	// heartbeat is written with the database's now(), so the reader's clock, which
	// may be off by any amount, takes no part).
	Silence time.Duration `gorm:"-"`
}

// TableName keeps gorm on the workers table.
func (WorkerInfo) TableName() string { return "workers" }

// aliveWithin is how recent a heartbeat must be for its worker to count as alive.
const aliveWithin = 20 * time.Second

// Alive reports whether the worker's heartbeat is recent.
func (w WorkerInfo) Alive() bool { return w.Silence < aliveWithin }

// agoSQL reads how long ago a timestamp column was, by the database's clock, in seconds.
func agoSQL(col string) string {
	return "extract(epoch FROM now() - " + col + ")::float8"
}

// durationOf turns a count of seconds read from the database into a duration.
func durationOf(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// RegisterWorker adds or refreshes a worker's registry entry.
func (s *Store) RegisterWorker(ctx context.Context, w WorkerInfo) error {
	if w.GPUs == nil {
		w.GPUs = json.RawMessage("[]")
	}
	return s.db.WithContext(ctx).Exec(`INSERT INTO workers (name, host, pid, engines, gpus, concurrency)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET host = excluded.host, pid = excluded.pid,
		engines = excluded.engines, gpus = excluded.gpus, concurrency = excluded.concurrency, started_at = now(), heartbeat_at = now()`,
		w.Name, w.Host, w.PID, w.Engines, string(w.GPUs), w.Concurrency).Error
}

// WorkerHeartbeat marks a worker alive; ErrNotFound when its entry is gone.
func (s *Store) WorkerHeartbeat(ctx context.Context, name string) error {
	res := s.db.WithContext(ctx).Exec(`UPDATE workers SET heartbeat_at = now() WHERE name = ?`, name)
	if res.Error == nil && res.RowsAffected == 0 {
		return ErrNotFound
	}
	return res.Error
}

// SetWorkerGPUs stores the GPUs a worker reports.
func (s *Store) SetWorkerGPUs(ctx context.Context, name string, gpus json.RawMessage) error {
	return s.db.WithContext(ctx).Exec(`UPDATE workers SET gpus = ?, heartbeat_at = now() WHERE name = ?`, string(gpus), name).Error
}

// UnregisterWorker removes a worker that stops cleanly.
func (s *Store) UnregisterWorker(ctx context.Context, name string) error {
	return s.db.WithContext(ctx).Exec(`DELETE FROM workers WHERE name = ?`, name).Error
}

// Workers lists registered workers, most recently seen first; entries silent for a
// day are dropped.
func (s *Store) Workers(ctx context.Context) ([]WorkerInfo, error) {
	if err := s.db.WithContext(ctx).Exec(`DELETE FROM workers WHERE heartbeat_at < now() - interval '1 day'`).Error; err != nil {
		return nil, err
	}
	var rows []struct {
		WorkerInfo     `gorm:"embedded"`
		SilenceSeconds float64
	}
	err := s.db.WithContext(ctx).Raw(`SELECT *, ` + agoSQL("heartbeat_at") + ` AS silence_seconds
		FROM workers ORDER BY heartbeat_at DESC`).Scan(&rows).Error
	ws := make([]WorkerInfo, len(rows))
	for i, r := range rows {
		ws[i] = r.WorkerInfo
		ws[i].Silence = durationOf(r.SilenceSeconds)
	}
	return ws, err
}

// RescueDeadWorkers hands back the running jobs of workers whose heartbeat stopped
// more than staleAfter ago (killed, host lost), so that another worker retries them
// within seconds instead of waiting for River's rescuer. Their registry entries are
// removed. It returns how many jobs were handed back.
//
// A job is matched by the River client ID of its last attempt, which is the worker's
// name. The job goes back to available with an error recorded, as River's own rescuer
// would; the pipeline's render sequence check and the one-take-per-render constraint
// make a retry safe even if the worker was only slow.
func (s *Store) RescueDeadWorkers(ctx context.Context, staleAfter time.Duration) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		var dead []string
		if err := tx.Raw(`DELETE FROM workers WHERE heartbeat_at < now() - make_interval(secs => ?) RETURNING name`,
			staleAfter.Seconds()).Scan(&dead).Error; err != nil {
			return err
		}
		var err error
		n, err = handBackJobs(tx, dead, "stopped (no heartbeat)")
		return err
	})
	return n, err
}

// RescueWorkerJobs hands back the jobs still running under worker name, as
// RescueDeadWorkers hands back a dead worker's. A worker calls it as it starts,
// before it works any job: those are an earlier process's under the same name
// (the default name is hostname-pid, the same each time a container restarts),
// which died without finishing them; the new process's registration refreshes the
// heartbeat, so RescueDeadWorkers would never see the old one dead. It returns how
// many jobs were handed back.
func (s *Store) RescueWorkerJobs(ctx context.Context, name string) (int64, error) {
	return handBackJobs(s.db.WithContext(ctx), []string{name}, "restarted")
}

// handBackJobs makes the running jobs whose last attempt was by one of workers
// available again, with an error saying that the worker went (why). The job keeps its
// attempt count and runs again even after its last attempt (River's fetch does not
// check max_attempts, and the pipeline's final-attempt handling records the line's
// outcome then), where River's rescuer would discard it.
func handBackJobs(tx *gorm.DB, workers []string, why string) (int64, error) {
	if len(workers) == 0 {
		return 0, nil
	}
	res := tx.Exec(`UPDATE river_job SET state = 'available', scheduled_at = now(),
		errors = array_append(errors, jsonb_build_object('at', now(), 'attempt', attempt,
			'error', 'worker ' || attempted_by[array_upper(attempted_by, 1)] || ' ' || ?::text, 'trace', ''))
		WHERE state = 'running' AND attempted_by[array_upper(attempted_by, 1)] IN ?`, why, workers)
	return res.RowsAffected, res.Error
}

// CreatePausedQueue records a River queue that no worker has opened yet, paused, so
// that a pause asked for before any worker runs holds when they start.
func (s *Store) CreatePausedQueue(ctx context.Context, name string) error {
	return s.db.WithContext(ctx).Exec(`INSERT INTO river_queue (name, created_at, metadata, paused_at, updated_at)
		VALUES (?, now(), '{}', now(), now()) ON CONFLICT (name) DO UPDATE SET paused_at = now(), updated_at = now()`, name).Error
}
