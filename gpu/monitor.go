package gpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Driver is the part of NVML the monitor uses, small enough to fake. NewNVMLDriver
// adapts go-nvml to it. Implementations turn missing symbols into ErrNotSupported,
// a lost device into ErrGPULost and never panic.
type Driver interface {
	// Init loads the library; an error (wrapping ErrNoGPU) means no other method
	// may be called.
	Init() error
	Shutdown() error
	DeviceCount() (int, error)
	Device(index int) (DeviceReader, error)
}

// DeviceReader reads one device.
type DeviceReader interface {
	UUID() (string, error)
	Name() (string, error)
	Memory() (MemoryInfo, error)
	Utilization() (Utilization, error)
	// Temperature is the core temperature in °C.
	Temperature() (int, error)
	// PowerMilliwatts is the board's power draw.
	PowerMilliwatts() (int, error)
	// ComputeProcesses lists the processes with a CUDA context and their memory.
	ComputeProcesses() ([]ProcessMemory, error)
}

// MemoryInfo is a device's memory in bytes. With the v1 NVML call Reserved is zero
// and Used includes the driver's reservation.
type MemoryInfo struct {
	Total, Used, Free, Reserved int64
}

// Utilization is the percent of time the GPU and its memory were busy over the
// driver's last sample period.
type Utilization struct {
	GPU, Memory int
}

// ProcessMemory is one process's memory on a device, as NVML reports it (for PyTorch,
// the model plus the caching allocator's whole reserve).
type ProcessMemory struct {
	PID       int
	UsedBytes int64
}

// Device describes one GPU found at start.
type Device struct {
	Index      int
	UUID       string
	Name       string
	TotalBytes int64
	// Lost is set once the device stops answering; it stays lost until restart.
	Lost bool
}

// Metric names one reading of a Sample, for Sample.Missing.
type Metric uint8

// Metrics a device may not provide.
const (
	MetricMemory Metric = 1 << iota
	MetricUtilization
	MetricTemperature
	MetricPower
	MetricProcesses
)

// Sample is one reading of one device.
type Sample struct {
	Time  time.Time
	Index int
	UUID  string
	// Lost means the device stopped answering; no other field is meaningful.
	Lost bool

	TotalBytes, UsedBytes, FreeBytes, ReservedBytes int64
	GPUPercent, MemoryPercent                       int
	TemperatureC                                    int
	PowerWatts                                      float64
	Processes                                       []ProcessMemory
	// Missing has a bit set for every reading the device could not give.
	Missing Metric
}

// Has reports whether the sample carries metric m.
func (s Sample) Has(m Metric) bool { return !s.Lost && s.Missing&m == 0 }

// ProcessBytes returns the memory NVML reports for pid, and whether it is listed.
func (s Sample) ProcessBytes(pid int) (int64, bool) {
	for _, p := range s.Processes {
		if p.PID == pid {
			return p.UsedBytes, true
		}
	}
	return 0, false
}

// MonitorConfig configures NewMonitor.
type MonitorConfig struct {
	// Driver reads the GPUs; nil means NVML (or, without cgo, no GPU).
	Driver Driver
	// Interval between samples; default 1 s.
	Interval time.Duration
	// Window is how much history each device's ring keeps for live charts; default
	// 15 minutes.
	Window time.Duration
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Monitor samples the GPUs into an in-memory ring per device. A monitor on a machine
// without a usable driver reports Available() == false and does nothing else.
type Monitor struct {
	cfg    MonitorConfig
	driver Driver
	err    error // why the monitor is unavailable

	mu      sync.Mutex
	devices []*monitoredDevice
	subs    map[int]chan []Sample
	nextSub int
	closed  bool
}

type monitoredDevice struct {
	info    Device
	reader  DeviceReader
	history *ring[Sample]
}

// NewMonitor initialises the driver and lists the devices. It never fails: when the
// library is missing, fails to initialise or finds no device, the monitor reports
// no GPU (Available false, Err says why) and never calls the driver again.
func NewMonitor(ctx context.Context, cfg MonitorConfig) *Monitor {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Window <= 0 {
		cfg.Window = 15 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Monitor{cfg: cfg, subs: map[int]chan []Sample{}}
	drv := cfg.Driver
	if drv == nil {
		drv = defaultDriver()
	}
	if err := safeErr(drv.Init); err != nil {
		m.err = err
		if !errors.Is(err, ErrNoGPU) {
			m.err = fmt.Errorf("%w: %w", ErrNoGPU, err)
		}
		cfg.Logger.InfoContext(ctx, "no GPU", "reason", m.err)
		return m
	}
	m.driver = drv
	if err := m.discover(); err != nil {
		m.err = err
		cfg.Logger.WarnContext(ctx, "no usable GPU", "reason", err)
		_ = safeErr(drv.Shutdown)
		m.driver = nil
		return m
	}
	for _, d := range m.devices {
		cfg.Logger.InfoContext(ctx, "GPU found", "index", d.info.Index, "uuid", d.info.UUID,
			"name", d.info.Name, "total_bytes", d.info.TotalBytes)
	}
	return m
}

func (m *Monitor) discover() error {
	n, err := safe(m.driver.DeviceCount)
	if err != nil {
		return fmt.Errorf("%w: counting devices: %w", ErrNoGPU, err)
	}
	capacity := int(m.cfg.Window / m.cfg.Interval)
	for i := range n {
		r, err := safe(func() (DeviceReader, error) { return m.driver.Device(i) })
		if err != nil {
			m.cfg.Logger.Warn("skipping GPU", "index", i, "error", err)
			continue
		}
		uuid, err := safe(r.UUID)
		if err != nil {
			m.cfg.Logger.Warn("skipping GPU without UUID", "index", i, "error", err)
			continue
		}
		name, _ := safe(r.Name)
		var total int64
		if mem, err := safe(r.Memory); err == nil {
			total = mem.Total
		}
		m.devices = append(m.devices, &monitoredDevice{
			info:    Device{Index: i, UUID: uuid, Name: name, TotalBytes: total},
			reader:  r,
			history: newRing[Sample](capacity),
		})
	}
	if len(m.devices) == 0 {
		return fmt.Errorf("%w: no device answered (driver lists %d)", ErrNoGPU, n)
	}
	return nil
}

// Available reports whether there is at least one GPU to monitor.
func (m *Monitor) Available() bool { return m.err == nil }

// Err says why the monitor is unavailable (wrapping ErrNoGPU), or nil.
func (m *Monitor) Err() error { return m.err }

// Interval returns the sampling interval.
func (m *Monitor) Interval() time.Duration { return m.cfg.Interval }

// Devices lists the GPUs found at start.
func (m *Monitor) Devices() []Device {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Device, len(m.devices))
	for i, d := range m.devices {
		out[i] = d.info
	}
	return out
}

// Run samples every Interval until ctx ends, then shuts the driver down. On a
// monitor without GPU it returns at once.
func (m *Monitor) Run(ctx context.Context) error {
	if !m.Available() {
		return nil
	}
	defer m.Close()
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		m.SampleNow(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Close shuts the driver down; later samples are empty.
func (m *Monitor) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.driver == nil {
		return nil
	}
	m.closed = true
	for id, ch := range m.subs {
		close(ch)
		delete(m.subs, id)
	}
	return safeErr(m.driver.Shutdown)
}

// SampleNow reads every device once, stores the readings in the rings, hands them to
// subscribers and returns them. A device that reports it is lost is marked lost and
// not read again.
func (m *Monitor) SampleNow(ctx context.Context) []Sample {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.driver == nil || m.closed {
		return nil
	}
	now := m.cfg.Now()
	out := make([]Sample, 0, len(m.devices))
	for _, d := range m.devices {
		s := Sample{Time: now, Index: d.info.Index, UUID: d.info.UUID}
		if d.info.Lost {
			s.Lost = true
		} else {
			m.read(ctx, d, &s)
		}
		d.history.push(s)
		out = append(out, s)
	}
	for _, ch := range m.subs {
		// A slow subscriber misses older rounds rather than stalling sampling: the
		// newest round replaces one it has not read.
		select {
		case <-ch:
		default:
		}
		select {
		case ch <- out:
		default:
		}
	}
	return out
}

func (m *Monitor) read(ctx context.Context, d *monitoredDevice, s *Sample) {
	lost := func(err error) bool {
		if !errors.Is(err, ErrGPULost) {
			return false
		}
		d.info.Lost = true
		s.Lost = true
		m.cfg.Logger.ErrorContext(ctx, "GPU lost", "index", d.info.Index, "uuid", d.info.UUID, "error", err)
		return true
	}
	r := d.reader
	mem, err := safe(r.Memory)
	switch {
	case lost(err):
		return
	case err != nil:
		s.Missing |= MetricMemory
	default:
		s.TotalBytes, s.UsedBytes, s.FreeBytes, s.ReservedBytes = mem.Total, mem.Used, mem.Free, mem.Reserved
		if d.info.TotalBytes == 0 {
			d.info.TotalBytes = mem.Total
		}
	}
	util, err := safe(r.Utilization)
	switch {
	case lost(err):
		return
	case err != nil:
		s.Missing |= MetricUtilization
	default:
		s.GPUPercent, s.MemoryPercent = util.GPU, util.Memory
	}
	temp, err := safe(r.Temperature)
	switch {
	case lost(err):
		return
	case err != nil:
		s.Missing |= MetricTemperature
	default:
		s.TemperatureC = temp
	}
	mw, err := safe(r.PowerMilliwatts)
	switch {
	case lost(err):
		return
	case err != nil:
		s.Missing |= MetricPower
	default:
		s.PowerWatts = float64(mw) / 1000
	}
	procs, err := safe(r.ComputeProcesses)
	switch {
	case lost(err):
		return
	case err != nil:
		s.Missing |= MetricProcesses
	default:
		s.Processes = procs
	}
}

// Latest returns the newest sample of the device with uuid.
func (m *Monitor) Latest(uuid string) (Sample, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range m.devices {
		if d.info.UUID == uuid {
			return d.history.last()
		}
	}
	return Sample{}, false
}

// History returns the device's samples taken at or after since, oldest first, for
// live charts; the ring keeps the last Window.
func (m *Monitor) History(uuid string, since time.Time) []Sample {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range m.devices {
		if d.info.UUID != uuid {
			continue
		}
		all := d.history.items()
		for i, s := range all {
			if !s.Time.Before(since) {
				return all[i:]
			}
		}
		return nil
	}
	return nil
}

// ProcessBytes returns the memory NVML last reported for pid on the device with uuid.
func (m *Monitor) ProcessBytes(uuid string, pid int) (int64, bool) {
	s, ok := m.Latest(uuid)
	if !ok || s.Lost {
		return 0, false
	}
	return s.ProcessBytes(pid)
}

// Subscribe returns a channel that receives every round of samples, and a function
// that ends the subscription. A subscriber that falls behind misses rounds but always
// finds the newest.
func (m *Monitor) Subscribe() (<-chan []Sample, func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := make(chan []Sample, 1)
	if m.closed || m.driver == nil {
		close(ch)
		return ch, func() {}
	}
	id := m.nextSub
	m.nextSub++
	m.subs[id] = ch
	return ch, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if c, ok := m.subs[id]; ok {
			close(c)
			delete(m.subs, id)
		}
	}
}

// safe calls f, turning a panic into an error so that a driver bug or a binding that
// panics on a missing symbol cannot take the process down.
func safe[T any](f func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: driver call panicked: %v", ErrNotSupported, r)
		}
	}()
	return f()
}

func safeErr(f func() error) error {
	_, err := safe(func() (struct{}, error) { return struct{}{}, f() })
	return err
}
