package gpu

import "time"

// LiveState is what a worker publishes about its GPUs every few seconds (as JSON,
// through the store), so that the web app on any machine can show every GPU of every
// worker host and export them to /metrics.
type LiveState struct {
	Worker string    `json:"worker"`
	Host   string    `json:"host"`
	At     time.Time `json:"at"`
	// Engine is the worker's speech engine ("indextts", "bench", "simulator", ...).
	Engine string `json:"engine"`
	// NoGPU says why the worker schedules no GPU ("" when it does): no driver, no
	// device, or a CPU engine chosen.
	NoGPU string `json:"no_gpu,omitempty"`
	// Simulated: the GPUs are simulated devices (the simulator engine).
	Simulated bool `json:"simulated,omitempty"`
	// Waiting is how many requests wait for a seat; NeverFits how many were refused
	// since the worker started.
	Waiting   int       `json:"waiting"`
	NeverFits uint64    `json:"never_fits"`
	GPUs      []LiveGPU `json:"gpus"`
}

// LiveGPU is one GPU of a LiveState.
type LiveGPU struct {
	Device
	// Latest is the newest sample; Recent the samples of the last minutes, oldest
	// first (the latest included).
	Latest    *Point          `json:"latest,omitempty"`
	Recent    []Point         `json:"recent,omitempty"`
	Processes []ProcessMemory `json:"processes,omitempty"`
	// Snapshot is the executor's view: profile, budget, commitments, hosts and
	// seats with what each runs.
	Snapshot GPUSnapshot  `json:"snapshot"`
	Counters GPUCounters  `json:"counters"`
	Pool     []HostStatus `json:"pool,omitempty"`
	// ProfileID is the stored profile the GPU runs (0: the default profile);
	// CalibrationID the calibration whose curve it predicts with (0: defaults).
	ProfileID     int64 `json:"profile_id,omitempty"`
	CalibrationID int64 `json:"calibration_id,omitempty"`
	// ProfileProblem says why the assigned profile is not applied (it cannot fit one
	// synthesis, or is invalid), as a catalog message.
	ProfileProblem *Warning `json:"profile_problem,omitempty"`
	// Calibrating is the calibration running on the GPU now (0: none); its hosts
	// replace the pool's meanwhile.
	Calibrating int64 `json:"calibrating,omitempty"`
}

// Point is one sample, compact for charts and JSON.
type Point struct {
	// T is the sample's time in Unix milliseconds.
	T          int64   `json:"t"`
	UsedBytes  int64   `json:"used"`
	TotalBytes int64   `json:"total"`
	GPUPercent int     `json:"util"`
	TempC      int     `json:"temp"`
	PowerWatts float64 `json:"power"`
	Lost       bool    `json:"lost,omitempty"`
	// Missing has a bit set for every reading the device could not give.
	Missing Metric `json:"missing,omitempty"`
}

// PointOf makes a Point of a Sample.
func PointOf(s Sample) Point {
	return Point{T: s.Time.UnixMilli(), UsedBytes: s.UsedBytes, TotalBytes: s.TotalBytes, GPUPercent: s.GPUPercent,
		TempC: s.TemperatureC, PowerWatts: s.PowerWatts, Lost: s.Lost, Missing: s.Missing}
}

// Has reports whether the point carries metric m.
func (p Point) Has(m Metric) bool { return !p.Lost && p.Missing&m == 0 }
