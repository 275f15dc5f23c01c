//go:build !cgo

package gpu

import "fmt"

// defaultDriver without cgo: go-nvml needs cgo, so a build without it has no GPU.
func defaultDriver() Driver { return noDriver{} }

type noDriver struct{}

func (noDriver) Init() error {
	return fmt.Errorf("%w: built without cgo, NVML is not available", ErrNoGPU)
}
func (noDriver) Shutdown() error                  { return nil }
func (noDriver) DeviceCount() (int, error)        { return 0, ErrNoGPU }
func (noDriver) Device(int) (DeviceReader, error) { return nil, ErrNoGPU }
