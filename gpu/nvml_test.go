//go:build cgo

package gpu

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/require"
)

const gib = int64(1) << 30

// mockLib builds a go-nvml mock with the given devices. missing lists symbols the
// "driver" does not export.
func mockLib(devs []*mock.Device, missing ...string) *mock.Interface {
	absent := map[string]bool{}
	for _, s := range missing {
		absent[s] = true
	}
	ext := &mock.ExtendedInterface{LookupSymbolFunc: func(s string) error {
		if absent[s] {
			return errors.New("undefined symbol " + s)
		}
		return nil
	}}
	return &mock.Interface{
		InitFunc:           func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		ExtensionsFunc:     func() nvml.ExtendedInterface { return ext },
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i >= len(devs) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return devs[i], nvml.SUCCESS
		},
	}
}

// mockDevice is an H200-like device with one process of ours.
func mockDevice(uuid string) *mock.Device {
	return &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetNameFunc: func() (string, nvml.Return) { return "NVIDIA H200", nvml.SUCCESS },
		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) {
			return nvml.Memory_v2{Total: uint64(140 * gib), Reserved: uint64(gib / 2),
				Used: uint64(10 * gib), Free: uint64(140*gib - 10*gib - gib/2)}, nvml.SUCCESS
		},
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: uint64(140 * gib), Used: uint64(10*gib + gib/2),
				Free: uint64(140*gib - 10*gib - gib/2)}, nvml.SUCCESS
		},
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: 87, Memory: 40}, nvml.SUCCESS
		},
		GetTemperatureFunc: func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
			if s != nvml.TEMPERATURE_GPU {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return 61, nvml.SUCCESS
		},
		GetPowerUsageFunc: func() (uint32, nvml.Return) { return 412_500, nvml.SUCCESS },
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{
				{Pid: 4242, UsedGpuMemory: uint64(5 * gib)},
				{Pid: 4343, UsedGpuMemory: ^uint64(0)}, // NVML_VALUE_NOT_AVAILABLE
			}, nvml.SUCCESS
		},
	}
}

func TestNVMLNormalReadings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d0, d1 := mockDevice("GPU-0"), mockDevice("GPU-1")
	m := NewMonitor(ctx, MonitorConfig{Driver: NewNVMLDriver(mockLib([]*mock.Device{d0, d1}))})
	require.True(t, m.Available())
	require.NoError(t, m.Err())
	require.Equal(t, []Device{
		{Index: 0, UUID: "GPU-0", Name: "NVIDIA H200", TotalBytes: 140 * gib},
		{Index: 1, UUID: "GPU-1", Name: "NVIDIA H200", TotalBytes: 140 * gib},
	}, m.Devices())

	s := m.SampleNow(ctx)
	require.Len(t, s, 2)
	got := s[1]
	require.Equal(t, "GPU-1", got.UUID)
	require.False(t, got.Lost)
	require.Zero(t, got.Missing)
	require.Equal(t, 140*gib, got.TotalBytes)
	require.Equal(t, 10*gib, got.UsedBytes, "v2: used excludes the driver's reservation")
	require.Equal(t, gib/2, got.ReservedBytes)
	require.Equal(t, 87, got.GPUPercent)
	require.Equal(t, 40, got.MemoryPercent)
	require.Equal(t, 61, got.TemperatureC)
	require.InDelta(t, 412.5, got.PowerWatts, 1e-9)
	require.Equal(t, []ProcessMemory{{PID: 4242, UsedBytes: 5 * gib}, {PID: 4343}}, got.Processes)
	require.Empty(t, d1.GetMemoryInfoCalls(), "v1 is not used where v2 works")
	require.NoError(t, m.Close())
}

func TestNVMLInitFailureCallsNothingElse(t *testing.T) {
	t.Parallel()
	for _, ret := range []nvml.Return{nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_UNKNOWN} {
		// Only Init is set: any other call on the mock would panic, and is counted.
		lib := &mock.Interface{InitFunc: func() nvml.Return { return ret }}
		m := NewMonitor(context.Background(), MonitorConfig{Driver: NewNVMLDriver(lib)})
		require.False(t, m.Available())
		require.ErrorIs(t, m.Err(), ErrNoGPU)
		require.Nil(t, m.SampleNow(context.Background()))
		require.NoError(t, m.Close())
		require.Len(t, lib.InitCalls(), 1)
		require.Empty(t, lib.DeviceGetCountCalls())
		require.Empty(t, lib.ShutdownCalls())
		require.Empty(t, lib.ExtensionsCalls())
	}
}

func TestNVMLInitPanicIsNoGPU(t *testing.T) {
	t.Parallel()
	lib := &mock.Interface{} // InitFunc nil: the mock panics
	m := NewMonitor(context.Background(), MonitorConfig{Driver: NewNVMLDriver(lib)})
	require.False(t, m.Available())
	require.ErrorIs(t, m.Err(), ErrNoGPU)
}

func TestNVMLMissingV2SymbolFallsBackToV1(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dev := mockDevice("GPU-0")
	dev.GetMemoryInfo_v2Func = nil // calling it would panic: it must not be called
	m := NewMonitor(ctx, MonitorConfig{
		Driver: NewNVMLDriver(mockLib([]*mock.Device{dev}, "nvmlDeviceGetMemoryInfo_v2")),
	})
	require.True(t, m.Available())
	s := m.SampleNow(ctx)[0]
	require.True(t, s.Has(MetricMemory))
	require.Equal(t, 10*gib+gib/2, s.UsedBytes, "v1: used includes the reservation")
	require.Zero(t, s.ReservedBytes)
	require.Empty(t, dev.GetMemoryInfo_v2Calls())
	require.NotEmpty(t, dev.GetMemoryInfoCalls())
}

func TestNVMLV2FunctionNotFoundFallsBackToV1Once(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dev := mockDevice("GPU-0")
	dev.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{}, nvml.ERROR_FUNCTION_NOT_FOUND
	}
	m := NewMonitor(ctx, MonitorConfig{Driver: NewNVMLDriver(mockLib([]*mock.Device{dev}))})
	for range 3 {
		s := m.SampleNow(ctx)[0]
		require.Equal(t, 10*gib+gib/2, s.UsedBytes)
	}
	require.Len(t, dev.GetMemoryInfo_v2Calls(), 1, "v2 is not retried once it proved missing")
}

func TestNVMLMissingSymbolsAndPanicsBecomeMissingMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dev := mockDevice("GPU-0")
	dev.GetPowerUsageFunc = nil // the binding panics
	dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
	}
	m := NewMonitor(ctx, MonitorConfig{
		Driver: NewNVMLDriver(mockLib([]*mock.Device{dev}, "nvmlDeviceGetTemperature")),
	})
	s := m.SampleNow(ctx)[0]
	require.True(t, s.Has(MetricMemory))
	require.True(t, s.Has(MetricProcesses))
	require.False(t, s.Has(MetricPower))
	require.False(t, s.Has(MetricUtilization))
	require.False(t, s.Has(MetricTemperature))
	require.Empty(t, dev.GetTemperatureCalls(), "a missing symbol is never called")
}

func TestNVMLDeviceDisappears(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d0, d1 := mockDevice("GPU-0"), mockDevice("GPU-1")
	var gone atomic.Bool
	v2 := d1.GetMemoryInfo_v2Func
	d1.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		if gone.Load() {
			return nvml.Memory_v2{}, nvml.ERROR_GPU_IS_LOST
		}
		return v2()
	}
	m := NewMonitor(ctx, MonitorConfig{Driver: NewNVMLDriver(mockLib([]*mock.Device{d0, d1}))})
	require.False(t, m.SampleNow(ctx)[1].Lost)

	gone.Store(true)
	s := m.SampleNow(ctx)
	require.False(t, s[0].Lost)
	require.True(t, s[1].Lost)
	require.True(t, m.Devices()[1].Lost)
	require.False(t, m.Devices()[0].Lost)
	calls := len(d1.GetMemoryInfo_v2Calls())

	s = m.SampleNow(ctx)
	require.True(t, s[1].Lost, "a lost device stays lost")
	require.Len(t, d1.GetMemoryInfo_v2Calls(), calls, "a lost device is not read again")
	latest, ok := m.Latest("GPU-1")
	require.True(t, ok)
	require.True(t, latest.Lost)
}

func TestNVMLCountMissingSymbolIsNoGPU(t *testing.T) {
	t.Parallel()
	lib := mockLib(nil, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount")
	m := NewMonitor(context.Background(), MonitorConfig{Driver: NewNVMLDriver(lib)})
	require.False(t, m.Available())
	require.ErrorIs(t, m.Err(), ErrNoGPU)
	require.Empty(t, lib.DeviceGetCountCalls())
	require.Len(t, lib.ShutdownCalls(), 1, "an initialised library is shut down again")
}
