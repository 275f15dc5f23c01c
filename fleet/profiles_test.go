package fleet_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/fleet"
	"dubstudio/gpu"
	"dubstudio/studio"
	"dubstudio/tts"
)

func TestParseProfileRoundTrips(t *testing.T) {
	t.Parallel()
	p := gpu.DefaultProfile()
	p.ShareWeights = true
	got, probs := fleet.ParseProfile(fleet.ProfileValues(p))
	require.Empty(t, probs)
	require.Equal(t, p, got)
}

func TestParseProfileNamesEveryBadField(t *testing.T) {
	t.Parallel()
	v := fleet.ProfileValues(gpu.DefaultProfile())
	v["Name"], v["Concurrency"], v["ReservePct"] = "", "two", "95"
	_, probs := fleet.ParseProfile(v)
	keys := map[string]string{}
	for _, pr := range probs {
		if _, seen := keys[pr.Field]; !seen {
			keys[pr.Field] = pr.Key
		}
	}
	require.Equal(t, map[string]string{"Name": "gpu.profile.name_required", "Concurrency": "gpus.profile.not_number",
		"ReservePct": "gpu.profile.reserve_range"}, keys)
}

func TestProfileOfAStoredProfile(t *testing.T) {
	t.Parallel()
	sp := studio.GPUProfile{ID: 7, GPUProfileSettings: studio.GPUProfileSettings{Name: "h200", Concurrency: 8, ReservePct: 10,
		LongTextThresholdSec: 15, LongLaneLimit: 2, MaxGenSeconds: 30, SegmentTokens: 120, FP16: true, ShareWeights: true}}
	p := fleet.ProfileOf(sp)
	require.Equal(t, gpu.Profile{Name: "h200", Concurrency: 8, ReservePct: 10, LongTextThresholdSec: 15, LongLaneLimit: 2,
		MaxGenSeconds: 30, SegmentTokens: 120, FP16: true, ShareWeights: true}, p)
}

func TestDecodeCalibrationOfNothing(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"", "null"} {
		r, err := fleet.DecodeCalibration([]byte(raw))
		require.NoError(t, err)
		require.Nil(t, r)
	}
	_, err := fleet.DecodeCalibration([]byte("{"))
	require.Error(t, err)
}

func TestParseProfileBatching(t *testing.T) {
	t.Parallel()
	p := gpu.DefaultProfile()
	p.Batching, p.Concurrency, p.Beams, p.KVCacheGiB = true, 64, 1, 12.5
	got, probs := fleet.ParseProfile(fleet.ProfileValues(p))
	require.Empty(t, probs)
	require.Equal(t, p, got)

	// A form made before batching (no beams, no KV cache) gets the defaults.
	v := fleet.ProfileValues(gpu.DefaultProfile())
	delete(v, "Beams")
	delete(v, "KVCacheGiB")
	got, probs = fleet.ParseProfile(v)
	require.Empty(t, probs)
	require.Equal(t, tts.DefaultBeams, got.BeamsOrDefault())
	require.Zero(t, got.KVCacheGiB)

	v = fleet.ProfileValues(p)
	v["Beams"], v["KVCacheGiB"] = "many", "9999"
	_, probs = fleet.ParseProfile(v)
	keys := map[string]string{}
	for _, pr := range probs {
		keys[pr.Field] = pr.Key
	}
	require.Equal(t, map[string]string{"Beams": "gpus.profile.not_number", "KVCacheGiB": "gpu.profile.kv_cache_range"}, keys)
}

func TestParseProfileS2melPrecision(t *testing.T) {
	t.Parallel()
	p := gpu.DefaultProfile()
	p.Batching, p.Concurrency, p.S2melPrecision = true, 32, gpu.S2melBF16
	v := fleet.ProfileValues(p)
	require.Equal(t, "bf16", v["S2melPrecision"])
	got, probs := fleet.ParseProfile(v)
	require.Empty(t, probs)
	require.Equal(t, p, got)

	// A form made before the setting gets fp32.
	delete(v, "S2melPrecision")
	got, probs = fleet.ParseProfile(v)
	require.Empty(t, probs)
	require.Equal(t, gpu.S2melFP32, got.S2melPrecision)

	for value, key := range map[string]string{"fp16": "gpu.profile.s2mel_precision", "bf16": "gpu.profile.s2mel_needs_batching"} {
		v := fleet.ProfileValues(gpu.DefaultProfile())
		v["S2melPrecision"] = value
		_, probs := fleet.ParseProfile(v)
		require.Len(t, probs, 1, value)
		require.Equal(t, "S2melPrecision", probs[0].Field)
		require.Equal(t, key, probs[0].Key)
	}
}
