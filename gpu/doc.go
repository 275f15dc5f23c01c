// Package gpu owns dubstudio's GPUs: the NVML monitor that reads memory, utilisation,
// temperature and power; the per-GPU concurrency profiles admins edit; the VRAM budget
// and the admission executor that decides when a synthesis may start and where; the
// pools of model-host processes (slots); and the analysis of calibration runs.
//
// The budget follows docs/design.md: per GPU, budget = total × (1 − reserve) − memory
// held by processes that are not ours, and a request is admitted when what our hosts
// hold plus the predicted peaks of the requests in flight plus its own predicted peak
// stays within it. Predictions come from calibration (the worst peak per audio length)
// times a safety factor that rises after an out-of-memory error and decays after clean
// runs. NVML readings are the ground truth the predictions are checked against.
//
// The package has no database access: what must be kept (calibrations, profiles,
// downsampled history) is handed to the caller as plain values.
package gpu
