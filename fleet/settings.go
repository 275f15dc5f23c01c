package fleet

import (
	"errors"
	"fmt"

	"dubstudio/gpu"
	"dubstudio/i18n"
)

// Setting is what Apply puts in force on one GPU.
type Setting struct {
	Profile       gpu.Profile
	Calibration   gpu.Calibration
	ProfileID     int64
	CalibrationID int64
}

// Apply puts a GPU's profile and calibration in force without a restart: the
// executor admits by them at once, the pool grows at once or drains its extra hosts
// first, and a change of the hosts' own settings (fp16, the emotion model, shared
// weights, batching and a batching host's sequences, beams and KV cache) restarts them after their work. A profile that cannot run one synthesis on the
// card with the measured numbers (gpu.CheckFits), or asks for shared weights the
// engine cannot give, is refused and the GPU keeps what it had; the refusal is shown
// with the GPU (Live).
func (s *GPUs) Apply(uuid string, st Setting) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.gpus[uuid]
	if e == nil {
		return fmt.Errorf("GPU %s: %w", uuid, gpu.ErrInvalid)
	}
	if !st.Calibration.Calibrated() && st.Calibration.ResidentBytes == 0 {
		st.Calibration = gpu.DefaultCalibration(st.Profile)
	}
	var snap gpu.GPUSnapshot
	for _, g := range s.exec.Snapshot() {
		if g.UUID == uuid {
			snap = g
		}
	}
	err := gpu.CheckFits(st.Profile, st.Calibration, snap.TotalBytes, snap.ForeignBytes)
	if err == nil && st.Profile.ShareWeights && !s.cfg.ShareWeights {
		err = i18n.Errorf(gpu.ErrInvalid, "gpu.profile.share_unsupported", s.cfg.Engine)
	}
	if err == nil && st.Profile.Batching && !s.cfg.Batching {
		err = i18n.Errorf(gpu.ErrInvalid, "gpu.profile.batch_unsupported", s.cfg.Engine)
	}
	if err != nil {
		if e.problem == nil || e.problem.Key != problemOf(err).Key {
			s.log.Warn("GPU profile refused", "gpu", uuid, "profile", st.Profile.Name, "error", err)
		}
		e.problem = problemOf(err)
		return err
	}
	e.problem = nil
	if e.profile == st.Profile && e.profileID == st.ProfileID && e.calibrationID == st.CalibrationID {
		return nil
	}
	old := e.profile
	if err := s.exec.SetCalibration(uuid, st.Calibration); err != nil {
		return err
	}
	if err := s.exec.SetProfile(uuid, st.Profile); err != nil {
		return err
	}
	e.profile, e.cal, e.profileID, e.calibrationID = st.Profile, st.Calibration, st.ProfileID, st.CalibrationID
	e.pool.SetShareWeights(st.Profile.ShareWeights) // for the hosts started from now on
	s.log.Info("GPU settings applied", "gpu", uuid, "profile", st.Profile.Name, "concurrency", st.Profile.Concurrency,
		"calibration", st.CalibrationID)
	if !s.started || e.calibrating != 0 {
		return nil
	}
	if old.FP16 != st.Profile.FP16 || old.EmotionTextModel != st.Profile.EmotionTextModel ||
		old.ShareWeights != st.Profile.ShareWeights || old.Batching != st.Profile.Batching ||
		(st.Profile.Batching && (old.BeamsOrDefault() != st.Profile.BeamsOrDefault() ||
			old.KVCacheGiB != st.Profile.KVCacheGiB || old.Concurrency != st.Profile.Concurrency ||
			old.S2melPrecisionOrDefault() != st.Profile.S2melPrecisionOrDefault())) {
		s.restartLocked(e)
		return nil
	}
	if !e.restarting {
		e.pool.Resize(st.Profile.Hosts())
	}
	return nil
}

func problemOf(err error) *gpu.Warning {
	var ie *i18n.Error
	if errors.As(err, &ie) {
		return &gpu.Warning{Key: ie.Key, Args: ie.Args}
	}
	var ve *gpu.ValidationError
	if errors.As(err, &ve) && len(ve.Problems) > 0 {
		return &gpu.Warning{Key: ve.Problems[0].Key, Args: ve.Problems[0].Args}
	}
	return &gpu.Warning{Key: "render.internal", Args: []any{err.Error()}}
}

// restartLocked drains and stops a GPU's hosts, then starts them again with the
// current profile.
func (s *GPUs) restartLocked(e *gpuEntry) {
	if e.restarting {
		return
	}
	e.restarting = true
	e.pool.Resize(0)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = waitEmpty(s.runCtx, e.pool)
		s.mu.Lock()
		defer s.mu.Unlock()
		e.restarting = false
		if e.calibrating == 0 {
			e.pool.Resize(e.profile.Hosts())
		}
	}()
}

// LaunchProfile is the profile a GPU's next host starts with: the calibration's
// while one runs, else the GPU's.
func (s *GPUs) LaunchProfile(uuid string) gpu.Profile {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.gpus[uuid]
	if e == nil {
		return gpu.DefaultProfile()
	}
	if e.launchProfile != nil {
		return *e.launchProfile
	}
	return e.profile
}
