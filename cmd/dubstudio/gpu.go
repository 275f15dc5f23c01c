package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"dubstudio/config"
	"dubstudio/fleet"
	"dubstudio/gpu"
	"dubstudio/gpu/calibrate"
	"dubstudio/gpu/ttshost"
	"dubstudio/internal/simdev"
	"dubstudio/studio"
	"dubstudio/tts"
)

// GPU engines: the model hosts run on GPUs under the VRAM-budgeted executor.
const (
	engineIndexTTS  = "indextts"
	engineBench     = "bench"
	engineSimulator = "simulator"
)

// simulatedGPU is the UUID of the simulator engine's simulated card.
const simulatedGPU = "GPU-simulated-0"

// hostCommand is the argv of a model host for engine with profile p.
func hostCommand(cfg *config.Config, engine string, p gpu.Profile) []string {
	switch engine {
	case engineBench:
		dtype := "fp32"
		if p.FP16 {
			dtype = "fp16"
		}
		return append([]string{cfg.HostPython, filepath.Join(cfg.HostsDir, "bench_host.py"), "--gpt-dtype", dtype},
			ttshost.BatchArgs(p)...)
	default:
		argv := []string{cfg.HostPython, filepath.Join(cfg.HostsDir, "indextts_host.py"),
			"--model-dir", cfg.IndexTTSModelDir, "--variant", cfg.IndexTTSVariant,
			"--model-version", cfg.IndexTTSModelVersion}
		if p.FP16 {
			argv = append(argv, "--fp16")
		}
		if p.EmotionTextModel {
			argv = append(argv, "--qwen-emo")
		} else {
			argv = append(argv, "--no-qwen-emo")
		}
		return append(argv, ttshost.BatchArgs(p)...)
	}
}

// hostEnv is the environment model hosts get on top of the worker's: IndexTTS is
// kept off the network (its helpers must be installed, docs/engines.md) and finds
// its checkout.
func hostEnv(cfg *config.Config, engine string) []string {
	env := []string{"PYTHONUNBUFFERED=1"}
	if engine == engineIndexTTS {
		env = append(env, "HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1", "USE_MODELSCOPE=false")
		if cfg.IndexTTSDir != "" {
			pp := cfg.IndexTTSDir
			if old := os.Getenv("PYTHONPATH"); old != "" {
				pp += string(os.PathListSeparator) + old
			}
			env = append(env, "PYTHONPATH="+pp)
		}
	}
	return env
}

// sharesWeights reports whether engine's hosts can share one copy of the weights
// on a GPU (gpu.Profile.ShareWeights): the bench host and the simulator can; the
// IndexTTS host cannot yet (docs/engines.md).
func sharesWeights(engine string) bool { return engine == engineBench || engine == engineSimulator }

// batches reports whether engine's hosts can batch (gpu.Profile.Batching, protocol
// 2): the bench host (bench_host.py --batch) and the IndexTTS host (indextts_host.py
// --batch, the adapter in indextts_batching.py; docs/engines.md says what of it has
// run against real weights).
func batches(engine string) bool { return engine == engineBench || engine == engineIndexTTS }

// hostPool is the pool settings of the configuration (HOST_*_TIMEOUT).
func hostPool(cfg *config.Config) gpu.PoolConfig {
	return gpu.PoolConfig{StartTimeout: cfg.HostStartTimeout, HealthTimeout: cfg.HostHealthTimeout,
		StopTimeout: cfg.HostStopTimeout}
}

// tokensPerSecond is the engine's mel tokens per second of audio.
func tokensPerSecond(cfg *config.Config, engine string) float64 {
	if engine == engineIndexTTS && cfg.IndexTTSVariant == "2.5" {
		return 25
	}
	return 50
}

// gpuSetup is a monitor over the GPUs an engine runs on, and how to start hosts there.
type gpuSetup struct {
	monitor   *gpu.Monitor
	simulated map[string]*simdev.Device // the simulator engine's devices
}

// openGPUs opens the monitor for engine: NVML for the real engines, a simulated
// 24 GiB card for the simulator. With NVML it may report no GPU (Available false).
func openGPUs(ctx context.Context, engine string, logger *slog.Logger) gpuSetup {
	if engine == engineSimulator {
		dev := simdev.New(24 * gpu.GiB)
		m := gpu.NewMonitor(ctx, gpu.MonitorConfig{Logger: logger,
			Driver: ttshost.NewSimDriver(ttshost.SimDevice{UUID: simulatedGPU, Name: "Simulated GPU (24 GiB)", Device: dev})})
		return gpuSetup{monitor: m, simulated: map[string]*simdev.Device{simulatedGPU: dev}}
	}
	return gpuSetup{monitor: gpu.NewMonitor(ctx, gpu.MonitorConfig{Logger: logger})}
}

// launcher starts the engine's hosts; profileOf gives the profile a GPU's hosts
// start with (their flags, such as fp16, come from it).
func (g gpuSetup) launcher(cfg *config.Config, engine string, profileOf func(uuid string) gpu.Profile, logger *slog.Logger) gpu.HostLauncher {
	if g.simulated != nil {
		return &ttshost.SimLauncher{Devices: g.simulated,
			Config: tts.SimulatorConfig{TokensPerSecond: 110, FollowTarget: true, Tone: true}}
	}
	m := g.monitor
	return ttshost.NewLauncher(ttshost.LauncherConfig{
		Name: engine,
		Command: func(o gpu.LaunchOpts) ([]string, error) {
			return hostCommand(cfg, engine, profileOf(o.GPU)), nil
		},
		Env: hostEnv(cfg, engine),
		// A fresh reading: a figure a second old may predate the host's last request.
		ProcessBytes: func(uuid string, pid int) (int64, bool) {
			for _, s := range m.SampleNow(context.Background()) {
				if s.UUID == uuid {
					return s.ProcessBytes(pid)
				}
			}
			return 0, false
		},
		Stderr: func(o gpu.LaunchOpts) io.Writer {
			return hostLog{logger: logger, id: o.ID}
		},
	})
}

// hostLog passes a model host's stderr lines to the worker's log.
type hostLog struct {
	logger *slog.Logger
	id     string
}

func (h hostLog) Write(p []byte) (int, error) {
	h.logger.Debug("model host", "host", h.id, "out", string(p))
	return len(p), nil
}

// selectGPUs keeps the devices named in want (indices or UUIDs); empty keeps all.
func selectGPUs(devs []gpu.Device, want []string) []gpu.Device {
	if len(want) == 0 {
		return devs
	}
	var out []gpu.Device
	for _, d := range devs {
		if slices.Contains(want, d.UUID) || slices.Contains(want, strconv.Itoa(d.Index)) {
			out = append(out, d)
		}
	}
	return out
}

// gpusCmd runs `dubstudio gpus`: what NVML sees, one sample per GPU, as JSON.
func gpusCmd(ctx context.Context, logger *slog.Logger) error {
	m := gpu.NewMonitor(ctx, gpu.MonitorConfig{Logger: logger})
	defer m.Close()
	out := map[string]any{"available": m.Available()}
	if err := m.Err(); err != nil {
		out["reason"] = err.Error()
	}
	type reading struct {
		gpu.Device
		Sample gpu.Sample `json:"sample"`
		// MemoryV2: the driver answered nvmlDeviceGetMemoryInfo_v2 (reserved memory
		// is reported apart from used).
		MemoryV2 bool `json:"memory_v2"`
	}
	var rs []reading
	samples := m.SampleNow(ctx)
	for i, d := range m.Devices() {
		r := reading{Device: d}
		if i < len(samples) {
			r.Sample, r.MemoryV2 = samples[i], samples[i].ReservedBytes > 0
		}
		rs = append(rs, r)
	}
	out["gpus"] = rs
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("writing the readings: %w", err)
	}
	return nil
}

// gpuWorker is the GPU side of a worker: its GPUs (the worker's Permits) and the
// agent that connects them to the database (registry, live state, history,
// profiles, calibrations).
type gpuWorker struct {
	gpus      *fleet.GPUs
	agent     *fleet.Agent
	logger    *slog.Logger
	stopAgent context.CancelFunc
	agentDone chan struct{}
}

// gpuEngine picks the GPU engine cfg asks for: "" for a CPU engine, or when
// ENGINE=auto finds no GPU (or no IndexTTS model to run on one).
func gpuEngine(ctx context.Context, cfg *config.Config, logger *slog.Logger) (string, gpuSetup, error) {
	switch cfg.Engine {
	case engineIndexTTS, engineBench:
		g := openGPUs(ctx, cfg.Engine, logger)
		if !g.monitor.Available() {
			return "", g, fmt.Errorf("ENGINE=%s needs an NVIDIA GPU: %w", cfg.Engine, g.monitor.Err())
		}
		return cfg.Engine, g, nil
	case engineSimulator:
		return engineSimulator, openGPUs(ctx, engineSimulator, logger), nil
	case "auto":
		if cfg.IndexTTSModelDir == "" {
			return "", gpuSetup{}, nil
		}
		g := openGPUs(ctx, engineIndexTTS, logger)
		if !g.monitor.Available() {
			logger.InfoContext(ctx, "no GPU: the CPU preview engine renders", "reason", g.monitor.Err())
			_ = g.monitor.Close()
			return "", gpuSetup{}, nil
		}
		return engineIndexTTS, g, nil
	}
	return "", gpuSetup{}, nil
}

// newGPUWorker builds the GPUs of cfg's engine, with the stored profiles and
// calibrations in force, and starts the hosts; nil when the worker runs a CPU engine.
func newGPUWorker(ctx context.Context, cfg *config.Config, store *studio.Store, logger *slog.Logger) (*gpuWorker, error) {
	engine, setup, err := gpuEngine(ctx, cfg, logger)
	if err != nil || engine == "" {
		return nil, err
	}
	devs := selectGPUs(setup.monitor.Devices(), cfg.GPUs)
	if len(devs) == 0 {
		_ = setup.monitor.Close()
		return nil, fmt.Errorf("GPUS=%v names none of the GPUs found", cfg.GPUs)
	}
	var gpus *fleet.GPUs
	scfg := fleet.GPUsConfig{Engine: engine, Monitor: setup.monitor, GPUs: devs, Simulated: setup.simulated != nil,
		TokensPerSecond: tokensPerSecond(cfg, engine), Logger: logger, ShareWeights: sharesWeights(engine),
		Batching: batches(engine), Pool: hostPool(cfg),
		Launcher: setup.launcher(cfg, engine, func(uuid string) gpu.Profile { return gpus.LaunchProfile(uuid) }, logger)}
	if setup.simulated != nil {
		scfg.Memory = func(uuid string) calibrate.DeviceMemory { return simulatedMemory{setup.simulated[uuid]} }
	}
	gpus, err = fleet.NewGPUs(scfg)
	if err != nil {
		_ = setup.monitor.Close()
		return nil, err
	}
	agent := fleet.NewAgent(store, gpus, fleet.AgentConfig{Worker: cfg.WorkerName, Logger: logger})
	if err := agent.ApplySettings(ctx); err != nil {
		logger.WarnContext(ctx, "reading the GPUs' profiles", "err", err)
	}
	// The hosts live until the worker has stopped (not until the signal): running
	// lines finish on them.
	gpus.Start(context.WithoutCancel(ctx))
	for _, d := range devs {
		logger.InfoContext(ctx, "GPU ready", "engine", engine, "gpu", d.Index, "uuid", d.UUID, "name", d.Name,
			"profile", gpus.LaunchProfile(d.UUID).Name, "concurrency", gpus.LaunchProfile(d.UUID).Concurrency)
	}
	return &gpuWorker{gpus: gpus, agent: agent, logger: logger}, nil
}

// run starts the agent (once the worker is registered).
func (g *gpuWorker) run(ctx context.Context) {
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g.stopAgent, g.agentDone = cancel, make(chan struct{})
	go func() { defer close(g.agentDone); g.agent.Run(actx) }()
}

// stop ends the agent, then drains and stops the hosts.
func (g *gpuWorker) stop(ctx context.Context) {
	if g.stopAgent != nil {
		g.stopAgent()
		<-g.agentDone
	}
	if err := g.gpus.Stop(ctx); err != nil {
		g.logger.Error("stopping the model hosts", "err", err)
	}
}
