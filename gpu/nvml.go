//go:build cgo

package gpu

import (
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func defaultDriver() Driver { return NewNVMLDriver(nvml.New()) }

// NewNVMLDriver adapts a go-nvml library (nvml.New(), or a mock from pkg/nvml/mock)
// to Driver.
//
// go-nvml opens libnvidia-ml lazily and calls C functions by name: calling a symbol
// the installed driver lacks would abort the process, not return an error. So every
// call first asks the library (Extensions().LookupSymbol) whether the symbol exists,
// and skips it with ErrNotSupported when it does not; panics in the binding are
// recovered and returned as errors.
func NewNVMLDriver(lib nvml.Interface) Driver {
	return &nvmlDriver{lib: lib, symbols: map[string]bool{}}
}

type nvmlDriver struct {
	lib nvml.Interface

	mu      sync.Mutex
	symbols map[string]bool
	noV2    bool // GetMemoryInfo_v2 failed as unsupported once: use v1 from now on
}

// has reports whether the library exports at least one of names. Where the library
// cannot say (a mock without extensions), the symbol is assumed present and the call
// is left to the panic guard.
func (d *nvmlDriver) has(names ...string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range names {
		ok, seen := d.symbols[n]
		if !seen {
			err := safeErr(func() error {
				ext := d.lib.Extensions()
				if ext == nil {
					return nil
				}
				return ext.LookupSymbol(n)
			})
			ok = err == nil
			d.symbols[n] = ok
		}
		if ok {
			return true
		}
	}
	return false
}

// nvmlErr maps an NVML return code to this package's sentinels.
func nvmlErr(op string, ret nvml.Return) error {
	switch ret {
	case nvml.SUCCESS:
		return nil
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		return fmt.Errorf("nvml %s: %s: %w", op, retName(ret), ErrNotSupported)
	case nvml.ERROR_GPU_IS_LOST:
		return fmt.Errorf("nvml %s: %s: %w", op, retName(ret), ErrGPULost)
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_UNINITIALIZED,
		nvml.ERROR_NO_PERMISSION:
		return fmt.Errorf("nvml %s: %s: %w", op, retName(ret), ErrNoGPU)
	default:
		return fmt.Errorf("nvml %s: %s", op, retName(ret))
	}
}

// retName renders a return code without trusting the library's ErrorString, which
// is itself a C call.
func retName(ret nvml.Return) (s string) {
	defer func() {
		if recover() != nil {
			s = fmt.Sprintf("NVML error %d", int32(ret))
		}
	}()
	return fmt.Sprintf("%s (%d)", ret.Error(), int32(ret))
}

func (d *nvmlDriver) missing(op string) error {
	return fmt.Errorf("nvml %s: symbol missing from the installed driver: %w", op, ErrNotSupported)
}

func (d *nvmlDriver) Init() error {
	ret, err := safe(func() (nvml.Return, error) { return d.lib.Init(), nil })
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoGPU, err)
	}
	if ret != nvml.SUCCESS {
		return fmt.Errorf("%w: nvml init: %s", ErrNoGPU, retName(ret))
	}
	return nil
}

func (d *nvmlDriver) Shutdown() error {
	ret, err := safe(func() (nvml.Return, error) { return d.lib.Shutdown(), nil })
	if err != nil {
		return err
	}
	return nvmlErr("shutdown", ret)
}

func (d *nvmlDriver) DeviceCount() (int, error) {
	if !d.has("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount") {
		return 0, d.missing("device count")
	}
	return call2("device count", d.lib.DeviceGetCount)
}

func (d *nvmlDriver) Device(index int) (DeviceReader, error) {
	if !d.has("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex") {
		return nil, d.missing("device handle")
	}
	h, err := call2("device handle", func() (nvml.Device, nvml.Return) { return d.lib.DeviceGetHandleByIndex(index) })
	if err != nil {
		return nil, err
	}
	return &nvmlDevice{d: d, h: h}, nil
}

// call2 runs one binding call under the panic guard and maps its return code.
func call2[T any](op string, f func() (T, nvml.Return)) (T, error) {
	return safe(func() (T, error) {
		v, ret := f()
		if err := nvmlErr(op, ret); err != nil {
			var zero T
			return zero, err
		}
		return v, nil
	})
}

type nvmlDevice struct {
	d *nvmlDriver
	h nvml.Device
}

func (v *nvmlDevice) UUID() (string, error) {
	if !v.d.has("nvmlDeviceGetUUID") {
		return "", v.d.missing("uuid")
	}
	return call2("uuid", v.h.GetUUID)
}

func (v *nvmlDevice) Name() (string, error) {
	if !v.d.has("nvmlDeviceGetName") {
		return "", v.d.missing("name")
	}
	return call2("name", v.h.GetName)
}

// Memory uses nvmlDeviceGetMemoryInfo_v2, which separates the driver's reservation
// from used memory, and falls back to v1 on drivers without it.
func (v *nvmlDevice) Memory() (MemoryInfo, error) {
	v.d.mu.Lock()
	noV2 := v.d.noV2
	v.d.mu.Unlock()
	if !noV2 && v.d.has("nvmlDeviceGetMemoryInfo_v2") {
		m, err := call2("memory v2", v.h.GetMemoryInfo_v2)
		if err == nil {
			return MemoryInfo{Total: int64(m.Total), Used: int64(m.Used), Free: int64(m.Free),
				Reserved: int64(m.Reserved)}, nil
		}
		if !isNotSupported(err) {
			return MemoryInfo{}, err
		}
		v.d.mu.Lock()
		v.d.noV2 = true
		v.d.mu.Unlock()
	}
	if !v.d.has("nvmlDeviceGetMemoryInfo") {
		return MemoryInfo{}, v.d.missing("memory")
	}
	m, err := call2("memory", v.h.GetMemoryInfo)
	if err != nil {
		return MemoryInfo{}, err
	}
	return MemoryInfo{Total: int64(m.Total), Used: int64(m.Used), Free: int64(m.Free)}, nil
}

func (v *nvmlDevice) Utilization() (Utilization, error) {
	if !v.d.has("nvmlDeviceGetUtilizationRates") {
		return Utilization{}, v.d.missing("utilization")
	}
	u, err := call2("utilization", v.h.GetUtilizationRates)
	return Utilization{GPU: int(u.Gpu), Memory: int(u.Memory)}, err
}

func (v *nvmlDevice) Temperature() (int, error) {
	if !v.d.has("nvmlDeviceGetTemperature") {
		return 0, v.d.missing("temperature")
	}
	t, err := call2("temperature", func() (uint32, nvml.Return) { return v.h.GetTemperature(nvml.TEMPERATURE_GPU) })
	return int(t), err
}

func (v *nvmlDevice) PowerMilliwatts() (int, error) {
	if !v.d.has("nvmlDeviceGetPowerUsage") {
		return 0, v.d.missing("power")
	}
	p, err := call2("power", v.h.GetPowerUsage)
	return int(p), err
}

func (v *nvmlDevice) ComputeProcesses() ([]ProcessMemory, error) {
	if !v.d.has("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
		"nvmlDeviceGetComputeRunningProcesses") {
		return nil, v.d.missing("compute processes")
	}
	ps, err := call2("compute processes", v.h.GetComputeRunningProcesses)
	if err != nil {
		return nil, err
	}
	out := make([]ProcessMemory, 0, len(ps))
	for _, p := range ps {
		used := int64(p.UsedGpuMemory)
		// NVML_VALUE_NOT_AVAILABLE (all ones) where the driver cannot attribute memory.
		if p.UsedGpuMemory == ^uint64(0) {
			used = 0
		}
		out = append(out, ProcessMemory{PID: int(p.Pid), UsedBytes: used})
	}
	return out, nil
}
