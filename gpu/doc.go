// Package gpu owns dubstudio's GPUs: the NVML monitor that reads memory, utilisation,
// temperature and power; the per-GPU concurrency profiles admins edit; the VRAM budget
// and the admission executor that decides when a synthesis may start and where; the
// pools of model-host processes (a process host has one seat, a batching host many);
// and the analysis of calibration runs.
//
// The budget follows docs/design.md: per GPU, budget = total × (1 − reserve) − memory
// held by processes that are not ours, and a request is admitted when what our hosts
// hold plus the predicted peaks of the requests in flight plus its own predicted peak
// stays within it. Predictions come from calibration (the worst peak per audio length)
// times a safety factor that rises after an out-of-memory error and decays after clean
// runs. NVML readings are the ground truth the predictions are checked against: a
// PyTorch host's NVML figure includes its caching allocator's reserve, which ratchets
// up to the largest request it served, so the executor tracks each host's model and
// cache separately, lets a request reuse its host's cache, and asks idle hosts to
// release their caches when that is what keeps work waiting.
//
// Wiring on a worker:
//
//	mon := gpu.NewMonitor(ctx, gpu.MonitorConfig{Logger: log})
//	go mon.Run(ctx)
//	exec := gpu.NewExecutor(gpu.ExecutorConfig{Logger: log})
//	exec.AddMonitoredGPUs(mon, profileAndCalibrationFor) // from the store
//	go exec.Follow(ctx, mon)
//	for each GPU: pool, _ := gpu.NewPool(gpu.PoolConfig{GPU: uuid, Launcher: l, Registry: exec, ...})
//	              pool.Start(ctx, profile.Concurrency)
//	on a profile change: exec.SetProfile(uuid, p); pool.Resize(p.Concurrency)
//
// and for each line: SplitText if it is longer than MaxGenSeconds, then
// lease, err := exec.Acquire(ctx, gpu.Request{...}); synthesize on lease.Handle;
// lease.Done(gpu.Outcome{...}); run again on an error for which IsRetryable is true.
//
// The package has no database access: what must be kept (calibrations, profiles,
// downsampled history, the LiveState a worker publishes) is handed to the caller as
// plain values. Subpackages: ttshost adapts the tts model-host processes and
// simulators to Host (its EngineHost is a Host with a speech engine) and puts
// simulated devices (internal/simdev) behind the monitor (NewSimDriver); calibrate
// drives calibration runs through them. fleet.GPUs is the wiring above in
// production; docs/gpu.md the whole picture.
package gpu
