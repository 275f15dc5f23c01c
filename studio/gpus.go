package studio

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// userRef is a user id for an updated_by column: NULL for 0 (the command line).
func userRef(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// GPUProfile is an admin's concurrency profile for GPUs, as stored: its settings and
// who changed it when. The columns' CHECK constraints are the backstop of package
// gpu's validation.
type GPUProfile struct {
	ID int64
	GPUProfileSettings
	CreatedAt time.Time
	UpdatedAt time.Time
	UpdatedBy *int64
}

// GPUProfileSettings are a profile's settings. They are gpu.Profile's fields, in its
// order: package gpu owns their meaning and validation, and fleet turns one into the
// other with a Go conversion (gpu.Profile(s), GPUProfileSettings(p)), which stops
// compiling the day the two differ. studio cannot hold a gpu.Profile itself: gpu is
// above it.
type GPUProfileSettings struct {
	Name                 string
	Concurrency          int
	ReservePct           float64
	LongTextThresholdSec float64
	LongLaneLimit        int
	MaxGenSeconds        float64
	SegmentTokens        int
	FP16                 bool `gorm:"column:fp16"`
	EmotionTextModel     bool
	ShareWeights         bool
	Batching             bool
	Beams                int
	KVCacheGiB           float64 `gorm:"column:kv_cache_gib"`
	S2melPrecision       string  `gorm:"column:s2mel_precision"`
}

// TableName keeps gorm on gpu_profiles.
func (GPUProfile) TableName() string { return "gpu_profiles" }

// GPUProfiles lists the profiles by name.
func (s *Store) GPUProfiles(ctx context.Context) ([]GPUProfile, error) {
	var ps []GPUProfile
	err := s.db.WithContext(ctx).Order("name").Find(&ps).Error
	return ps, err
}

// GPUProfileByID returns one profile.
func (s *Store) GPUProfileByID(ctx context.Context, id int64) (*GPUProfile, error) {
	var p GPUProfile
	err := s.db.WithContext(ctx).First(&p, id).Error
	return &p, notFound(err, "GPU profile")
}

// SaveGPUProfile creates the profile (ID 0) or replaces the one with p.ID. A name
// another profile has is ErrConflict.
func (s *Store) SaveGPUProfile(ctx context.Context, userID int64, p *GPUProfile) error {
	p.UpdatedBy = nil
	if userID != 0 {
		p.UpdatedBy = &userID
	}
	var err error
	if p.ID == 0 {
		err = s.db.WithContext(ctx).Omit("CreatedAt", "UpdatedAt").Create(p).Error
	} else {
		res := s.db.WithContext(ctx).Model(&GPUProfile{}).Where("id = ?", p.ID).Updates(map[string]any{
			"name": p.Name, "concurrency": p.Concurrency, "reserve_pct": p.ReservePct,
			"long_text_threshold_sec": p.LongTextThresholdSec, "long_lane_limit": p.LongLaneLimit,
			"max_gen_seconds": p.MaxGenSeconds, "segment_tokens": p.SegmentTokens, "fp16": p.FP16,
			"emotion_text_model": p.EmotionTextModel, "share_weights": p.ShareWeights,
			"batching": p.Batching, "beams": p.Beams, "kv_cache_gib": p.KVCacheGiB,
			"s2mel_precision": p.S2melPrecision, "updated_by": userRef(userID), "updated_at": gorm.Expr("now()"),
		})
		err = res.Error
		if err == nil && res.RowsAffected == 0 {
			return fmt.Errorf("GPU profile %d: %w", p.ID, ErrNotFound)
		}
	}
	if isUniqueViolation(err) {
		return fmt.Errorf("GPU profile name %q is taken: %w", p.Name, ErrConflict)
	}
	if err != nil {
		return err
	}
	saved, err := s.GPUProfileByID(ctx, p.ID)
	if err == nil {
		*p = *saved
	}
	return err
}

// DeleteGPUProfile removes a profile; the GPUs it was assigned to go back to the
// default profile.
func (s *Store) DeleteGPUProfile(ctx context.Context, id int64) error {
	res := s.db.WithContext(ctx).Delete(&GPUProfile{}, id)
	if res.Error == nil && res.RowsAffected == 0 {
		return fmt.Errorf("GPU profile %d: %w", id, ErrNotFound)
	}
	return res.Error
}

// GPUAssignment is the profile (and calibration) a GPU runs with.
type GPUAssignment struct {
	GPUUUID       string `gorm:"column:gpu_uuid"`
	ProfileID     int64
	ProfileName   string `gorm:"->"`
	CalibrationID *int64
	UpdatedAt     time.Time
}

// GPUAssignments lists every assignment, by GPU UUID.
func (s *Store) GPUAssignments(ctx context.Context) ([]GPUAssignment, error) {
	var as []GPUAssignment
	err := s.db.WithContext(ctx).Raw(`SELECT a.gpu_uuid, a.profile_id, p.name AS profile_name, a.calibration_id, a.updated_at
		FROM gpu_assignments a JOIN gpu_profiles p ON p.id = a.profile_id ORDER BY a.gpu_uuid`).Scan(&as).Error
	return as, err
}

// AssignGPUProfile makes the GPU with uuid run profileID (profileID 0: the default
// profile again). The GPU keeps its calibration.
func (s *Store) AssignGPUProfile(ctx context.Context, userID int64, uuid string, profileID int64) error {
	if uuid == "" {
		return fmt.Errorf("GPU UUID is empty: %w", ErrInvalid)
	}
	db := s.db.WithContext(ctx)
	if profileID == 0 {
		return db.Exec(`DELETE FROM gpu_assignments WHERE gpu_uuid = ?`, uuid).Error
	}
	if _, err := s.GPUProfileByID(ctx, profileID); err != nil {
		return err
	}
	return db.Exec(`INSERT INTO gpu_assignments (gpu_uuid, profile_id, updated_by) VALUES (?, ?, ?)
		ON CONFLICT (gpu_uuid) DO UPDATE SET profile_id = excluded.profile_id, updated_by = excluded.updated_by,
		updated_at = now()`, uuid, profileID, userRef(userID)).Error
}

// GPUSetting is what a worker needs to run one GPU: its profile (nil: the default)
// and the result of its applied calibration (nil: the default prediction curve).
type GPUSetting struct {
	GPUUUID       string
	Profile       *GPUProfile
	CalibrationID *int64
	Calibration   json.RawMessage
}

// GPUSettings returns the settings of the GPUs with the given UUIDs; a GPU without
// an assignment is missing from the map.
func (s *Store) GPUSettings(ctx context.Context, uuids []string) (map[string]GPUSetting, error) {
	out := map[string]GPUSetting{}
	if len(uuids) == 0 {
		return out, nil
	}
	var rows []struct {
		GPUUUID       string `gorm:"column:gpu_uuid"`
		ProfileID     int64
		CalibrationID *int64
		Result        *string
	}
	err := s.db.WithContext(ctx).Raw(`SELECT a.gpu_uuid, a.profile_id, a.calibration_id, c.result::text AS result
		FROM gpu_assignments a LEFT JOIN gpu_calibrations c ON c.id = a.calibration_id AND c.status = 'done'
		WHERE a.gpu_uuid IN ?`, uuids).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		p, err := s.GPUProfileByID(ctx, r.ProfileID)
		if err != nil {
			return nil, err
		}
		st := GPUSetting{GPUUUID: r.GPUUUID, Profile: p, CalibrationID: r.CalibrationID}
		if r.Result != nil {
			st.Calibration = json.RawMessage(*r.Result)
		}
		out[r.GPUUUID] = st
	}
	return out, nil
}

// CalibrationStatus is where a calibration run is.
type CalibrationStatus string

// Calibration statuses.
const (
	CalibrationRequested CalibrationStatus = "requested"
	CalibrationRunning   CalibrationStatus = "running"
	CalibrationDone      CalibrationStatus = "done"
	CalibrationFailed    CalibrationStatus = "failed"
	CalibrationCancelled CalibrationStatus = "cancelled"
)

// GPUCalibration is one calibration run of a GPU with a profile.
type GPUCalibration struct {
	ID        int64
	GPUUUID   string `gorm:"column:gpu_uuid"`
	GPUName   string
	Worker    string
	ProfileID *int64
	// Profile is the profile as calibrated (JSON of GPUProfile).
	Profile     json.RawMessage `gorm:"type:jsonb"`
	Status      CalibrationStatus
	Progress    string
	Result      json.RawMessage `gorm:"type:jsonb"`
	Error       string
	RequestedBy *int64
	RequestedAt time.Time
	StartedAt   *time.Time
	FinishedAt  *time.Time
	AppliedAt   *time.Time
	AppliedBy   *int64
}

// TableName keeps gorm on gpu_calibrations.
func (GPUCalibration) TableName() string { return "gpu_calibrations" }

// Active reports whether the run is waiting or running.
func (c GPUCalibration) Active() bool {
	return c.Status == CalibrationRequested || c.Status == CalibrationRunning
}

// ProfileValue decodes the calibrated profile.
func (c GPUCalibration) ProfileValue() (GPUProfile, error) {
	var p GPUProfile
	err := json.Unmarshal(c.Profile, &p)
	return p, err
}

// RequestGPUCalibration asks the worker that owns the GPU to calibrate it with
// profile. A GPU with a calibration already waiting or running is ErrConflict.
func (s *Store) RequestGPUCalibration(ctx context.Context, userID int64, uuid, gpuName string, profile GPUProfile) (*GPUCalibration, error) {
	if uuid == "" {
		return nil, fmt.Errorf("GPU UUID is empty: %w", ErrInvalid)
	}
	pj, err := json.Marshal(profile)
	if err != nil {
		return nil, err
	}
	c := &GPUCalibration{GPUUUID: uuid, GPUName: gpuName, Profile: pj, Status: CalibrationRequested}
	if userID != 0 {
		c.RequestedBy = &userID
	}
	if profile.ID != 0 {
		c.ProfileID = &profile.ID
	}
	err = s.db.WithContext(ctx).Omit("RequestedAt", "Result").Create(c).Error
	if isUniqueViolation(err) {
		return nil, fmt.Errorf("GPU %s is being calibrated: %w", uuid, ErrConflict)
	}
	if err != nil {
		return nil, err
	}
	return s.GPUCalibrationByID(ctx, c.ID)
}

// ClaimGPUCalibrations marks the requested calibrations of the given GPUs as running
// on worker and returns them. Runs left running by workers that are gone fail first.
func (s *Store) ClaimGPUCalibrations(ctx context.Context, worker string, uuids []string) ([]GPUCalibration, error) {
	if len(uuids) == 0 {
		return nil, nil
	}
	db := s.db.WithContext(ctx)
	if err := db.Exec(`UPDATE gpu_calibrations SET status = 'failed', finished_at = now(),
		error = 'the worker running it stopped'
		WHERE status = 'running' AND NOT EXISTS (SELECT 1 FROM workers w WHERE w.name = gpu_calibrations.worker)`).Error; err != nil {
		return nil, err
	}
	var cs []GPUCalibration
	err := db.Model(&cs).Clauses(clause.Returning{}).
		Where("status = 'requested' AND gpu_uuid IN ?", uuids).
		Updates(map[string]any{"status": CalibrationRunning, "worker": worker, "started_at": gorm.Expr("now()")}).Error
	return cs, err
}

// SetGPUCalibrationProgress records what a running calibration is doing.
func (s *Store) SetGPUCalibrationProgress(ctx context.Context, id int64, progress string) error {
	return s.db.WithContext(ctx).Exec(`UPDATE gpu_calibrations SET progress = ? WHERE id = ? AND status = 'running'`,
		progress, id).Error
}

// FinishGPUCalibration ends a run: done with its result, or failed with errMsg.
func (s *Store) FinishGPUCalibration(ctx context.Context, id int64, result json.RawMessage, errMsg string) error {
	status := CalibrationDone
	if errMsg != "" {
		status = CalibrationFailed
	}
	var res any
	if result != nil {
		res = string(result)
	}
	return s.db.WithContext(ctx).Exec(`UPDATE gpu_calibrations SET status = ?, result = ?::jsonb, error = ?,
		finished_at = now(), progress = '' WHERE id = ?`, status, res, errMsg, id).Error
}

// CancelGPUCalibration cancels a calibration that no worker has claimed yet.
func (s *Store) CancelGPUCalibration(ctx context.Context, id int64) error {
	res := s.db.WithContext(ctx).Exec(`UPDATE gpu_calibrations SET status = 'cancelled', finished_at = now()
		WHERE id = ? AND status = 'requested'`, id)
	if res.Error == nil && res.RowsAffected == 0 {
		return fmt.Errorf("calibration %d is not waiting: %w", id, ErrConflict)
	}
	return res.Error
}

// SaveGPUCalibration stores a finished calibration made outside a worker
// (`dubstudio calibrate`).
func (s *Store) SaveGPUCalibration(ctx context.Context, c *GPUCalibration) error {
	c.Status = CalibrationDone
	if c.Error != "" {
		c.Status = CalibrationFailed
	}
	now := time.Now()
	c.StartedAt, c.FinishedAt = &now, &now
	return s.db.WithContext(ctx).Omit("RequestedAt").Create(c).Error
}

// GPUCalibrationByID returns one calibration.
func (s *Store) GPUCalibrationByID(ctx context.Context, id int64) (*GPUCalibration, error) {
	var c GPUCalibration
	err := s.db.WithContext(ctx).First(&c, id).Error
	return &c, notFound(err, "calibration")
}

// GPUCalibrations lists the newest calibrations first, at most limit.
func (s *Store) GPUCalibrations(ctx context.Context, limit int) ([]GPUCalibration, error) {
	var cs []GPUCalibration
	err := s.db.WithContext(ctx).Order("id DESC").Limit(limit).Find(&cs).Error
	return cs, err
}

// ApplyGPUCalibration puts a finished calibration to use: its GPU runs its
// prediction curve from now on, with the profile it was made with (recreated under
// its old name if it was deleted meanwhile), whose concurrency and long-lane limit become
// concurrency and laneLimit.
func (s *Store) ApplyGPUCalibration(ctx context.Context, userID, id int64, concurrency, laneLimit int) error {
	return s.inTx(ctx, func(tx *gorm.DB) error {
		var c GPUCalibration
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).First(&c, id).Error; err != nil {
			return notFound(err, "calibration")
		}
		if c.Status != CalibrationDone {
			return fmt.Errorf("calibration %d is %s, not done: %w", id, c.Status, ErrConflict)
		}
		if concurrency < 1 {
			return fmt.Errorf("calibration %d recommends no concurrency: %w", id, ErrInvalid)
		}
		laneLimit = min(max(laneLimit, 1), concurrency)
		profileID := int64(0)
		if c.ProfileID != nil {
			profileID = *c.ProfileID
			res := tx.Exec(`UPDATE gpu_profiles SET concurrency = ?, long_lane_limit = ?, updated_by = ?, updated_at = now()
				WHERE id = ?`, concurrency, laneLimit, userRef(userID), profileID)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 0 {
				profileID = 0
			}
		}
		if profileID == 0 {
			p, err := c.ProfileValue()
			if err != nil {
				return fmt.Errorf("calibration %d's profile: %w", id, err)
			}
			if p.Name == "" {
				p.Name = "calibrated " + c.GPUUUID
			}
			if err := tx.Raw(`INSERT INTO gpu_profiles (name, concurrency, reserve_pct, long_text_threshold_sec,
				long_lane_limit, max_gen_seconds, segment_tokens, fp16, emotion_text_model, share_weights, batching, beams,
				kv_cache_gib, s2mel_precision, updated_by)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (name) DO UPDATE SET concurrency = excluded.concurrency, long_lane_limit = excluded.long_lane_limit,
				updated_by = excluded.updated_by, updated_at = now() RETURNING id`,
				p.Name, concurrency, p.ReservePct, p.LongTextThresholdSec, laneLimit, p.MaxGenSeconds, p.SegmentTokens,
				p.FP16, p.EmotionTextModel, p.ShareWeights, p.Batching, p.Beams, p.KVCacheGiB, p.S2melPrecision, userRef(userID)).Scan(&profileID).Error; err != nil {
				return err
			}
			if err := tx.Exec(`UPDATE gpu_calibrations SET profile_id = ? WHERE id = ?`, profileID, id).Error; err != nil {
				return err
			}
		}
		if err := tx.Exec(`INSERT INTO gpu_assignments (gpu_uuid, profile_id, calibration_id, updated_by)
			VALUES (?, ?, ?, ?) ON CONFLICT (gpu_uuid) DO UPDATE SET profile_id = excluded.profile_id,
			calibration_id = excluded.calibration_id, updated_by = excluded.updated_by, updated_at = now()`,
			c.GPUUUID, profileID, id, userRef(userID)).Error; err != nil {
			return err
		}
		return tx.Exec(`UPDATE gpu_calibrations SET applied_at = now(), applied_by = ? WHERE id = ?`, userRef(userID), id).Error
	})
}

// GPUMinute is one GPU's averages and maxima over one minute.
type GPUMinute struct {
	Host         string
	GPUUUID      string `gorm:"column:gpu_uuid"`
	Minute       time.Time
	GPUIndex     int `gorm:"column:gpu_index"`
	Samples      int
	Lost         int
	AvgUsedBytes int64
	MaxUsedBytes int64
	TotalBytes   int64
	AvgUtil      float64
	MaxUtil      int
	AvgTempC     float64 `gorm:"column:avg_temp_c"`
	MaxTempC     int     `gorm:"column:max_temp_c"`
	AvgPowerW    float64 `gorm:"column:avg_power_w"`
	MaxPowerW    float64 `gorm:"column:max_power_w"`
}

// TableName keeps gorm on gpu_history.
func (GPUMinute) TableName() string { return "gpu_history" }

// SaveGPUHistory stores per-minute rows; a minute stored again is replaced.
func (s *Store) SaveGPUHistory(ctx context.Context, rows []GPUMinute) error {
	if len(rows) == 0 {
		return nil
	}
	return s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "host"}, {Name: "gpu_uuid"}, {Name: "minute"}},
		UpdateAll: true,
	}).Create(&rows).Error
}

// GPUHistory returns a GPU's minutes from since on, oldest first.
func (s *Store) GPUHistory(ctx context.Context, uuid string, since time.Time) ([]GPUMinute, error) {
	var rows []GPUMinute
	err := s.db.WithContext(ctx).Where("gpu_uuid = ? AND minute >= ?", uuid, since).Order("minute, host").Find(&rows).Error
	return rows, err
}

// PruneGPUHistory deletes minutes before t and returns how many.
func (s *Store) PruneGPUHistory(ctx context.Context, before time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Exec(`DELETE FROM gpu_history WHERE minute < ?`, before)
	return res.RowsAffected, res.Error
}

// GPULive is the newest state a worker published about its GPUs.
type GPULive struct {
	Worker string
	Host   string
	State  json.RawMessage
	// Age is how long ago the state was published and Silence how long ago its
	// worker's heartbeat was, both by the database's clock.
	Age     time.Duration
	Silence time.Duration
}

// Alive reports whether the worker behind the state is alive.
func (l GPULive) Alive() bool { return WorkerInfo{Silence: l.Silence}.Alive() }

// PublishGPULive replaces a worker's published GPU state. The worker must be
// registered (ErrNotFound otherwise).
func (s *Store) PublishGPULive(ctx context.Context, worker, host string, state json.RawMessage) error {
	res := s.db.WithContext(ctx).Exec(`INSERT INTO gpu_live (worker, host, state)
		SELECT name, ?, ?::jsonb FROM workers WHERE name = ?
		ON CONFLICT (worker) DO UPDATE SET host = excluded.host, state = excluded.state, updated_at = now()`,
		host, string(state), worker)
	if res.Error == nil && res.RowsAffected == 0 {
		return fmt.Errorf("worker %s is not registered: %w", worker, ErrNotFound)
	}
	return res.Error
}

// GPULiveStates returns the state of every registered worker that published one,
// by worker name.
func (s *Store) GPULiveStates(ctx context.Context) ([]GPULive, error) {
	var rows []struct {
		Worker, Host               string
		State                      string
		AgeSeconds, SilenceSeconds float64
	}
	err := s.db.WithContext(ctx).Raw(`SELECT g.worker, g.host, g.state::text AS state,
		` + agoSQL("g.updated_at") + ` AS age_seconds, ` + agoSQL("w.heartbeat_at") + ` AS silence_seconds
		FROM gpu_live g JOIN workers w ON w.name = g.worker ORDER BY g.worker`).Scan(&rows).Error
	out := make([]GPULive, len(rows))
	for i, r := range rows {
		out[i] = GPULive{Worker: r.Worker, Host: r.Host, State: json.RawMessage(r.State),
			Age: durationOf(r.AgeSeconds), Silence: durationOf(r.SilenceSeconds)}
	}
	return out, err
}

// QueueCount is how many River jobs of one queue are in one state.
type QueueCount struct {
	Queue string
	State string
	Count int64
}

// QueueCounts counts River's jobs by queue and state, for /metrics.
func (s *Store) QueueCounts(ctx context.Context) ([]QueueCount, error) {
	var out []QueueCount
	err := s.db.WithContext(ctx).Raw(`SELECT queue, state::text AS state, count(*) AS count FROM river_job
		GROUP BY queue, state ORDER BY queue, state`).Scan(&out).Error
	return out, err
}

// LineStateCounts counts every line by state, for /metrics.
func (s *Store) LineStateCounts(ctx context.Context) (map[LineState]int64, error) {
	var rows []struct {
		State LineState
		Count int64
	}
	err := s.db.WithContext(ctx).Raw(`SELECT state, count(*) AS count FROM lines GROUP BY state`).Scan(&rows).Error
	out := map[LineState]int64{}
	for _, r := range rows {
		out[r.State] = r.Count
	}
	return out, err
}

// SynthesisHistogram counts takes whose synthesis took at most each bound (seconds,
// ascending), with their total and sum of seconds: a cumulative histogram of
// synthesis latency over every take kept but refits (Take.RefitOf), which used no
// GPU, for /metrics.
func (s *Store) SynthesisHistogram(ctx context.Context, bounds []float64) (count uint64, sum float64, buckets map[float64]uint64, err error) {
	var q strings.Builder
	q.WriteString("SELECT count(*), coalesce(sum(synth_ms), 0)::float8")
	for _, b := range bounds {
		fmt.Fprintf(&q, ", count(*) FILTER (WHERE synth_ms <= %d)", int64(b*1000))
	}
	q.WriteString(" FROM takes WHERE refit_of IS NULL")
	vals := make([]any, 2+len(bounds))
	var n int64
	var sumMs float64
	counts := make([]int64, len(bounds))
	vals[0], vals[1] = &n, &sumMs
	for i := range counts {
		vals[2+i] = &counts[i]
	}
	if err := queryRow(s.db.WithContext(ctx), q.String(), nil, vals...); err != nil {
		return 0, 0, nil, err
	}
	buckets = make(map[float64]uint64, len(bounds))
	for i, b := range bounds {
		buckets[b] = uint64(counts[i])
	}
	return uint64(n), sumMs / 1000, buckets, nil
}

// LineSummary names a line without its project: what a GPU seat is rendering.
type LineSummary struct {
	ID        int64
	ProjectID int64
	Text      string
}

// LineSummaries returns the lines with the given ids that exist, by id.
func (s *Store) LineSummaries(ctx context.Context, ids []int64) (map[int64]LineSummary, error) {
	out := map[int64]LineSummary{}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []LineSummary
	err := s.db.WithContext(ctx).Raw(`SELECT id, project_id, text FROM lines WHERE id IN ?`, ids).Scan(&rows).Error
	for _, r := range rows {
		out[r.ID] = r
	}
	return out, err
}

// LineRetries counts the attempts beyond the first of the lines' current renders,
// for /metrics.
func (s *Store) LineRetries(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Raw(`SELECT coalesce(sum(attempts - 1), 0) FROM lines WHERE attempts > 1`).Scan(&n).Error
	return n, err
}
