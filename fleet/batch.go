package fleet

import (
	"context"
	"time"

	"dubstudio/gpu"
	"dubstudio/tts"
)

// batchStater is a host that reports its batch (a batching host, protocol 2):
// ttshost.PinnedHost and ttshost.SimHost.
type batchStater interface {
	BatchState(ctx context.Context) (*tts.BatchInfo, error)
}

// batchReadTimeout bounds asking a host for its batch while the state is published.
const batchReadTimeout = time.Second

// readBatches asks each GPU's serving batching host for its batch now, without
// holding s.mu (a host answers over HTTP). A GPU without one, or whose host did not
// answer, is left out.
func (s *GPUs) readBatches() map[string]*gpu.LiveBatch {
	s.mu.Lock()
	pools := map[string]*gpu.Pool{}
	for u, e := range s.gpus {
		if e.profile.Batching && e.calibrating == 0 {
			pools[u] = e.pool
		}
	}
	s.mu.Unlock()
	out := map[string]*gpu.LiveBatch{}
	for u, p := range pools {
		for _, h := range p.Serving() {
			bs, ok := h.(batchStater)
			if !ok {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), batchReadTimeout)
			b, err := bs.BatchState(ctx)
			cancel()
			if err != nil || b == nil {
				continue
			}
			out[u] = liveBatch(b)
			break // one batching host per GPU
		}
	}
	return out
}

func liveBatch(b *tts.BatchInfo) *gpu.LiveBatch {
	return &gpu.LiveBatch{MaxSequences: b.MaxSequences, Beams: b.Beams, Decode: b.Decode, Decoding: b.Decoding, InS2Mel: b.InS2Mel,
		Waiting: b.Waiting, DecodeTokensPerSecond: b.DecodeTokensPerSecond, KVBytesPerToken: b.KVBytesPerToken,
		TokensPerAudioSecond: b.TokensPerSecond, PrefixTokens: b.PrefixTokens,
		ActivationBytesPerSecond: b.ActivationBytesPerSecond, KVCacheBytes: b.KVCacheBytes, KVFreeBytes: b.KVFreeBytes,
		BatchRowsMax: b.BatchRowsMax, Steps: b.Steps,
		DecodeGraphs: b.DecodeGraphs, GraphSteps: b.GraphSteps, GraphPoolBytes: b.GraphPoolBytes,
		PagedAttention: b.PagedAttention, PagedAttentionOff: b.PagedAttentionOff,
		VocoderKernel: b.VocoderKernel, VocoderKernelOff: b.VocoderKernelOff}
}

// batchHistoryGap is how close two readings of a batch may be: a reading sooner
// after the last replaces it, so that extra calls to Live do not crowd the chart.
const batchHistoryGap = 500 * time.Millisecond

// recordBatch keeps e's batch readings of the last recent, oldest first, adding b
// read at now (nil: no batching host serves, and the history is dropped).
func (e *gpuEntry) recordBatch(b *gpu.LiveBatch, now time.Time, recent time.Duration) []gpu.BatchPoint {
	if b == nil {
		e.batchHist = nil
		return nil
	}
	pt := b.PointOf(now)
	if n := len(e.batchHist); n > 0 && pt.T-e.batchHist[n-1].T < batchHistoryGap.Milliseconds() {
		e.batchHist[n-1] = pt
	} else {
		e.batchHist = append(e.batchHist, pt)
	}
	cut := now.Add(-recent).UnixMilli()
	i := 0
	for i < len(e.batchHist) && e.batchHist[i].T < cut {
		i++
	}
	e.batchHist = e.batchHist[i:]
	return append([]gpu.BatchPoint(nil), e.batchHist...)
}
