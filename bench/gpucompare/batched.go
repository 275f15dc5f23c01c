package main

import (
	"context"
	"fmt"
	"time"

	"dubstudio/fleet"
	"dubstudio/gpu"
)

// batchOptions shape the batched method's one host.
type batchOptions struct {
	maxSequences, beams int
	kvCacheGiB          float64
	// s2melPrecision is the profile's s2mel precision (gpu.S2melFP32 or S2melBF16):
	// the worker starts the host with --s2mel-dtype from it, after the -host flags.
	s2melPrecision string
}

// batchProfile is the profile of the batched method: the default profile with one
// batching host of o.maxSequences sequences, o.beams beams and o.kvCacheGiB of KV
// cache (0: the host's own size). The long lane takes up to half the sequences.
func batchProfile(base gpu.Profile, o batchOptions) gpu.Profile {
	p := base
	p.Name, p.ShareWeights, p.Batching = "batched", false, true
	p.Concurrency, p.Beams, p.KVCacheGiB, p.S2melPrecision = o.maxSequences, o.beams, o.kvCacheGiB, o.s2melPrecision
	p.LongLaneLimit = max(o.maxSequences/2, 1)
	return p
}

// batched runs the lines through the executor on one batching host (protocol 2):
// the worker's GPUs with the batching profile, uncalibrated (the executor
// charges each line the activations the host's health predicts), as many lines at
// once as River hands the worker.
func (r *rig) batched(ctx context.Context, o batchOptions) *result {
	p := batchProfile(r.profile, o)
	mon := r.newMonitor(ctx)
	res := &result{Situation: r.situation, Method: "batched", Lines: len(r.lines), Hosts: 1, Sequences: p.Concurrency,
		Profile: &p, BaselineBytes: usedNow(mon, r.dev.UUID)}
	if err := p.Validate(); err != nil {
		res.StartError = err.Error()
		mon.Close()
		return res
	}
	r.setBatch(p)
	defer r.setBatch(gpu.Profile{})
	gpus, err := fleet.NewGPUs(fleet.GPUsConfig{Engine: "bench", Monitor: mon,
		GPUs: []gpu.Device{r.dev}, Launcher: r.launcher, TokensPerSecond: r.tps, Batching: true})
	if err != nil {
		res.StartError = err.Error()
		return res
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = gpus.Stop(sctx)
	}()
	if err := gpus.Apply(r.dev.UUID, fleet.Setting{Profile: p}); err != nil {
		res.StartError = fmt.Sprintf("applying the batching profile: %v", err)
		return res
	}
	gpus.Start(ctx)
	// One host serves every sequence: a few warm-up lines suffice.
	return r.renderThroughPermits(ctx, gpus, mon, res, 1, min(p.Concurrency, 8))
}

// setBatch makes the hosts the rig launches from now on batching hosts of p (the
// zero profile: process hosts again).
func (r *rig) setBatch(p gpu.Profile) {
	r.batchMu.Lock()
	defer r.batchMu.Unlock()
	r.batch = p
}

// batchOf is the profile setBatch set.
func (r *rig) batchOf() gpu.Profile {
	r.batchMu.Lock()
	defer r.batchMu.Unlock()
	return r.batch
}
