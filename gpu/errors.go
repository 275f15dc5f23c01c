package gpu

import "errors"

// Category sentinels. Typed errors of this package unwrap to one of them.
var (
	// ErrNoGPU means there is no usable NVIDIA driver or device.
	ErrNoGPU = errors.New("gpu: no GPU")
	// ErrNotSupported means the driver or device cannot give a reading (an old driver
	// without the symbol, or a device without the sensor).
	ErrNotSupported = errors.New("gpu: not supported")
	// ErrGPULost means the device fell off the bus or stopped answering.
	ErrGPULost = errors.New("gpu: device lost")
	// ErrInvalid means a profile, request or calibration is not acceptable as given.
	ErrInvalid = errors.New("gpu: invalid")
	// ErrRetryable marks work that did not complete for a reason that is not its own
	// (a lost GPU, a dead host, an out-of-memory error): run it again, elsewhere if
	// possible.
	ErrRetryable = errors.New("gpu: retryable")
	// ErrNeverFits means a request cannot run on any GPU as configured, however long it
	// waits.
	ErrNeverFits = errors.New("gpu: request can never fit")
	// ErrLenderGone means a host that mapped another host's weights was stopped
	// because that host ended.
	ErrLenderGone = errors.New("gpu: the host lending the weights has ended")
)
