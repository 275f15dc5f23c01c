package gpu

import (
	"math"
	"testing"

	"dubstudio/i18n"
	"dubstudio/tts"

	"github.com/stretchr/testify/require"
)

func TestProfileValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, DefaultProfile().Validate())

	tests := []struct {
		name   string
		change func(*Profile)
		fields map[string]string // field -> key
	}{
		{"no name", func(p *Profile) { p.Name = "" }, map[string]string{"Name": "gpu.profile.name_required"}},
		{"zero concurrency", func(p *Profile) { p.Concurrency = 0 }, map[string]string{"Concurrency": "gpu.profile.concurrency_min"}},
		{"negative reserve", func(p *Profile) { p.ReservePct = -1 }, map[string]string{"ReservePct": "gpu.profile.reserve_range"}},
		{"reserve over 90", func(p *Profile) { p.ReservePct = 90.5 }, map[string]string{"ReservePct": "gpu.profile.reserve_range"}},
		{"reserve NaN", func(p *Profile) { p.ReservePct = math.NaN() }, map[string]string{"ReservePct": "gpu.profile.reserve_range"}},
		{"reserve 0 and 90 are fine", func(p *Profile) { p.ReservePct = 90 }, nil},
		{"zero lengths", func(p *Profile) { p.LongTextThresholdSec, p.MaxGenSeconds, p.SegmentTokens = 0, -3, 0 },
			map[string]string{"LongTextThresholdSec": "gpu.profile.must_be_positive",
				"MaxGenSeconds": "gpu.profile.must_be_positive", "SegmentTokens": "gpu.profile.must_be_positive"}},
		{"threshold above max gen", func(p *Profile) { p.LongTextThresholdSec = 40 },
			map[string]string{"LongTextThresholdSec": "gpu.profile.threshold_over_max_gen"}},
		{"huge segments", func(p *Profile) { p.SegmentTokens = 1000 }, map[string]string{"SegmentTokens": "gpu.profile.segment_tokens_max"}},
		{"lane over concurrency", func(p *Profile) { p.Concurrency, p.LongLaneLimit = 3, 4 },
			map[string]string{"LongLaneLimit": "gpu.profile.lane_limit_range"}},
		{"lane zero", func(p *Profile) { p.LongLaneLimit = 0 }, map[string]string{"LongLaneLimit": "gpu.profile.lane_limit_range"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := DefaultProfile()
			tt.change(&p)
			err := p.Validate()
			if tt.fields == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalid)
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Len(t, ve.Problems, len(tt.fields))
			for field, key := range tt.fields {
				prob, ok := ve.Field(field)
				require.True(t, ok, "no problem for %s", field)
				require.Equal(t, key, prob.Key)
				require.True(t, i18n.Has(prob.Key))
				require.NotContains(t, prob.In(i18n.ZH), "%!", "arguments match the placeholders")
				require.NotContains(t, prob.In(i18n.EN), "%!")
			}
		})
	}
}

func TestCheckFits(t *testing.T) {
	t.Parallel()
	p := DefaultProfile() // 15% reserve, 30 s max
	cal := DefaultCalibration(p)
	// 5 GiB + (45 + 38*30) MiB = 6.16 GiB; an 8 GB card keeps 6.8 GB.
	require.NoError(t, CheckFits(p, cal, 8e9, 0))

	err := CheckFits(p, cal, 8e9, 1e9) // another process holds 1 GB
	require.ErrorIs(t, err, ErrNeverFits)
	var ie *i18n.Error
	require.ErrorAs(t, err, &ie)
	en := ie.In(i18n.EN)
	require.Contains(t, en, "5.4 GB") // resident, decimal
	require.Contains(t, en, "1.2 GB") // peak of a 30 s line
	require.Contains(t, en, "30 s")   // the length
	require.Contains(t, en, "6.0 GB") // (8e9 - 1e9) * 0.85
	require.Contains(t, en, "8.0 GB") // the card
	require.Contains(t, en, "15% reserve")
	require.Contains(t, en, "1.0 GB held")
	require.NotContains(t, ie.In(i18n.ZH), "%!")

	bad := p
	bad.Concurrency = 0
	require.ErrorIs(t, CheckFits(bad, cal, 80e9, 0), ErrInvalid)

	require.Equal(t, 1, ConcurrencyThatFits(p, cal, 8e9, 0))
	require.Equal(t, 0, ConcurrencyThatFits(p, cal, 8e9, 8e9))
	require.Equal(t, 19, ConcurrencyThatFits(p, cal, 140*GiB, 0)) // 119 GiB / 6.16 GiB
}

func TestDefaultCalibrationWithEmotionModel(t *testing.T) {
	t.Parallel()
	p := DefaultProfile()
	p.EmotionTextModel = true
	require.Greater(t, DefaultCalibration(p).Resident(), DefaultResidentBytes)
	require.Equal(t, DefaultResidentBytes, Calibration{}.Resident())
	require.False(t, Calibration{}.Calibrated())
}

func TestCurve(t *testing.T) {
	t.Parallel()
	def := Calibration{}
	require.Equal(t, 45*MiB, def.PeakBytes(0))
	require.Equal(t, 121*MiB, def.PeakBytes(2))
	require.Equal(t, 501*MiB, def.PeakBytes(12))
	require.Equal(t, 45*MiB, def.PeakBytes(-1))

	cal := Calibration{Points: []CurvePoint{
		{AudioSeconds: 12, PeakBytes: 500 * MiB},
		{AudioSeconds: 2, PeakBytes: 120 * MiB},
		{AudioSeconds: 30, PeakBytes: 1200 * MiB},
		{AudioSeconds: 20, PeakBytes: 400 * MiB}, // noisy: below the 12 s bucket
		{AudioSeconds: 2, PeakBytes: 100 * MiB},  // duplicate bucket: the worst wins
	}}
	require.True(t, cal.Calibrated())
	tests := []struct {
		sec  float64
		want int64
	}{
		{0, 120 * MiB},   // flat below the first bucket
		{2, 120 * MiB},   // exact
		{7, 310 * MiB},   // halfway 2..12
		{12, 500 * MiB},  // exact
		{16, 500 * MiB},  // 12..20 is flat after monotone fix
		{25, 850 * MiB},  // halfway 20..30 (500..1200)
		{30, 1200 * MiB}, // exact
		{40, 1900 * MiB}, // extended with the last slope, 70 MiB/s
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, cal.PeakBytes(tt.sec), "%.0f s", tt.sec)
	}
	one := Calibration{Points: []CurvePoint{{AudioSeconds: 10, PeakBytes: 400 * MiB}}}
	require.Equal(t, 400*MiB, one.PeakBytes(5))
	require.Equal(t, 400*MiB+2*DefaultPeakPerSecond, one.PeakBytes(12))
}

func TestHostsThatFit(t *testing.T) {
	t.Parallel()
	p := DefaultProfile()
	p.ReservePct = 5
	cal := Calibration{ResidentBytes: 4_300_000_000, Points: []CurvePoint{{2, 121_000_000}, {30, 1_185_000_000}}}
	// 15.5 GB: three models and one 30 s line fit under the executor, though three
	// hosts that each kept a 30 s line's cache would not.
	require.Equal(t, 3, HostsThatFit(p, cal, 15_500_000_000, 0))
	require.Equal(t, 2, ConcurrencyThatFits(p, cal, 15_500_000_000, 0))
	require.Zero(t, HostsThatFit(p, cal, 4_000_000_000, 0))
	require.Equal(t, 1, HostsThatFit(p, Calibration{}, 7_000_000_000, 0), "defaults: 5 GiB a host")
	// Three hosts on 15.5 GB leave room for one 30 s line; on 150 GB for all three.
	require.Equal(t, 1, LongLinesThatFit(p, cal, 3, 15_500_000_000, 0))
	require.Equal(t, 3, LongLinesThatFit(p, cal, 3, 150_000_000_000, 0))
	require.Equal(t, 1, LongLinesThatFit(p, cal, 3, 10_000_000_000, 0), "never below one")
}

func TestSharedWeightsFitMoreHosts(t *testing.T) {
	t.Parallel()
	p := DefaultProfile()
	p.ReservePct = 5
	cal := Calibration{ResidentBytes: 5_500_000_000, BorrowerBytes: 700_000_000,
		Points: []CurvePoint{{2, 121_000_000}, {30, 1_185_000_000}}}
	total := 24 * GiB // budget 24.48 GB

	// Each host its own model: four models beside a 30 s line.
	require.Equal(t, 4, HostsThatFit(p, cal, total, 0))
	require.Equal(t, int64(4*5_500_000_000), ModelsBytes(p, cal, 4))

	p.ShareWeights = true
	require.Equal(t, int64(5_500_000_000+3*700_000_000), ModelsBytes(p, cal, 4))
	require.Zero(t, ModelsBytes(p, cal, 0))
	// One model and 25 borrowers beside a 30 s line: (24.48-1.185-5.5)/0.7 = 25.4.
	require.Equal(t, 26, HostsThatFit(p, cal, total, 0))
	// Without caches released: the lender with its line (6.685 GB), then borrowers
	// with one each (1.885 GB): 1 + (24.481 - 6.685) / 1.885 = 10.4.
	require.Equal(t, 10, ConcurrencyThatFits(p, cal, total, 0))
	// Ten hosts hold 11.8 GB and leave room for ten 30 s lines; twenty hold 18.8 GB
	// and leave room for four.
	require.Equal(t, 10, LongLinesThatFit(p, cal, 10, total, 0))
	require.Equal(t, 4, LongLinesThatFit(p, cal, 20, total, 0))

	// A calibration without a borrower's figure counts every host whole.
	unmeasured := cal
	unmeasured.BorrowerBytes = 0
	require.Equal(t, unmeasured.Resident(), unmeasured.Borrower())
	require.Equal(t, 4, HostsThatFit(p, unmeasured, total, 0))
}

func TestBatchingProfileValidation(t *testing.T) {
	t.Parallel()
	p := DefaultProfile()
	require.Zero(t, p.Beams, "the default, in its one form")
	require.Equal(t, tts.DefaultBeams, p.BeamsOrDefault())
	p.Batching, p.Concurrency, p.Beams, p.KVCacheGiB = true, MaxBatchSequences, 1, 20
	require.NoError(t, p.Validate())
	require.Equal(t, 20*GiB, p.KVCacheBytes())
	require.Equal(t, tts.DefaultBeams, Profile{}.BeamsOrDefault(), "a stored 0 means the default")

	fields := func(p Profile) map[string]string {
		var ve *ValidationError
		require.ErrorAs(t, p.Validate(), &ve)
		out := map[string]string{}
		for _, pr := range ve.Problems {
			out[pr.Field] = pr.Key
		}
		return out
	}
	bad := p
	bad.Concurrency, bad.Beams, bad.KVCacheGiB, bad.ShareWeights = MaxBatchSequences+1, MaxBeams+1, -1, true
	require.Equal(t, map[string]string{"Concurrency": "gpu.profile.batch_concurrency_max", "Beams": "gpu.profile.beams_range",
		"KVCacheGiB": "gpu.profile.kv_cache_range", "ShareWeights": "gpu.profile.batching_share"}, fields(bad))
	bad = p
	bad.KVCacheGiB = math.NaN()
	require.Equal(t, map[string]string{"KVCacheGiB": "gpu.profile.kv_cache_range"}, fields(bad))

	// s2mel precision: fp32 by default ("" means it), bf16 on a batching host only.
	require.Equal(t, S2melFP32, DefaultProfile().S2melPrecision)
	require.Equal(t, S2melFP32, Profile{}.S2melPrecisionOrDefault())
	bf16 := p
	bf16.S2melPrecision = S2melBF16
	require.NoError(t, bf16.Validate())
	require.Equal(t, S2melBF16, bf16.S2melPrecisionOrDefault())
	bf16.Batching = false
	require.Equal(t, map[string]string{"S2melPrecision": "gpu.profile.s2mel_needs_batching"}, fields(bf16))
	bad = p
	bad.S2melPrecision = "fp16"
	require.Equal(t, map[string]string{"S2melPrecision": "gpu.profile.s2mel_precision"}, fields(bad))
	var ve *ValidationError
	require.ErrorAs(t, bad.Validate(), &ve)
	pr, _ := ve.Field("S2melPrecision")
	require.Equal(t, "The s2mel precision must be fp32 or bf16.", pr.In(i18n.EN))

	// Without batching, a concurrency over 256 stays allowed (process hosts).
	many := DefaultProfile()
	many.Concurrency, many.LongLaneLimit = 300, 1
	require.NoError(t, many.Validate())
}
