package ttshost

import (
	"fmt"

	"dubstudio/gpu"
	"dubstudio/internal/simdev"
)

// SimDevice is one simulated GPU for NewSimDriver.
type SimDevice struct {
	UUID   string
	Name   string
	Device *simdev.Device
}

// NewSimDriver returns a Driver over simulated devices: memory and per-process
// memory come from the simulation; utilisation follows the number of processes with
// a request in flight, and temperature and power follow utilisation. It lets a
// machine without a GPU run the whole GPU path (monitor, executor, admin page) on
// the simulator engine.
func NewSimDriver(devs ...SimDevice) gpu.Driver { return simDriver(devs) }

type simDriver []SimDevice

func (simDriver) Init() error     { return nil }
func (simDriver) Shutdown() error { return nil }

func (d simDriver) DeviceCount() (int, error) { return len(d), nil }

func (d simDriver) Device(i int) (gpu.DeviceReader, error) {
	if i < 0 || i >= len(d) {
		return nil, fmt.Errorf("simulated device %d: %w", i, gpu.ErrInvalid)
	}
	return simReader{d[i]}, nil
}

type simReader struct{ d SimDevice }

func (r simReader) UUID() (string, error) { return r.d.UUID, nil }
func (r simReader) Name() (string, error) { return r.d.Name, nil }

func (r simReader) Memory() (gpu.MemoryInfo, error) {
	m := r.d.Device.Read()
	return gpu.MemoryInfo{Total: m.Total, Used: m.Used, Free: m.Free}, nil
}

func (r simReader) util() int { return min(100, 45*r.d.Device.Active()) }

func (r simReader) Utilization() (gpu.Utilization, error) {
	u := r.util()
	return gpu.Utilization{GPU: u, Memory: u / 2}, nil
}

func (r simReader) Temperature() (int, error) { return 34 + r.util()*2/5, nil }

func (r simReader) PowerMilliwatts() (int, error) { return 75_000 + r.util()*5_000, nil }

func (r simReader) ComputeProcesses() ([]gpu.ProcessMemory, error) {
	m := r.d.Device.Read()
	out := make([]gpu.ProcessMemory, len(m.Processes))
	for i, p := range m.Processes {
		out[i] = gpu.ProcessMemory{PID: p.PID, UsedBytes: p.UsedBytes}
	}
	return out, nil
}
