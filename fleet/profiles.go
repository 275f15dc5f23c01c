package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"dubstudio/gpu"
	"dubstudio/i18n"
	"dubstudio/studio"
	"dubstudio/tts"
)

// A profile lives in two packages with the same fields: gpu.Profile, which means
// and validates it, and studio.GPUProfileSettings, which stores it (studio is below
// gpu and cannot name gpu.Profile). These two functions are the one conversion
// between them; being Go conversions, they stop compiling when the fields differ.

// ProfileOf is the profile a stored one sets.
func ProfileOf(sp studio.GPUProfile) gpu.Profile { return gpu.Profile(sp.GPUProfileSettings) }

func settingsOf(p gpu.Profile) studio.GPUProfileSettings { return studio.GPUProfileSettings(p) }

// ErrUnknownGPU: no live worker has the GPU.
var ErrUnknownGPU = fmt.Errorf("no live worker has the GPU: %w", gpu.ErrInvalid)

// Profile returns the stored profile id (0: the default profile) and its name ("" for
// the default).
func Profile(ctx context.Context, store *studio.Store, id int64) (gpu.Profile, string, error) {
	if id == 0 {
		return gpu.DefaultProfile(), "", nil
	}
	sp, err := store.GPUProfileByID(ctx, id)
	if err != nil {
		return gpu.Profile{}, "", err
	}
	return ProfileOf(*sp), sp.Name, nil
}

// SaveProfile creates profile p (id 0) or replaces profile id with it. A profile in
// use must still fit the live GPUs it runs on: a misfit is returned and nothing is
// saved. A name another profile has is studio.ErrConflict.
func SaveProfile(ctx context.Context, store *studio.Store, userID, id int64, p gpu.Profile) (*studio.GPUProfile, *Misfit, error) {
	if id != 0 {
		as, err := store.GPUAssignments(ctx)
		if err != nil {
			return nil, nil, err
		}
		var uuids []string
		for _, a := range as {
			if a.ProfileID == id {
				uuids = append(uuids, a.GPUUUID)
			}
		}
		if m, err := CheckFits(ctx, store, p, uuids); err != nil || m != nil {
			return nil, m, err
		}
	}
	sp := &studio.GPUProfile{ID: id, GPUProfileSettings: settingsOf(p)}
	if err := store.SaveGPUProfile(ctx, userID, sp); err != nil {
		return nil, nil, err
	}
	return sp, nil, nil
}

// AssignProfile makes the GPU with uuid run the stored profile id (0: the default),
// unless it cannot fit the GPU with the measured numbers (the misfit is returned).
// It returns the profile's name ("" for the default).
func AssignProfile(ctx context.Context, store *studio.Store, userID int64, uuid string, id int64) (string, *Misfit, error) {
	p, name, err := Profile(ctx, store, id)
	if err != nil {
		return "", nil, err
	}
	if m, err := CheckFits(ctx, store, p, []string{uuid}); err != nil || m != nil {
		return "", m, err
	}
	return name, nil, store.AssignGPUProfile(ctx, userID, uuid, id)
}

// ProfileInput names a profile form's fields (the Go field names of gpu.Profile),
// in form order; the flags are on when their value is not empty; the choices are
// one of a few words (S2melPrecision: gpu.S2melFP32 or gpu.S2melBF16).
var (
	ProfileNumbers = []string{"Concurrency", "ReservePct", "LongTextThresholdSec", "LongLaneLimit", "MaxGenSeconds", "SegmentTokens",
		"Beams", "KVCacheGiB"}
	ProfileFlags   = []string{"FP16", "EmotionTextModel", "ShareWeights", "Batching"}
	ProfileChoices = []string{"S2melPrecision"}
)

// ParseProfile reads a profile from form values keyed by field name ("Name", the
// ProfileNumbers, the ProfileFlags, the ProfileChoices). It returns the profile and a
// problem for every invalid field: not a number, or refused by gpu.Profile.Validate.
// An empty s2mel precision (a form made before it) means fp32.
func ParseProfile(values map[string]string) (gpu.Profile, []gpu.FieldProblem) {
	p := gpu.Profile{Name: values["Name"], FP16: values["FP16"] != "", EmotionTextModel: values["EmotionTextModel"] != "",
		ShareWeights: values["ShareWeights"] != "", Batching: values["Batching"] != "",
		S2melPrecision: cmp.Or(values["S2melPrecision"], gpu.S2melFP32)}
	var probs []gpu.FieldProblem
	bad := map[string]bool{}
	num := func(k string, dst *float64) {
		v, err := strconv.ParseFloat(values[k], 64)
		if err != nil {
			probs, bad[k] = append(probs, gpu.FieldProblem{Field: k, Key: "gpus.profile.not_number"}), true
			return
		}
		*dst = v
	}
	whole := func(k string, dst *int) {
		v, err := strconv.Atoi(values[k])
		if err != nil {
			probs, bad[k] = append(probs, gpu.FieldProblem{Field: k, Key: "gpus.profile.not_number"}), true
			return
		}
		*dst = v
	}
	whole("Concurrency", &p.Concurrency)
	num("ReservePct", &p.ReservePct)
	num("LongTextThresholdSec", &p.LongTextThresholdSec)
	whole("LongLaneLimit", &p.LongLaneLimit)
	num("MaxGenSeconds", &p.MaxGenSeconds)
	whole("SegmentTokens", &p.SegmentTokens)
	// Beams and the KV cache size are optional on forms made before batching: empty
	// means the default. The default's value (the form shows BeamsOrDefault) is kept
	// in its one stored form, 0.
	if values["Beams"] != "" {
		whole("Beams", &p.Beams)
		if p.Beams == tts.DefaultBeams {
			p.Beams = 0
		}
	}
	if values["KVCacheGiB"] != "" {
		num("KVCacheGiB", &p.KVCacheGiB)
	}
	var ve *gpu.ValidationError
	if err := p.Validate(); errors.As(err, &ve) {
		for _, pr := range ve.Problems {
			if !bad[pr.Field] {
				probs = append(probs, pr)
			}
		}
	}
	return p, probs
}

// ProfileValues are a profile's form values, as ParseProfile reads them.
func ProfileValues(p gpu.Profile) map[string]string {
	flag := func(b bool) string {
		if b {
			return "on"
		}
		return ""
	}
	float := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	return map[string]string{"Name": p.Name, "Concurrency": strconv.Itoa(p.Concurrency), "ReservePct": float(p.ReservePct),
		"LongTextThresholdSec": float(p.LongTextThresholdSec), "LongLaneLimit": strconv.Itoa(p.LongLaneLimit),
		"MaxGenSeconds": float(p.MaxGenSeconds), "SegmentTokens": strconv.Itoa(p.SegmentTokens),
		"FP16": flag(p.FP16), "EmotionTextModel": flag(p.EmotionTextModel), "ShareWeights": flag(p.ShareWeights),
		"Batching": flag(p.Batching), "Beams": strconv.Itoa(p.BeamsOrDefault()), "KVCacheGiB": float(p.KVCacheGiB),
		"S2melPrecision": p.S2melPrecisionOrDefault()}
}

// Misfit is a profile refused on a live GPU: it cannot run one synthesis there with the
// measured numbers.
type Misfit struct {
	Card Card
	// Err is gpu.CheckFits's refusal: an *i18n.Error with the numbers, or the
	// profile's *gpu.ValidationError.
	Err error
}

// In says why in lang.
func (m *Misfit) In(lang i18n.Lang) string {
	var ie *i18n.Error
	if errors.As(m.Err, &ie) {
		return i18n.T(lang, "gpus.profile.on_gpu", fmt.Sprintf("%d %s (%s)", m.Card.GPU.Index, m.Card.GPU.Name, m.Card.Host),
			ie.In(lang))
	}
	return m.Err.Error()
}

// CheckFits refuses p on the live GPUs with the given UUIDs when it cannot run one
// synthesis there with the measured numbers (gpu.CheckFits, with the GPU's applied
// calibration or the defaults); GPUs no live worker has are not checked.
func CheckFits(ctx context.Context, store *studio.Store, p gpu.Profile, uuids []string) (*Misfit, error) {
	board, err := ReadBoard(ctx, store)
	if err != nil {
		return nil, err
	}
	for _, cd := range board.Cards {
		if !slices.Contains(uuids, cd.GPU.UUID) {
			continue
		}
		cal, err := calibrationOf(ctx, store, cd.GPU.UUID, p)
		if err != nil {
			return nil, err
		}
		total := cd.GPU.Snapshot.TotalBytes
		if total == 0 {
			total = cd.GPU.TotalBytes
		}
		if err := gpu.CheckFits(p, cal, total, cd.GPU.Snapshot.ForeignBytes); err != nil {
			return &Misfit{Card: cd, Err: err}, nil //nolint:nilerr // a profile that does not fit is the answer, not a failure
		}
	}
	return nil, nil
}

// calibrationOf returns the prediction curve the GPU runs with: its applied
// calibration, or the defaults for p.
func calibrationOf(ctx context.Context, store *studio.Store, uuid string, p gpu.Profile) (gpu.Calibration, error) {
	settings, err := store.GPUSettings(ctx, []string{uuid})
	if err != nil {
		return gpu.Calibration{}, err
	}
	if st, ok := settings[uuid]; ok {
		if r, err := DecodeCalibration(st.Calibration); err == nil && r != nil && r.Calibration.Calibrated() {
			return r.Calibration, nil
		}
	}
	return gpu.DefaultCalibration(p), nil
}
