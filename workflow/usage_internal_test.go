package workflow

import (
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/tts"
)

// meteredTestPermit is a permit admitted by a prediction, as a GPU lease is.
type meteredTestPermit struct {
	localPermit
	usage PermitUsage
}

func (m meteredTestPermit) Usage() PermitUsage { return m.usage }

// A version-1 host's stage times, a batching host's account of the line, and a
// metered permit's prediction and measurement each land in their own field; a
// local permit (the CPU) leaves the memory and the GPU empty.
func TestTakeUsageFromTheResultAndThePermit(t *testing.T) {
	t.Parallel()
	v1 := tts.Result{Stages: map[string]float64{"queue": 0.25, "gpt": 1.5004, "s2mel": 0.3, "vocoder": 0.0456, "total": 2.2}}
	local := localPermit{}
	require.Equal(t, studio.TakeUsage{HostQueueMs: 250, GPTMs: 1500, S2MelMs: 300, VocoderMs: 46}, takeUsage(v1, local))

	gpu := meteredTestPermit{usage: PermitUsage{PredictedBytes: 18_000_000, MeasuredBytes: 17_000_000, GPUIndex: 2}}
	got := takeUsage(v1, gpu)
	require.Equal(t, int64(18_000_000), got.PredictedVRAMBytes)
	require.Equal(t, int64(17_000_000), got.MeasuredVRAMBytes)
	require.NotNil(t, got.GPUIndex)
	require.Equal(t, 2, *got.GPUIndex)

	batched := tts.Result{Stages: map[string]float64{"queue": 9, "gpt": 9}, Sequence: &tts.SequenceInfo{KVBytes: 23_000_000,
		ActivationBytes: 17_000_000, QueueSeconds: 0.4, GPTSeconds: 2.4, S2MelWaitSeconds: 0.7, S2MelSeconds: 0.45,
		VocoderSeconds: 0.12,
		BatchRowsMean:  37.5, S2MelGroup: 4}}
	got = takeUsage(batched, gpu)
	got.GPUIndex = nil
	require.Equal(t, studio.TakeUsage{PredictedVRAMBytes: 18_000_000, MeasuredVRAMBytes: 17_000_000, KVBytes: 23_000_000,
		ActivationBytes: 17_000_000, HostQueueMs: 400, GPTMs: 2400, S2MelWaitMs: 700, S2MelMs: 450, VocoderMs: 120,
		BatchRowsMean: 37.5,
		S2MelGroup:    4}, got, "the sequence's own figures, not the stages")
}
